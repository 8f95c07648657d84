"""Services for hook declarations: saving them under the code-hooks permission, adopting the
JSON form (``model_config_json.hooks.class_hooks``), and YAML export / import.

Who may do what:
- command, python and http declarations run code of the declarer's choosing: creating, changing
  or deleting one (or turning one into another kind) needs ``agents.manage_code_hooks``;
- an agent's declarations are an operator's (or admin's) of its organisation; enforced ones an
  organisation admin's. ``actor=None`` is the operator console (``manage.py hooks``), trusted.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import yaml
from django.core.exceptions import ValidationError
from django.db import transaction

from agents.checks import hooks_declaration
from agents.models import Agent, HookDeclaration
from fimone.errors import ServiceError
from hooks.catalog import CODE_KINDS, KINDS, SECRET_KINDS, HookDeclarationError, parse_declaration
from tenancy.models import Organization
from tenancy.permissions import check_operator, check_organization_admin

CODE_PERMISSION = "agents.manage_code_hooks"
_TUNABLE = ("priority", "timeout", "on_error")


def may_manage_code_hooks(user: Any) -> bool:
    return bool(user is not None and user.is_active and user.has_perm(CODE_PERMISSION))


def check_may_change_kinds(*, actor: Any, kinds: set[str]) -> None:
    """Refuse (``forbidden``) a change touching a code kind by someone without the permission."""
    if actor is not None and kinds & CODE_KINDS and not may_manage_code_hooks(actor):
        raise ServiceError(
            "command, python and http hooks run code: changing one needs the "
            "'Can create or change command, python and http hooks' permission",
            code="forbidden",
        )


def _check_owner(*, actor: Any, declaration: HookDeclaration) -> None:
    if actor is None:
        return
    if declaration.agent_id is None:
        check_organization_admin(user=actor, organization_id=declaration.organization_id)
    else:
        check_operator(user=actor, organization_id=declaration.organization_id)


def _kinds_touched(declaration: HookDeclaration) -> set[str]:
    kinds = {declaration.kind}
    if declaration.pk is not None:
        previous = HookDeclaration.objects.filter(pk=declaration.pk).values_list("kind", flat=True).first()
        if previous is not None:
            kinds.add(previous)
    return kinds


@transaction.atomic
def hook_declaration_save(*, declaration: HookDeclaration, actor: Any) -> HookDeclaration:
    """Validate (``full_clean``: the hook is built as a run would build it) and save. Raises
    ``ServiceError`` for who may not, ``ValidationError`` naming the field otherwise."""
    if declaration.agent_id is not None and declaration.organization_id is None:
        declaration.organization_id = declaration.agent.organization_id
    _check_owner(actor=actor, declaration=declaration)
    check_may_change_kinds(actor=actor, kinds=_kinds_touched(declaration))
    declaration.full_clean()
    declaration.save()
    return declaration


@transaction.atomic
def hook_declaration_delete(*, declaration: HookDeclaration, actor: Any) -> None:
    _check_owner(actor=actor, declaration=declaration)
    check_may_change_kinds(actor=actor, kinds=_kinds_touched(declaration))
    declaration.delete()


def config_items(agent: Agent) -> list[dict[str, Any]]:
    """The agent's ``class_hooks`` JSON as declaration items (``HookDeclarationError`` if
    unreadable)."""
    items = []
    for name, params in parse_declaration(hooks_declaration(agent.model_config_json)):
        items.append(
            {
                "kind": "class",
                "name": name,
                "params": {k: v for k, v in params.items() if k not in _TUNABLE},
                **{k: params.get(k) for k in _TUNABLE},
            }
        )
    return items


def _without_class_hooks(config: Any) -> Any:
    if not isinstance(config, dict) or not isinstance(config.get("hooks"), dict):
        return config
    rest = {k: v for k, v in config["hooks"].items() if k != "class_hooks"}
    config = {k: v for k, v in config.items() if k != "hooks"}
    if rest:
        config["hooks"] = rest
    return config


@transaction.atomic
def hook_declarations_adopt_config(*, agent: Agent) -> list[HookDeclaration]:
    """Turn the agent's ``model_config_json.hooks.class_hooks`` (the JSON form, still accepted
    as input) into declaration rows after its own, and take it out of the JSON. An unreadable list
    is left where it is (the agent's validation reports it)."""
    try:
        items = config_items(agent)
    except HookDeclarationError:
        return []
    if not items:
        return []
    created = []
    for item in items:
        row = HookDeclaration(
            organization_id=agent.organization_id,
            agent=agent,
            kind="class",
            name=item["name"],
            params=item["params"],
            priority=item["priority"],
            timeout=item["timeout"],
            on_error=item["on_error"] or "",
        )
        row.full_clean()
        row.save()
        created.append(row)
    agent.model_config_json = _without_class_hooks(agent.model_config_json)
    agent.save(update_fields=["model_config_json"])
    return created


# --- YAML -----------------------------------------------------------------------------------------
# agent: 12                    # or   organisation: Acme   (enforced hooks)
# hooks:
#   - name: payments_freeze
#     kind: command            # class | command | python | http
#     point: PreToolUse        # PreToolUse | PostToolUse | SessionStart (class: optional)
#     matcher: "oa__purchase_*"
#     priority: 50             # optional: the kind's default
#     timeout: 5               # optional
#     on_error: block          # optional: block | allow
#     mode: enforce            # enforce | shadow | off (older files: enabled: true | false)
#     params: {argv: [/opt/hooks/freeze.sh]}
# An http or prompt hook's secret is never exported; on import it is taken from ``secret:`` if
# given, else from the target's existing hook of the same kind and name whose url (a prompt hook:
# its model's base_url) has the same origin (a stored secret is bound to the address it was
# entered for).

FIELDS = (
    "name",
    "kind",
    "point",
    "matcher",
    "priority",
    "timeout",
    "on_error",
    "mode",
    "enabled",
    "params",
    "secret",
)


class HookFileError(ValueError):
    """A hooks file that cannot be imported. ``problems`` are ``"FILE:LINE: path: message"``."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def _export_item(row: HookDeclaration | dict[str, Any]) -> dict[str, Any]:
    item = row.as_item() if isinstance(row, HookDeclaration) else dict(row)
    out: dict[str, Any] = {"name": item["name"], "kind": item.get("kind") or "class"}
    for key in ("point", "matcher", "priority", "timeout", "on_error"):
        if item.get(key) not in (None, ""):
            out[key] = item[key]
    out["mode"] = str(row.mode) if isinstance(row, HookDeclaration) else "enforce"
    out["params"] = item.get("params") or {}
    return out


def hooks_export(*, agent: Agent | None = None, organization: Organization | None = None) -> str:
    """The YAML of an agent's own declarations (its JSON ``class_hooks`` included), or of an
    organisation's enforced ones. Secrets are never written."""
    if (agent is None) == (organization is None):
        raise ValueError("export an agent or an organisation")
    if agent is not None:
        rows: list[Any] = list(agent.hook_declarations.order_by("priority", "pk"))
        with contextlib.suppress(HookDeclarationError):
            rows += config_items(agent)
        doc: dict[str, Any] = {"agent": agent.pk}
    else:
        rows = list(HookDeclaration.objects.filter(organization=organization, agent__isnull=True))
        doc = {"organisation": organization.name}
    doc["hooks"] = [_export_item(row) for row in rows]
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, default_flow_style=False)


