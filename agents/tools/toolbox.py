"""The tools an agent may call, built from its configuration."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import QuerySet

from agents.models import Agent, Connector, ConnectorAction
from agents.tools.base import Tool
from agents.tools.builtins import BUILTIN_TOOLS
from agents.tools.database import database_tools
from agents.tools.http import HttpActionTool
from agents.tools.mcp_tools import McpTool


class ToolboxError(ValueError):
    """The agent's configuration does not yield a usable set of tools. ``str()`` names the problem."""


def tools_for_agent(agent: Agent) -> dict[str, Tool]:
    """The agent's tools by name, in a stable order (connectors by slug, actions by name, then the
    built-ins in the agent's order).

    Rules:

    * an action of an HTTP connector is one :class:`HttpActionTool` named ``<slug>__<action>``;
    * a database connector is granted by any of its actions being attached to the agent: the agent
      then gets both ``<slug>__sql_query`` and ``<slug>__sql_execute`` (the latter always requires
      confirmation); the action's own name, method and path play no further part;
    * only connectors of the agent's own organisation count: an action of another organisation's
      connector is ignored, so an agent can never call out with another tenant's secrets;
    * an archived connector's actions are ignored: its tools are not offered;
    * a tool of an MCP connector is one :class:`McpTool` named ``<slug>__<tool>``, offered only
      while it is enabled and its server still lists it (an action turned off is never offered);
    * ``builtin_tools`` names come from :data:`BUILTIN_TOOLS`.

    Synchronous (it reads the database; call it from a worker thread, not an event loop) and one
    query whatever the number of actions. Raises :class:`ToolboxError` for an unknown built-in or
    two tools with the same name.
    """
    return tools_of_actions(agent, tool_actions(agent))


def tool_actions(agent: Agent) -> QuerySet[ConnectorAction]:
    """The actions that may give ``agent`` tools (:func:`tools_for_agent`'s rules), with their
    connectors, in the tools' order."""
    return (
        agent.actions.filter(
            connector__organization_id=agent.organization_id,
            connector__archived_at__isnull=True,
            enabled=True,
            missing_since__isnull=True,
        )
        .select_related("connector")
        .order_by("connector__slug", "name")
    )


def tools_of_actions(agent: Agent, actions: Iterable[ConnectorAction]) -> dict[str, Tool]:
    """:func:`tools_for_agent` from :func:`tool_actions`' rows, as the caller read them (the ORM,
    or a statement on the event loop): no I/O here."""
    tools: dict[str, Tool] = {}
    granted_databases: set[int] = set()
    for action in actions:
        connector = action.connector
        if connector.kind == Connector.Kind.DATABASE:
            if connector.pk not in granted_databases:
                granted_databases.add(connector.pk)
                for tool in database_tools(connector):
                    _add(tools, tool)
            continue
        _add(tools, action_tool(action, connector))
    for name in dict.fromkeys(agent.builtin_tools or []):  # a name listed twice is still one tool
        tool_class = BUILTIN_TOOLS.get(name)
        if tool_class is None:
            raise ToolboxError(f"unknown built-in tool {name!r} (known: {', '.join(sorted(BUILTIN_TOOLS))})")
        _add(tools, tool_class())
    return tools


def action_tool(action: ConnectorAction, connector: Connector | None = None) -> Tool:
    """The tool one action of an HTTP or MCP connector is (a database connector's tools come as a
    pair: :func:`agents.tools.database.database_tools`)."""
    connector = connector or action.connector
    if connector.kind == Connector.Kind.MCP:
        return McpTool(action=action, connector=connector)
    return HttpActionTool(action=action, connector=connector)


def _add(tools: dict[str, Tool], tool: Tool) -> None:
    if tool.name in tools:
        # Two tools under one name would make the model's choice ambiguous: refuse the set.
        raise ToolboxError(f"two tools are named {tool.name!r}; rename an action or a connector")
    tools[tool.name] = tool
