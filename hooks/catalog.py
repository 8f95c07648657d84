"""The catalog of hook classes an agent may declare, and building a registry from a declaration.

An agent declares hooks in ``model_config_json["hooks"]["class_hooks"]`` as a list of names or
``{"name": …, "params": {…}}``. Names resolve against classes registered with :func:`register_hook`
(the built-ins in :mod:`hooks.builtin` and any module listed in ``settings.HOOK_MODULES``).
Building is all-or-nothing: any unknown name, bad parameter or import error raises
:class:`HookDeclarationError`, and the run fails before any LLM call (docs/design.md §1.1).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from django.conf import settings

from fimone.fields import decrypt_text, encrypt_text
from hooks.contract import GATE_PRIORITY, Band, Hook
from hooks.kinds.base import DeclaredHook, MatchedHook, Matcher
from hooks.kinds.command import CommandHook
from hooks.kinds.http import HttpHook
from hooks.kinds.python import load_python_hook
from hooks.params import TUNABLE, hook_params_errors
from hooks.registry import HookRegistry
from hooks.shadow import ShadowHook

H = TypeVar("H", bound=type[Hook])

_CATALOG: dict[str, type[Hook]] = {}


class HookDeclarationError(ValueError):
    """An agent's hook declaration cannot be turned into hooks. ``str()`` names the problem."""


def register_hook(cls: H) -> H:
    """Class decorator: make a hook class declarable by its ``name``."""
    name = cls.name
    if not name:
        raise TypeError(f"{cls.__qualname__} needs a 'name' to be registered")
    existing = _CATALOG.get(name)
    if existing is not None and existing is not cls:
        raise TypeError(f"hook name {name!r} is already registered by {existing.__qualname__}")
    _CATALOG[name] = cls
    return cls


def _load_modules() -> None:
    for module in ("hooks.builtin", *getattr(settings, "HOOK_MODULES", ())):
        try:
            importlib.import_module(module)
        except Exception as exc:  # an operator's hook module is broken: say which and why
            raise HookDeclarationError(f"hook module {module!r} failed to import: {exc}") from exc


def hook_catalog() -> Mapping[str, type[Hook]]:
    _load_modules()
    return dict(_CATALOG)


def catalog_entries() -> list[dict[str, Any]]:
    """Every registered hook described for the admin and for declarations, by name: its point,
    ``description``, ``params_schema``, whether it is a system hook, its default ``priority``,
    ``timeout`` and ``on_error``, and ``alias_of`` for an old name kept working."""
    entries = []
    for name, cls in sorted(hook_catalog().items()):
        entries.append(
            {
                "name": name,
                "point": str(cls.point),
                "description": cls.description or (cls.__doc__ or "").strip().split("\n")[0],
                "params_schema": cls.params_schema,
                "system": bool(getattr(cls, "system", False)),
                "priority": cls.priority,
                "timeout": cls.timeout,
                "on_error": cls.on_error,
                "alias_of": getattr(cls, "alias_of", None),
            }
        )
    return entries


def hook_params_schema(name: str) -> dict[str, Any]:
    """The parameter schema of the catalog hook ``name``, or :class:`HookDeclarationError`."""
    cls = hook_catalog().get(name)
    if cls is None:
        raise HookDeclarationError(f"unknown hook {name!r}")
    return cls.params_schema


def parse_declaration(declaration: Any) -> list[tuple[str, dict[str, Any]]]:
    """Check the shape of a ``class_hooks`` list; return ``(name, params)`` pairs."""
    if declaration is None:
        return []
    if not isinstance(declaration, list):
        raise HookDeclarationError("hooks.class_hooks must be a list of names or {name, params} objects")
    parsed = []
    for index, item in enumerate(declaration):
        if isinstance(item, str):
            parsed.append((item, {}))
        elif isinstance(item, dict) and isinstance(item.get("name"), str):
            params = item.get("params", {})
            unknown = set(item) - {"name", "params"}
            if unknown:
                raise HookDeclarationError(f"hooks.class_hooks[{index}] has unknown keys: {sorted(unknown)}")
            if not isinstance(params, dict):
                raise HookDeclarationError(f"hooks.class_hooks[{index}].params must be an object")
            parsed.append((item["name"], params))
        else:
            raise HookDeclarationError(f"hooks.class_hooks[{index}] must be a name or {{name, params}}")
    return parsed


