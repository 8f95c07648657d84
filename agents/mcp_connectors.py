"""Services for MCP connectors: saving one (a stdio server's command is code: it needs the
code-hooks permission) and listing its server's tools into actions, with what changed.

Contracts of :func:`connector_tools_refresh`:

* each tool the server lists is one :class:`~agents.models.ConnectorAction` of the connector,
  ``remote_name`` the server's name, ``name`` the same where a model can read it (else made
  readable: :func:`action_name_for`), with the server's description, input schema and annotations;
* a tool's flags (``is_write``, ``requires_confirmation``) are the operator's decision, never the
  server's: a new tool changes data and asks a person first whatever its hints claim (they are
  kept and shown as its claim, :func:`agents.models.mcp_server_claim`), and no listing changes
  the flags afterwards (docs/design.md §1.16: the server's word is doubt, and doubt goes to a person);
* a later listing that says something else of a tool (its description, input schema or hints)
  than was accepted changes nothing offered to agents: the difference is kept on the tool
  (``listing_to_review``), said in words at each listing and on the connector's page, until an
  operator accepts it (:func:`connector_action_listing_accept`) or the server takes it back;
* the tools of the first listing are enabled; a tool that appears later stays off until an
  operator enables it; a tool the server no longer lists is kept (its history stays readable),
  marked missing and not offered, and offered again if it comes back;
* a server that cannot be reached or listed changes nothing and raises :class:`ServiceError`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from agents.hook_declarations import check_may_change_kinds
from agents.models import Connector, ConnectorAction, mcp_server_claim
from agents.models.connectors import ACTION_NAME_RE, TOOL_NAME_MAX
from agents.tools.base import ToolError
from agents.tools.mcp_tools import McpServer, RemoteTool, list_remote_tools
from agents.tools.schema import check_parameters_schema
from fimone.errors import ServiceError
from tenancy.permissions import check_operator

_UNREADABLE = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass
class ToolsDiff:
    """What one listing changed, in names people read (``<slug>__<name>``)."""

    added: list[str] = field(default_factory=list)
    added_disabled: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    returned: list[str] = field(default_factory=list)
    claimed_read_only: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    to_review: list[str] = field(default_factory=list)
    taken_back: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    unchanged: int = 0

    @property
    def is_empty(self) -> bool:
        return not (
            self.added
            or self.added_disabled
            or self.removed
            or self.returned
            or self.changed
            or self.to_review
            or self.taken_back
            or self.refused
        )

    def lines(self) -> list[str]:
        out = []
        if self.added:
            out.append(f"New tools: {', '.join(sorted(self.added))}.")
        if self.added_disabled:
            out.append(
                f"Off until you enable them (the server added them after its first listing): "
                f"{', '.join(sorted(self.added_disabled))}."
            )
        if self.added or self.added_disabled:
            line = "Until you set their flags, new tools count as changing data and ask a person first"
            if self.claimed_read_only:
                names = ", ".join(sorted(self.claimed_read_only))
                line += f" (the server calls read-only: {names}; its claim, not applied)"
            out.append(line + ".")
        if self.changed:
            out.append(
                "Changed on the server, waiting for your review on the connector's page (each tool "
                f"stays as you set it until you accept): {'; '.join(self.changed)}."
            )
        if self.to_review:
            out.append(f"Still waiting for your review: {'; '.join(self.to_review)}.")
        if self.taken_back:
            them = "it" if len(self.taken_back) == 1 else "them"
            names = ", ".join(sorted(self.taken_back))
            out.append(f"The server lists {names} as you accepted {them} again: nothing left to review.")
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
            # Its hints are kept as the server's claim; the flags wait for the operator.
            action = ConnectorAction(
                connector=connector,
                name=name,
                remote_name=tool.name,
                display_name=tool.title[:120],
                description=tool.description,
                parameters_schema=tool.input_schema,
                annotations=tool.annotations,
                is_write=True,
                requires_confirmation=True,
                enabled=first,
            )
            action.save()
            (diff.added if first else diff.added_disabled).append(action.tool_name)
            if not mcp_server_claim(tool.annotations)[0]:
                diff.claimed_read_only.append(action.tool_name)
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


LISTED_FIELDS = {
    "description": "description",
    "input_schema": "parameters_schema",
    "annotations": "annotations",
}
"""What a listing says of a tool (its key in ``listing_to_review``) → the action's field holding
what was accepted of it."""


def _update(action: ConnectorAction, tool: RemoteTool, diff: ToolsDiff) -> None:
    if action.missing_since is not None:
        action.missing_since = None
        diff.returned.append(action.tool_name)
    said = {
        "description": tool.description,
        "input_schema": tool.input_schema,
        "annotations": tool.annotations,
    }
    change = {
        key: said[key] for key, accepted in LISTED_FIELDS.items() if getattr(action, accepted) != said[key]
    }
    waiting = action.listing_to_review if isinstance(action.listing_to_review, dict) else {}
    # Nothing the server now says is applied: it waits for the operator (module docstring).
    action.listing_to_review = change
    if change:
        words = f"{action.tool_name} ({'; '.join(action.listing_change_in_words())})"
        (diff.changed if change != waiting else diff.to_review).append(words)
    elif waiting:
        diff.taken_back.append(action.tool_name)
    elif action.tool_name not in diff.returned:
        diff.unchanged += 1
    action.save()


def listing_fingerprint(listing: Any) -> str:
    """A short fingerprint of a tool's ``listing_to_review``: the admin carries the one it showed,
    so that an operator accepts only the change they read (:func:`connector_action_listing_accept`)."""
    canonical = json.dumps(
        listing if isinstance(listing, dict) else {}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@transaction.atomic
def connector_action_listing_accept(
    *, action: ConnectorAction, actor: Any, seen: str | None = None
) -> ConnectorAction:
    """Accept what the server's latest listing says of the MCP tool ``action`` that differs from
    what was accepted (its ``listing_to_review``): its description and input schema are offered to
    agents from then on, and its hints become the ones later listings are compared with.

    Never changes the tool's flags (``is_write``, ``requires_confirmation``) nor whether it is
    enabled: those are the operator's, set on the connector's page; accepting "read-only" loosens
    nothing. ``seen``: the :func:`listing_fingerprint` of the change the operator read (the admin
    passes it); refused (``conflict``) if the server changed it again since, or if nothing waits
    for review. ``actor`` must be an operator of the tool's organisation (``None``: the console);
    others are told ``not_found``."""
    organization_id = Connector.objects.filter(pk=action.connector_id).values_list(
        "organization_id", flat=True
    )
    if actor is not None:
        check_operator(user=actor, organization_id=organization_id.get())
    locked = ConnectorAction.objects.select_for_update().get(pk=action.pk)
    change = locked.listing_to_review if isinstance(locked.listing_to_review, dict) else {}
    if not change:
        raise ServiceError(
            f"{locked.tool_name}: nothing to review: the server says what was accepted", code="conflict"
        )
    if seen is not None and seen != listing_fingerprint(change):
        raise ServiceError(
            f"{locked.tool_name}: the server's listing changed again since the page was shown: "
            "read the change again before accepting it",
            code="conflict",
        )
    for key, accepted in LISTED_FIELDS.items():
        if key in change:
            setattr(locked, accepted, change[key])
    locked.listing_to_review = {}
    locked.save(
        update_fields=[*(LISTED_FIELDS[key] for key in change if key in LISTED_FIELDS), "listing_to_review"]
    )
    return locked
