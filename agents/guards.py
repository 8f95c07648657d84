"""The read-only guard: while an organisation is read-only, no write reaches a connector.

A system hook (attached to every agent, never declared or removed), registered in the hook
catalog by this app at start-up because it needs what only ``agents`` knows: the connector behind a
tool and the SQL parser (:mod:`agents.tools.sql_guard`).

Contract, while ``Organization.read_only`` is set (``metadata["org_read_only"]``):

* a tool flagged ``is_write`` is blocked (``<slug>__sql_execute`` always is);
* an HTTP action whose method mutates (POST, PUT, PATCH, DELETE) is blocked even if an operator
  cleared its ``is_write`` flag;
* a database connector's SQL is blocked unless the parser finds exactly one read statement in it
  (in the database's dialect; in every supported dialect when the DSN does not say which), so a CTE
  hiding a write, several statements, comments or dollar quoting never pass as a read, nor does a
  call to a function off the read tool's list (:data:`agents.tools.sql_guard.READ_FUNCTIONS`);
* everything else (reads, built-in tools) runs.

Blocked calls read "Org is in read-only mode — write blocked." Outside read-only organisations the
guard costs one dictionary lookup per call and never touches the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.engine.db import db
from agents.models import WRITE_METHODS, Agent, Connector, ConnectorAction
from agents.tools.sql_guard import Dialect, classify_sql
from hooks.catalog import register_hook
from hooks.contract import Band, HookContext, HookResult, PreToolUseHook

READ_ONLY_MESSAGE = "Org is in read-only mode — write blocked."
SQL_TOOLS = ("sql_query", "sql_execute")
DIALECTS_OF_SCHEME: dict[str, Dialect] = {
    "postgres": "postgres",
    "postgresql": "postgres",
    "sqlite": "sqlite",
}


@dataclass(frozen=True, slots=True)
class ToolFacts:
    """What the platform's records say about a connector tool. ``sql_dialects`` is empty for a
    tool that takes no SQL; ``method`` is empty for one that is not an HTTP action."""

    method: str = ""
    sql_dialects: tuple[Dialect, ...] = ()


def tool_facts(*, agent_id: int | None, tool_name: str) -> ToolFacts | None:
    """The facts of the connector tool ``tool_name`` of the agent's organisation, ``None`` for a
    tool that is no connector's (a built-in). Synchronous: it reads the database."""
    slug, sep, action_name = tool_name.partition("__")
    if not sep or agent_id is None:
        return None
    org_id = Agent.objects.filter(pk=agent_id).values_list("organization_id", flat=True).first()
    connector = Connector.objects.filter(organization_id=org_id, slug=slug).first()
    if connector is None:
        return None
    if connector.kind == Connector.Kind.DATABASE:
        if action_name not in SQL_TOOLS:
            return ToolFacts()
        secrets = connector.secrets if isinstance(connector.secrets, dict) else {}
        dsn = secrets.get("dsn") if isinstance(secrets.get("dsn"), str) else ""
        dialect = DIALECTS_OF_SCHEME.get(dsn.partition("://")[0].lower())
        return ToolFacts(sql_dialects=(dialect,) if dialect else ("postgres", "sqlite"))
    method = (
        ConnectorAction.objects.filter(connector=connector, name=action_name)
        .values_list("method", flat=True)
        .first()
    )
    return ToolFacts(method=str(method or "").upper())


def write_reason(facts: ToolFacts | None, args: Any) -> str | None:
    """Why a call with ``facts`` and ``args`` is a write (``None``: it reads)."""
    if facts is None:
        return None
    if facts.method in WRITE_METHODS:
        return f"{facts.method} request"
    if facts.sql_dialects:
        sql = args.get("sql") if isinstance(args, dict) else None
        if not isinstance(sql, str):
            return "SQL that is not text"
        for dialect in facts.sql_dialects:
            verdict = classify_sql(sql, dialect=dialect)
            if not verdict.is_read:
                return f"SQL that is not one read statement ({verdict.write})"
    return None


@register_hook
class ReadOnlyGuard(PreToolUseHook):
    """Blocks every write while the organisation is read-only (see the module docstring)."""

    name = "read_only_guard"
    description = (
        "While the organisation is read-only, blocks every write (flagged, mutating method, non-read SQL)."
    )
    system = True
    band = Band.GUARD
    priority = 0

    def should_trigger(self, ctx: HookContext) -> bool:
        return bool(ctx.metadata.get("org_read_only"))

    async def execute(self, ctx: HookContext) -> HookResult:
        if ctx.metadata.get("is_write"):
            reason: str | None = "a write action"
        else:
            facts = await db(tool_facts, agent_id=ctx.agent_id, tool_name=ctx.tool_name)
            reason = write_reason(facts, ctx.tool_args)
        if reason is None:
            return HookResult()
        return HookResult(
            allow=False,
            error=READ_ONLY_MESSAGE,
            side_effects=[f"blocked {ctx.tool_name}: {reason} (organisation is read-only)"],
        )