def build_hooks(declaration: Any) -> list[Hook]:
    """Instantiate every declared hook, or raise :class:`HookDeclarationError`."""
    catalog = hook_catalog()
    hooks: list[Hook] = []
    for name, params in parse_declaration(declaration):
        cls = catalog.get(name)
        if cls is None:
            known = ", ".join(sorted(n for n, c in catalog.items() if not getattr(c, "system", False)))
            raise HookDeclarationError(f"unknown hook {name!r} (known hooks: {known})")
        if getattr(cls, "system", False):
            raise HookDeclarationError(f"hook {name!r} is attached automatically and cannot be declared")
        problems = hook_params_errors(cls, params)
        if problems:
            raise HookDeclarationError(f"hook {name!r}: bad params: {'; '.join(problems[:5])}")
        try:
            hook = cls(**params)
        except (TypeError, ValueError, OverflowError) as exc:
            raise HookDeclarationError(f"hook {name!r}: bad params: {exc}") from exc
        check_below_gate(hook)
        hooks.append(hook)
    return hooks


def check_below_gate(hook: Hook) -> None:
    """Refuse a declared hook that would run at or after the approval gate (docs/design.md §1.10): the
    gate must see the final arguments, and nothing may change them once a human approved."""
    priority = hook.priority
    if not isinstance(priority, int | float) or not priority < GATE_PRIORITY:
        raise HookDeclarationError(
            f"hook {hook.hook_name!r}: priority {priority!r} is not below the approval gate's "
            f"({GATE_PRIORITY}); nothing may run after the gate"
        )


def build_registry(declaration: Any, *, system_hooks: Iterable[Hook] = ()) -> HookRegistry:
    """The registry for one run: declared hooks plus the system hooks every agent carries.

    Guarantee: no declared PreToolUse hook runs at or after the approval gate."""
    try:
        return HookRegistry([*build_hooks(declaration), *system_hooks])
    except HookDeclarationError:
        raise
    except (TypeError, ValueError) as exc:
        raise HookDeclarationError(str(exc)) from exc


# --- the chain a run keeps (docs/design.md §1.10) ---------------------------------------------------------
# A run's effective hook chain is resolved once, when the run is created, and stored on it as
# plain JSON; every registry the run uses (at start and after each resume) is rebuilt from that
# record, so editing an agent never changes a run in flight.
#
# {"v": 1,
#  "declared": [{"kind", "name", "point", "matcher", "params", "priority", "timeout", "on_error",
#                "source", "secret_enc"?}, …],                                running order
#  "system": ["read_only_guard", "confirmation_gate", …],                     by name
#  "require_confirmation_for_all": bool}                                      the agent's flag
# or {"v": 1, "error": "…"} when the declaration could not be resolved (the run then fails closed).
# ``kind`` is "class" (a catalog hook), "command", "python" or "http"; items recorded before kinds
# existed have none and are class hooks. ``source`` is "organisation" (enforced), "agent" or
# "config" (the agent's model_config_json). An http hook's secret is kept encrypted
# (``secret_enc``, fimone.fields), never in clear.
#
# Ordering rule (docs/design.md §1.12, "enforced means last word"): at each point the registry runs the
# system guards, then the agent's own hooks, then the organisation's enforced hooks, then the
# approval gate (``hooks.contract.Band``); priorities order hooks within a band. So an enforced
# hook sees the arguments that will run (PreToolUse) and the observation the model will read
# (PostToolUse): no agent hook can rewrite what it checked, remove it, or move past it. The band
# comes from the record's ``source``, never from a priority an agent could choose.
#
# An eval's chain (``"sandbox": {...}``, see ``agents.checks.sandbox_chain_of``) holds the
# organisation's enforced hooks and the system guards but no hook that asks a human: an eval
# never opens an approval request.

CHAIN_VERSION = 1
KINDS = ("class", "command", "python", "http", "prompt")
#: Kinds that run code of the declarer's choosing, or send the call's data somewhere (a prompt
#: hook, to a model): only holders of ``agents.manage_code_hooks`` may create or change them.
CODE_KINDS = frozenset({"command", "python", "http", "prompt"})
#: Kinds whose declaration carries a secret (encrypted; bound to the address it is sent to).
SECRET_KINDS = frozenset({"http", "prompt"})

KindBuilder = Callable[[Mapping[str, Any], dict[str, Any]], Hook]
_KIND_BUILDERS: dict[str, KindBuilder] = {}


def register_kind(kind: str, builder: KindBuilder) -> None:
    """Let a higher app build the hooks of ``kind`` (one of :data:`KINDS` this package cannot build
    itself: ``prompt`` needs the agents' model providers). ``builder(item, declared)`` gets the
    declaration item and the keyword arguments every declared hook takes (name, point, matcher,
    tunables) and returns the hook, or raises ``ValueError`` / ``TypeError`` naming the problem.
    Called at start-up (``AppConfig.ready``)."""
    _KIND_BUILDERS[kind] = builder


SOURCES = ("organisation", "agent", "config")


def system_hook_classes() -> list[type[Hook]]:
    """The hooks every agent carries: registered classes marked ``system`` (the built-in read-only
    guard, the approval gate that the approvals app registers at start-up, …)."""
    return [cls for cls in hook_catalog().values() if getattr(cls, "system", False) is True]


