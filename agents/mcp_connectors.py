"""Services for MCP connectors: saving one (a stdio server's command is code: it needs the
code-hooks permission) and listing its server's tools into actions, with what changed.

Contracts of :func:`connector_tools_refresh`:

* each tool the server lists is one :class:`~agents.models.ConnectorAction` of the connector,
  ``remote_name`` the server's name, ``name`` the same where a model can read it (else made
  readable: :func:`action_name_for`), with the server's description, input schema and annotations;
* a new tool's ``is_write`` and ``requires_confirmation`` come from its annotations
  (:func:`agents.models.mcp_tool_defaults`); afterwards they are the operator's, except that a
  tool the server newly calls writing or destructive is raised to it (never lowered quietly);
* the tools of the first listing are enabled; a tool that appears later stays off until an
  operator enables it; a tool the server no longer lists is kept (its history stays readable),
  marked missing and not offered, and offered again if it comes back;
* a server that cannot be reached or listed changes nothing and raises :class:`ServiceError`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from agents.hook_declarations import check_may_change_kinds
from agents.models import Connector, ConnectorAction, mcp_tool_defaults
from agents.models.connectors import ACTION_NAME_RE, TOOL_NAME_MAX
from agents.services import ServiceError, check_operator
from agents.tools.base import ToolError
from agents.tools.mcp_tools import McpServer, RemoteTool, list_remote_tools
from agents.tools.schema import check_parameters_schema

_UNREADABLE = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass
class ToolsDiff:
    """What one listing changed, in names people read (``<slug>__<name>``)."""

    added: list[str] = field(default_factory=list)
    added_disabled: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    returned: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    raised: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    unchanged: int = 0

    @property
    def is_empty(self) -> bool:
        return not (self.added or self.removed or self.returned or self.changed or self.refused)

    def lines(self) -> list[str]:
        out = []
        if self.added:
            out.append(f"New tools: {', '.join(sorted(self.added))}.")
        if self.added_disabled:
            out.append(
                f"Off until you enable them (the server added them after its first listing): "
                f"{', '.join(sorted(self.added_disabled))}."
            )
        if self.changed:
            out.append(f"Changed on the server: {'; '.join(self.changed)}.")
        if self.raised:
            raised = ", ".join(sorted(self.raised))
            out.append(f"Now need a person's approval (the server calls them destructive): {raised}.")
        if self.removed:
            out.append(f"No longer listed by the server, not offered: {', '.join(sorted(self.removed))}.")
        if self.returned:
            out.append(f"Listed again: {', '.join(sorted(self.returned))}.")
        if self.refused:
            out.append(f"Not taken: {'; '.join(self.refused)}.")
        if not out:
            out.append(f"No change: {self.unchanged} tool(s), as before.")
        return out


def check_may_set_command(*, actor: Any, connector: Connector) -> None:
    """Refuse (``forbidden``) creating, changing or removing an MCP server run here over stdio
    without the code-hooks permission: its command (and the environment it gets) runs on the
    platform's machines, as a command hook does."""
    if actor is None:
        return
    stored = None
    if connector.pk is not None:
        stored = Connector.objects.filter(pk=connector.pk).first()
    ran_before = stored is not None and stored.runs_a_command
    if connector.runs_a_command:
        unchanged = ran_before and (stored.command, stored.secrets) == (connector.command, connector.secrets)
        if not unchanged:
            check_may_change_kinds(actor=actor, kinds={"command"})
    elif ran_before:
        check_may_change_kinds(actor=actor, kinds={"command"})


@transaction.atomic
def mcp_connector_save(*, connector: Connector, actor: Any) -> Connector:
    """Validate and save an MCP connector as ``actor`` (``None``: the trusted console).
    Raises ``ServiceError`` for who may not, ``ValidationError`` naming the field otherwise."""
    if actor is not None:
        check_operator(user=actor, organization_id=connector.organization_id)
    check_may_set_command(actor=actor, connector=connector)
    connector.full_clean()
    connector.save()
    return connector


