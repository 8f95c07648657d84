"""Validation of an agent's configuration, shared by admin forms, the API and the engine."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError

from agents.llm.base import LLMConfigError
from agents.llm.factory import check_credentials, check_model_config
from agents.tools.builtins import BUILTIN_TOOLS
from agents.tools.sandbox import NOTE
from hooks.catalog import CODE_KINDS, HookDeclarationError, build_hooks, hook_catalog, resolve_chain


def hooks_declaration(config: Any) -> Any:
    hooks = (config or {}).get("hooks", {}) if isinstance(config, dict) else {}
    if not isinstance(hooks, dict):
        raise HookDeclarationError('"hooks" must be an object with "class_hooks"')
    return hooks.get("class_hooks", [])


def hook_chain_of(agent: Any, declarations: Iterable[Any] | None = None) -> dict[str, Any]:
    """The hook chain a new run of ``agent`` keeps (``Run.hook_chain``): its organisation's
    enforced declarations, its own declarations and its ``model_config_json`` ``class_hooks``,
    resolved now, or the reason they cannot be, recorded so the run fails closed with it.
    ``declarations``: the rows of ``agent.hook_declarations_query()`` if the caller read them."""
    try:
        enforced, own = agent.hook_declaration_items(declarations)
        return resolve_chain(
            hooks_declaration(agent.model_config_json),
            require_confirmation_for_all=agent.require_confirmation_for_all,
            enforced=enforced,
            declared=own,
        )
    except HookDeclarationError as exc:
        return {"v": 1, "error": str(exc)}


def sandbox_chain_of(agent: Any, *, sandbox: dict[str, Any]) -> dict[str, Any]:
    """The chain an eval's run of ``agent`` keeps (docs/design.md §1.2): the organisation's enforced
    declarations and the system guards — never the agent's own hooks, never a hook that asks a
    human — and the ``sandbox`` record (:func:`agents.tools.sandbox.sandbox_spec`) that makes
    its tools answer without reaching the outside world. Enforced SessionStart hooks that run
    code of their own (command, http, python) are left out too: they would run although no call
    was made live. Like :func:`hook_chain_of`, a chain that cannot be resolved is recorded as
    its reason, and the run fails closed with it."""
    try:
        enforced, _own = agent.hook_declaration_items()
        kept = [i for i in enforced if not (i.get("point") == "SessionStart" and i.get("kind") in CODE_KINDS)]
        chain = resolve_chain(
            None, require_confirmation_for_all=agent.require_confirmation_for_all, enforced=kept
        )
    except HookDeclarationError as exc:
        return {"v": 1, "error": str(exc)}
    catalog = hook_catalog()
    chain["system"] = [n for n in chain["system"] if not getattr(catalog.get(n), "asks_humans", False)]
    chain["sandbox"] = sandbox
    chain["bypassed"] = NOTE
    return chain


API_KEY_MISPLACED = (
    '"api_key" does not belong here (it would be stored in clear): '
    'put it in the agent\'s secrets as {"api_key": "…"}, which are encrypted'
)


def check_agent_config(agent: Any) -> None:
    """Raise ``ValidationError`` naming the field when the agent could not run."""
    errors: dict[str, list[str]] = {}
    if isinstance(agent.model_config_json, dict) and "api_key" in agent.model_config_json:
        # Stored in clear and shown to whoever may view the agent: refused, without echoing it.
        errors.setdefault("model_config_json", []).append(API_KEY_MISPLACED)
    secrets = agent.secrets
    if secrets is not None and not (
        isinstance(secrets, dict) and all(isinstance(v, str) for v in secrets.values())
    ):
        errors.setdefault("secrets", []).append('must be a JSON object of strings, e.g. {"api_key": "sk-…"}')
    try:
        check_model_config(agent.model_config_json)
    except LLMConfigError as exc:
        errors.setdefault("model_config_json", []).append(str(exc))
    else:
        if "secrets" not in errors:
            try:
                # The key the agent brings decides where it may send requests: refused here, at
                # save time, and again when a run builds its provider.
                check_credentials(agent.provider_config())
            except LLMConfigError as exc:
                errors.setdefault("secrets", []).append(str(exc))
    try:
        build_hooks(hooks_declaration(agent.model_config_json))
    except HookDeclarationError as exc:
        errors.setdefault("model_config_json", []).append(f"hooks: {exc}")
    builtin = agent.builtin_tools or []
    if not isinstance(builtin, list) or not all(isinstance(name, str) for name in builtin):
        errors.setdefault("builtin_tools", []).append("must be a list of tool names")
    else:
        unknown = sorted(set(builtin) - set(BUILTIN_TOOLS))
        if unknown:
            errors.setdefault("builtin_tools", []).append(
                f"unknown built-in tools {unknown} (known: {', '.join(sorted(BUILTIN_TOOLS))})"
            )
    if errors:
        raise ValidationError(errors)