@dataclass
class _Located:
    value: Any
    lines: dict[tuple[Any, ...], int]


def _load(text: str, filename: str) -> _Located:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise HookFileError([f"{filename}:1: the file is empty"])
        value = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise HookFileError([f"{filename}:{line}: not valid YAML: {exc.problem or exc}"]) from None
    except yaml.YAMLError as exc:
        raise HookFileError([f"{filename}:1: not valid YAML: {exc}"]) from None
    finally:
        loader.dispose()
    lines: dict[tuple[Any, ...], int] = {}
    problems: list[str] = []

    def walk(n: yaml.Node, path: tuple[Any, ...]) -> None:
        lines[path] = n.start_mark.line + 1
        if isinstance(n, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, value_node in n.value:
                key = key_node.value
                if key in seen:
                    problems.append(
                        f"{filename}:{key_node.start_mark.line + 1}: {_path((*path, key))}: duplicate key"
                    )
                seen.add(key)
                walk(value_node, (*path, key))
                lines[(*path, key)] = key_node.start_mark.line + 1
        elif isinstance(n, yaml.SequenceNode):
            for index, child in enumerate(n.value):
                walk(child, (*path, index))

    walk(node, ())
    if problems:
        raise HookFileError(problems)
    return _Located(value, lines)


def _path(path: tuple[Any, ...]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top)"


class _Problems:
    def __init__(self, filename: str, located: _Located) -> None:
        self.filename, self.located, self.items = filename, located, []

    def add(self, path: tuple[Any, ...], message: str) -> None:
        line = None
        for end in range(len(path), -1, -1):  # the nearest enclosing node that has a line
            line = self.located.lines.get(path[:end])
            if line is not None:
                break
        self.items.append(f"{self.filename}:{line or 1}: {_path(path)}: {message}")


def _check_item(raw: Any, index: int, problems: _Problems) -> dict[str, Any] | None:
    here = ("hooks", index)
    if not isinstance(raw, dict):
        problems.add(here, "must be a mapping of hook fields")
        return None
    before = len(problems.items)
    for key in raw:
        if key not in FIELDS:
            problems.add((*here, key), f"unknown field (fields: {', '.join(FIELDS)})")
    checks: dict[str, tuple[Any, str]] = {
        "name": (lambda v: isinstance(v, str) and 0 < len(v) <= 100, "must be a name of 1-100 characters"),
        "kind": (lambda v: v in KINDS, f"must be one of {', '.join(KINDS)}"),
        "point": (
            lambda v: v in HookDeclaration.Point.values,
            f"must be one of {', '.join(HookDeclaration.Point.values)}",
        ),
        "matcher": (
            lambda v: isinstance(v, str) and len(v) <= 200,
            "must be a string of at most 200 characters",
        ),
        "priority": (lambda v: type(v) is int, "must be a whole number"),
        "timeout": (lambda v: type(v) in (int, float) and v > 0, "must be a positive number of seconds"),
        "on_error": (lambda v: v in ("block", "allow"), "must be block or allow"),
        "mode": (
            # YAML 1.1 reads an unquoted ``off`` as false: that is what was meant.
            lambda v: v is False or v in HookDeclaration.Mode.values,
            f"must be one of {', '.join(HookDeclaration.Mode.values)}",
        ),
        "enabled": (lambda v: type(v) is bool, "must be true or false"),
        "params": (lambda v: isinstance(v, dict), "must be a mapping"),
        "secret": (lambda v: isinstance(v, str), "must be a string"),
    }
    if "name" not in raw:
        problems.add(here, "needs a name")
    for key, (ok, message) in checks.items():
        if key in raw and raw[key] is not None and not ok(raw[key]):
            problems.add((*here, key), message)
    if raw.get("enabled") is False and raw.get("mode") not in (None, False, HookDeclaration.Mode.OFF):
        problems.add((*here, "enabled"), "contradicts 'mode': keep 'mode' alone")
    return raw if len(problems.items) == before else None


def _target(
    located: _Located, problems: _Problems, agent: Agent | None, organization: Organization | None
) -> tuple[Agent | None, Organization | None]:
    doc = located.value
    if agent is not None or organization is not None:
        return agent, organization
    if "agent" in doc and "organisation" in doc:
        problems.add(("agent",), "name an agent or an organisation, not both")
    elif "agent" in doc:
        found = Agent.objects.filter(pk=doc["agent"]).first() if type(doc["agent"]) is int else None
        if found is None:
            problems.add(("agent",), f"no agent with id {doc['agent']!r}")
        return found, None
    elif "organisation" in doc:
        found_org = Organization.objects.filter(name=doc["organisation"]).first()
        if found_org is None:
            problems.add(("organisation",), f"no organisation named {doc['organisation']!r}")
        return None, found_org
    else:
        problems.add(
            (), "name the target: 'agent: <id>' or 'organisation: <name>' (or pass --agent/--organisation)"
        )
    return None, None


def _mode_of(item: dict[str, Any]) -> str:
    """An item's mode: ``mode``, else the older ``enabled`` (``false``: off), else enforce."""
    if item.get("mode") is False:  # an unquoted ``off``, read by YAML 1.1 as false
        return HookDeclaration.Mode.OFF
    if item.get("mode") is not None:
        return str(item["mode"])
    return HookDeclaration.Mode.OFF if item.get("enabled") is False else HookDeclaration.Mode.ENFORCE


@dataclass
class _Parsed:
    rows: list[HookDeclaration]
    agent: Agent | None
    organization: Organization | None
    existing: Any


def hooks_parse(
    *, text: str, filename: str = "<hooks>", agent: Agent, actor: Any = None
) -> list[HookDeclaration]:
    """The declarations a hooks file gives ``agent``, checked as an import checks them and not
    saved (a replay tries them: ``console.chain_replay``). Raises :class:`HookFileError` listing
    every problem with its line, ``ServiceError`` for code hooks ``actor`` may not write."""
    parsed = _parse(text=text, filename=filename, agent=agent, organization=None)
    check_may_change_kinds(actor=actor, kinds={r.kind for r in parsed.rows})
    return parsed.rows


@transaction.atomic
def hooks_import(
    *,
    text: str,
    filename: str = "<hooks>",
    agent: Agent | None = None,
    organization: Organization | None = None,
    actor: Any = None,
) -> list[HookDeclaration]:
    """Replace the target's declarations (an agent's own, or an organisation's enforced ones) with
    the file's, all or nothing. Raises :class:`HookFileError` listing every problem with its line."""
    parsed = _parse(text=text, filename=filename, agent=agent, organization=organization)
    rows, agent, existing = parsed.rows, parsed.agent, parsed.existing
    check_may_change_kinds(
        actor=actor, kinds={r.kind for r in rows} | set(existing.values_list("kind", flat=True))
    )
    existing.delete()
    for row in rows:
        row.save()
    if agent is not None:
        agent.model_config_json = _without_class_hooks(agent.model_config_json)
        agent.save(update_fields=["model_config_json"])
    return rows


def _parse(*, text: str, filename: str, agent: Agent | None, organization: Organization | None) -> _Parsed:
    """A hooks file's declarations for its target, checked and not saved (:func:`hooks_import`)."""
    located = _load(text, filename)
    problems = _Problems(filename, located)
    doc = located.value
    if not isinstance(doc, dict):
        raise HookFileError([f"{filename}:1: the file must be a mapping with 'hooks'"])
    unknown = set(doc) - {"agent", "organisation", "hooks"}
    for key in sorted(unknown, key=str):
        problems.add((key,), "unknown field (fields: agent, organisation, hooks)")
    agent, organization = _target(located, problems, agent, organization)
    raw_hooks = doc.get("hooks")
    if not isinstance(raw_hooks, list):
        problems.add(("hooks",), "must be a list of hooks")
        raw_hooks = []
    items = [_check_item(raw, index, problems) for index, raw in enumerate(raw_hooks)]
    if problems.items:
        raise HookFileError(problems.items)
    if agent is not None:
        organization = agent.organization
        existing = HookDeclaration.objects.filter(agent=agent)
    else:
        existing = HookDeclaration.objects.filter(organization=organization, agent__isnull=True)
    stored = {(row.kind, row.name): row for row in existing.filter(kind__in=SECRET_KINDS)}
    rows = []
    for index, item in enumerate(items):
        assert item is not None
        kind = item.get("kind") or "class"
        row = HookDeclaration(
            organization=organization,
            agent=agent,
            name=item["name"],
            kind=kind,
            point=item.get("point") or "",
            matcher=item.get("matcher") or "",
            priority=item.get("priority"),
            timeout=item.get("timeout"),
            on_error=item.get("on_error") or "",
            mode=_mode_of(item),
            params=item.get("params") or {},
            secret=item.get("secret") if kind in SECRET_KINDS else None,
        )
        if kind in SECRET_KINDS and row.secret is None:
            same = stored.get((kind, item["name"]))
            if same is not None and same.secrets_address() != row.secrets_address():
                where = "url" if kind == "http" else "model's base_url"
                problems.add(
                    ("hooks", index),
                    f"the {where}'s scheme, host or port changed: give 'secret:' again (a stored secret "
                    "is only sent to the address it was entered for)",
                )
                continue
            row.secret = same.secret if same is not None else None
            if row.secret is None and kind == "http":
                problems.add(("hooks", index), "an http hook needs 'secret:' (exports never include it)")
                continue
        try:
            row.full_clean()
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                path = ("hooks", index) if field == "__all__" else ("hooks", index, field)
                for message in messages:
                    problems.add(path, message)
        rows.append(row)
    if problems.items:
        raise HookFileError(problems.items)
    return _Parsed(rows=rows, agent=agent, organization=organization, existing=existing)