def _build_class(item: Mapping[str, Any]) -> Hook:
    name = item["name"]
    cls = hook_catalog().get(name)
    if cls is None:
        known = ", ".join(sorted(n for n, c in hook_catalog().items() if not getattr(c, "system", False)))
        raise HookDeclarationError(f"unknown hook {name!r} (known hooks: {known})")
    if getattr(cls, "system", False):
        raise HookDeclarationError(f"hook {name!r} is attached automatically and cannot be declared")
    point = item.get("point")
    if point not in (None, "") and point != cls.point:
        raise HookDeclarationError(f"hook {name!r} is a {cls.point} hook, not {point}")
    params = item.get("params") or {}
    if not isinstance(params, dict):
        raise HookDeclarationError(f"hook {name!r}: params must be an object")
    problems = hook_params_errors(cls, params)
    if problems:
        raise HookDeclarationError(f"hook {name!r}: bad params: {'; '.join(problems[:5])}")
    hook = cls(**params)
    Hook.__init__(hook, **{key: item.get(key) for key in TUNABLE})
    return hook


def _kind_params(item: Mapping[str, Any], allowed: set[str]) -> dict[str, Any]:
    params = item.get("params") or {}
    if not isinstance(params, dict):
        raise HookDeclarationError(f"hook {item.get('name')!r}: params must be an object")
    unknown = set(params) - allowed
    if unknown:
        raise HookDeclarationError(
            f"hook {item.get('name')!r}: unknown params {sorted(unknown)} (allowed: {sorted(allowed)})"
        )
    return params


def item_secret(item: Mapping[str, Any]) -> Any:
    """A declaration item's secret in clear (from ``secret``, or a recorded ``secret_enc``)."""
    return _secret_of(item)


def _secret_of(item: Mapping[str, Any]) -> Any:
    if item.get("secret") is not None:
        return item["secret"]
    if item.get("secret_enc"):
        return decrypt_text(item["secret_enc"])
    return None


def build_item(item: Mapping[str, Any]) -> Hook:
    """The hook one declaration (or one recorded chain item) describes, or
    :class:`HookDeclarationError` naming the problem. Every check a run applies happens here, so
    saving a declaration and starting a run refuse the same things."""
    kind = item.get("kind") or "class"
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise HookDeclarationError("a hook declaration needs a name")
    tunables = {key: item.get(key) for key in TUNABLE}
    declared = {"name": name, "point": item.get("point"), "matcher": item.get("matcher"), **tunables}
    try:
        if kind == "class":
            hook = _build_class(item)
        elif kind == "command":
            params = _kind_params(item, {"argv", "env"})
            hook = CommandHook(argv=params.get("argv"), env=params.get("env"), **declared)
        elif kind == "http":
            params = _kind_params(item, {"url"})
            hook = HttpHook(url=params.get("url"), secret=_secret_of(item), **declared)
        elif kind == "python":
            params = dict(item.get("params") or {})
            path = params.pop("path", None)
            hook = load_python_hook(path=path, params=params, **declared)
        elif kind in _KIND_BUILDERS:
            hook = _KIND_BUILDERS[kind](item, declared)
        elif kind in KINDS:
            raise HookDeclarationError(f"hook {name!r}: {kind} hooks are not available in this process")
        else:
            raise HookDeclarationError(f"hook {name!r}: unknown kind {kind!r} (kinds: {', '.join(KINDS)})")
        if not isinstance(hook, DeclaredHook | MatchedHook):  # python classes come matched
            matcher = Matcher(item.get("matcher"))
            if not matcher.matches_all:
                hook = MatchedHook(hook, matcher)
    except HookDeclarationError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise HookDeclarationError(f"hook {name!r}: bad params: {exc}") from exc
    check_below_gate(hook)
    return hook


def _record(item: Mapping[str, Any], hook: Hook, source: str) -> dict[str, Any]:
    kind = item.get("kind") or "class"
    params = dict(item.get("params") or {})
    if kind == "class":
        params = {k: v for k, v in params.items() if k not in TUNABLE}
    record = {
        "kind": kind,
        "name": item["name"],
        "point": str(hook.point),
        "matcher": item.get("matcher") or "",
        "params": params,
        "priority": hook.priority,
        "timeout": hook.timeout,
        "on_error": hook.on_error,
        "source": source,
    }
    if item.get("mode") == "shadow":  # absent: enforced, as every chain recorded before modes
        record["mode"] = "shadow"
        record["declaration"] = item.get("id")
    secret = _secret_of(item)
    if kind in SECRET_KINDS and secret is not None:
        record["secret_enc"] = encrypt_text(secret)
    return record


