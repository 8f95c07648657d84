"""Why an agent's approval gate asks a human, in an operator's words and with where each reason
is changed: the agent confirming every call, a tool flagged "requires confirmation" on its
connector action, or a hook of the chain that can ask (``confirm_when``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import admin
from django.urls import reverse

from agents.models import ConnectorAction
from agents.tools.toolbox import ToolboxError, tools_for_agent
from console.hook_editor.effective_chain import ChainRow
from console.hook_editor.readable import describe_conditions, readable_value

ASKING_HOOKS = frozenset({"confirm_when"})
"""Catalog hooks whose answer can be "ask a human" (the others allow, rewrite or block)."""


@dataclass(frozen=True)
class Why:
    """One reason the approval gate asks a human, in an operator's words, with where to change it
    (``url`` and ``link_text``; empty when it is changed on the page that shows it)."""

    text: str
    url: str = ""
    link_text: str = ""

    def __str__(self) -> str:
        return self.text


CONFIRMS_ALL = Why("the agent confirms every call (“Require confirmation for all” on this agent's page)")


def connector_action_url(action: Any) -> str:
    """Where an operator changes a connector action: its own admin page if it has one, else its
    connector's page (the actions are listed there)."""
    if admin.site.is_registered(type(action)):
        return reverse("admin:agents_connectoraction_change", args=[action.pk])
    return reverse("admin:agents_connector_change", args=[action.connector_id])


def tool_flag_reason(agent: Any, tool_name: str) -> Why:
    """Why the tool ``tool_name`` of ``agent`` requires confirmation by itself, and where that is
    changed (the connector action's "requires confirmation" box)."""
    slug, _, action_name = tool_name.partition("__")
    action = (
        ConnectorAction.objects.filter(
            agents=agent, connector__organization_id=agent.organization_id, connector__slug=slug
        )
        .select_related("connector")
        .filter(name=action_name)
        .first()
    )
    if action is not None:
        return Why(
            f"the tool “{action.title}” ({tool_name}) is flagged “requires confirmation” in connector "
            f"{action.connector.name} — change it there",
            url=connector_action_url(action),
            link_text=f"{action.connector.name}: {action.title}",
        )
    if action_name == "sql_execute":
        return Why(f"the tool {tool_name} writes to a database, so it always asks")
    return Why(f"the tool {tool_name} requires confirmation")


def hook_ask_reason(name: str, params: dict[str, Any]) -> Why:
    """What a hook that asks for approval asks on, from its parameters."""
    conditions = describe_conditions(params)
    tools = params.get("tools")
    on = f" on {readable_value(tools)}" if tools not in (None, "", "*") else ""
    reason = f" ({params['reason']})" if params.get("reason") else ""
    if conditions:
        return Why(f"{name} asks when: {conditions}{on}{reason}")
    return Why(f"{name} may ask{on}{reason}")


def gate_reasons(agent: Any, rows: list[ChainRow]) -> list[Why]:
    """Everything that makes the approval gate of ``agent`` ask a human: the agent confirming every
    call, each of its tools flagged "requires confirmation" (with where to change that), and each
    hook of the chain that can ask (``confirm_when`` with its conditions)."""
    reasons: list[Why] = []
    if agent.require_confirmation_for_all:
        reasons.append(CONFIRMS_ALL)
    try:
        tools = tools_for_agent(agent)
    except ToolboxError:
        tools = {}
    reasons += [
        tool_flag_reason(agent, name) for name, tool in tools.items() if tool.spec.requires_confirmation
    ]
    reasons += [
        hook_ask_reason(row.name, row.params)
        for row in rows
        if row.point == "PreToolUse" and row.name in ASKING_HOOKS
    ]
    return reasons