def action_name_for(remote_name: str, *, slug: str, taken: set[str]) -> str:
    """The action name of the server's tool ``remote_name``: the name itself where a model can
    read it and ``<slug>__<name>`` fits :data:`TOOL_NAME_MAX`; else made readable and short, with a
    few characters of its hash so that two tools never share one."""
    room = TOOL_NAME_MAX - len(slug) - 2
    readable_as_is = ACTION_NAME_RE.match(remote_name) and "__" not in remote_name
    if readable_as_is and len(remote_name) <= room and remote_name not in taken:
        return remote_name
    readable = re.sub(r"_{2,}", "_", _UNREADABLE.sub("_", remote_name)).strip("_-") or "tool"
    digest = hashlib.sha256(remote_name.encode()).hexdigest()[:6]
    name = f"{readable[: room - 7]}_{digest}"
    if not name[0].isalnum():
        name = f"t{name[1:]}"
    return name


def connector_tools_refresh(*, connector: Connector, actor: Any) -> ToolsDiff:
    """List the server's tools and bring the connector's actions in line (module docstring).
    ``actor`` must be an operator of the connector's organisation (``None``: the console)."""
    if actor is not None:
        check_operator(user=actor, organization_id=connector.organization_id)
    if not connector.is_mcp:
        raise ServiceError("only MCP connectors list their tools", code="invalid")
    if connector.is_archived:
        raise ServiceError("the connector is archived", code="conflict")
    try:
        remote = async_to_sync(list_remote_tools)(McpServer.of(connector))
    except ToolError as exc:
        raise ServiceError(str(exc), code="unavailable") from None
    return _apply_listing(connector_id=connector.pk, remote=remote)


@transaction.atomic
def _apply_listing(*, connector_id: int, remote: list[RemoteTool]) -> ToolsDiff:
    connector = Connector.objects.select_for_update().get(pk=connector_id)
    first = connector.tools_listed_at is None
    now = timezone.now()
    existing = {a.remote_name: a for a in connector.actions.exclude(remote_name="")}
    taken = set(connector.actions.values_list("name", flat=True))
    diff = ToolsDiff()
    seen: set[str] = set()
    for tool in remote:
        if tool.name in seen:
            diff.refused.append(f"{tool.name!r} is listed twice")
            continue
        seen.add(tool.name)
        try:
            check_parameters_schema(tool.input_schema)
        except ValidationError as exc:
            diff.refused.append(f"{tool.name!r}: its input schema is not usable ({'; '.join(exc.messages)})")
            continue
        action = existing.get(tool.name)
        if action is None:
            name = action_name_for(tool.name, slug=connector.slug, taken=taken)
            taken.add(name)
            writes, confirm = mcp_tool_defaults(tool.annotations)
            action = ConnectorAction(
                connector=connector,
                name=name,
                remote_name=tool.name,
                display_name=tool.title[:120],
                description=tool.description,
                parameters_schema=tool.input_schema,
                annotations=tool.annotations,
                is_write=writes,
                requires_confirmation=confirm,
                enabled=first,
            )
            action.save()
            (diff.added if first else diff.added_disabled).append(action.tool_name)
            continue
        _update(action, tool, diff)
    for remote_name, action in existing.items():
        if remote_name not in seen and action.missing_since is None:
            action.missing_since = now
            action.save(update_fields=["missing_since"])
            diff.removed.append(action.tool_name)
    connector.tools_listed_at = now
    connector.save(update_fields=["tools_listed_at"])
    return diff


def _update(action: ConnectorAction, tool: RemoteTool, diff: ToolsDiff) -> None:
    changes = []
    if action.missing_since is not None:
        action.missing_since = None
        diff.returned.append(action.tool_name)
    if action.description != tool.description:
        action.description = tool.description
        changes.append("description")
    if action.parameters_schema != tool.input_schema:
        action.parameters_schema = tool.input_schema
        changes.append("input schema")
    if action.annotations != tool.annotations:
        action.annotations = tool.annotations
        changes.append("annotations")
        writes, confirm = mcp_tool_defaults(tool.annotations)
        if writes and not action.is_write:
            action.is_write = True
        if confirm and not action.requires_confirmation:
            action.requires_confirmation = True
            diff.raised.append(action.tool_name)
    if changes:
        diff.changed.append(f"{action.tool_name} ({', '.join(changes)})")
    elif action.tool_name not in diff.returned:
        diff.unchanged += 1
    action.save()