def resolve_chain(
    declaration: Any,
    *,
    require_confirmation_for_all: bool = False,
    enforced: Iterable[Mapping[str, Any]] = (),
    declared: Iterable[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Resolve an agent's hooks into the record a run keeps, or raise :class:`HookDeclarationError`
    (every check of :func:`build_item` applies).

    ``enforced``: the organisation's enforced declarations; ``declared``: the agent's own; both as
    items (``kind``, ``name``, ``point``, ``matcher``, ``params``, tunables, ``secret``, ``mode``
    and the declaration's ``id``); an item whose ``mode`` is ``off`` is left out, one in ``shadow``
    is recorded so (``hooks.shadow``). ``declaration``: the agent's ``model_config_json``
    ``class_hooks`` list, still honoured. The running order follows the ordering rule above.
    """
    enforced_records = []
    for item in enforced:
        if item.get("mode") != "off":
            enforced_records.append(_record(item, build_item(item), "organisation"))
    agent_records = []
    for item in declared:
        if item.get("mode") != "off":
            agent_records.append(_record(item, build_item(item), "agent"))
    for name, params in parse_declaration(declaration):
        item = {
            "kind": "class",
            "name": name,
            "params": {k: v for k, v in params.items() if k not in TUNABLE},
            **{k: params.get(k) for k in TUNABLE},
        }
        agent_records.append(_record(item, build_item(item), "config"))
    # Recorded in running order within each point: the agent's hooks, then the enforced ones.
    ordered = sorted(agent_records, key=lambda r: r["priority"]) + sorted(
        enforced_records, key=lambda r: r["priority"]
    )
    return {
        "v": CHAIN_VERSION,
        "declared": ordered,
        "system": [cls.name for cls in system_hook_classes()],
        "require_confirmation_for_all": bool(require_confirmation_for_all),
    }


def declared_band(source: Any, hook_class: type[Hook]) -> Band:
    """The band a declared hook runs in (docs/design.md §1.12): the organisation's enforced hooks after the
    agent's, whatever their priorities; a hook whose class asks to run first (``Band.GUARD``: it
    only records) runs first. Nothing a declarer chooses puts a hook later than its source."""
    if getattr(hook_class, "band", Band.AGENT) == Band.GUARD:
        return Band.GUARD
    return Band.ENFORCED if source == "organisation" else Band.AGENT


def _declared_class(hook: Hook) -> type[Hook]:
    return type(hook.inner) if isinstance(hook, MatchedHook) else type(hook)


def system_band(hook_class: type[Hook]) -> Band:
    """A system hook's band: its class's (the gate's is ``GATE``), else first, as a guard."""
    band = getattr(hook_class, "band", Band.GUARD)
    return Band(band) if band in (Band.GUARD, Band.GATE) else Band.GUARD


def registry_from_chain(chain: Any) -> HookRegistry:
    """The registry a run's recorded chain describes, or :class:`HookDeclarationError` (a
    recorded error, a hook that no longer exists, bad params: the run fails closed).

    Each hook runs in its band (:func:`declared_band`, :func:`system_band`); one recorded in
    shadow mode runs wrapped in a :class:`~hooks.shadow.ShadowHook`. A sandboxed chain
    (an eval's) leaves out every system hook that asks a human."""
    if not isinstance(chain, dict) or chain.get("v") != CHAIN_VERSION:
        raise HookDeclarationError("the run's recorded hook chain is missing or of an unknown version")
    if "error" in chain:
        raise HookDeclarationError(str(chain["error"]))
    sandboxed = chain.get("sandbox") is not None
    catalog = hook_catalog()
    hooks: list[Hook] = []
    try:
        for item in chain["declared"]:
            if not isinstance(item, dict):
                raise HookDeclarationError("a recorded hook is not an object")
            if (item.get("kind") or "class") == "class":
                cls = catalog.get(item["name"])
                if cls is None or getattr(cls, "system", False):
                    raise HookDeclarationError(f"hook {item['name']!r} is not declarable any more")
            # The tunables as resolved at the run's start, checked as a declaration would be.
            hook = build_item({**item, **{key: item[key] for key in TUNABLE}})
            hook.band = declared_band(item.get("source"), _declared_class(hook))
            if item.get("mode") == "shadow":
                hook = ShadowHook(hook, declaration=item.get("declaration"), source=item.get("source", ""))
            hooks.append(hook)
        for name in chain["system"]:
            cls = catalog.get(name)
            if cls is None or not getattr(cls, "system", False):
                raise HookDeclarationError(f"system hook {name!r} is not registered")
            if sandboxed and getattr(cls, "asks_humans", False):
                continue  # an eval never asks a human (docs/design.md §1.2)
            hook = cls()
            hook.band = system_band(cls)
            hooks.append(hook)
        return HookRegistry(hooks)
    except HookDeclarationError:
        raise
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise HookDeclarationError(f"the run's recorded hook chain cannot be rebuilt: {exc}") from exc
