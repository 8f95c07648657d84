"""The ``audit_log`` hook: one append-only :class:`ConnectorCallLog` row per tool call.

Declared like any catalog hook (``{"name": "audit_log"}``, optionally ``{"tools": ["oa__*"]}``).
It is a PostToolUse hook that also observes blocked calls (``observes_blocked_calls``: the
registry tells it of every PreToolUse block, whichever hook blocked or failed closed), so:

* a call that ran is recorded ``succeeded`` or ``failed`` with its duration, the size and SHA-256
  of the tool's full result (it runs first among PostToolUse hooks, before any redaction or
  truncation rewrites the observation) and, for a failure, the error text;
* a blocked call is recorded ``blocked`` with the hook that blocked it and what the model was told.

Each row is a link of its organisation's tamper-evident hash chain (``manage.py audit_verify``).
Arguments are stored with secrets masked (:func:`redacted_arguments`). A call is recorded once:
a replayed PostToolUse (after a crash) finds its row and adds nothing. When the record cannot be
written the hook fails like any other (closed by default: the model does not get a result that was
not audited; ``on_error="allow"`` keeps the result and reports the failure in the trace).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, ClassVar

from django.db import IntegrityError, transaction

from agents.engine import jsonsafe
from agents.engine.db import db
from agents.models import ConnectorCallLog
from agents.tools.redaction import MASK, redact_credentials
from fimone.audit_chain import chain_append
from hooks.builtin import TOOL_PATTERNS_SCHEMA, tool_matches, tool_patterns
from hooks.catalog import register_hook
from hooks.contract import Band, HookContext, HookResult, PostToolUseHook

SECRET_KEY = re.compile(
    r"(?i)(passw(or)?d|\bpwd\b|secret|token|api[-_]?key|authori[sz]ation|credential|private[-_]?key"
    r"|cookie|signature|\bdsn\b)"
)
MAX_DEPTH = 50


def redacted_arguments(args: Any, depth: int = 0) -> Any:
    """``args`` with secrets masked: the value of any key that names a secret (``password``,
    ``api_key``, ``token``, ``authorization``, …) becomes ``***``, and every string goes through
    :func:`agents.tools.redaction.redact_credentials` (URL passwords, ``password=`` pairs)."""
    if depth > MAX_DEPTH:
        return MASK
    if isinstance(args, dict):
        return {
            str(key): MASK if SECRET_KEY.search(str(key)) else redacted_arguments(value, depth + 1)
            for key, value in args.items()
        }
    if isinstance(args, list | tuple):
        return [redacted_arguments(value, depth + 1) for value in args]
    if isinstance(args, str):
        return redact_credentials(args)
    return args


def result_digest(result: Any) -> tuple[int, str]:
    """Size in bytes and SHA-256 of the result's UTF-8 JSON text (a string counts as itself)."""
    text = result if isinstance(result, str) else jsonsafe.text(result)
    data = text.encode("utf-8", "surrogatepass")
    return len(data), hashlib.sha256(data).hexdigest()


def connector_call_log_record(
    *,
    org_id: int,
    agent_id: int | None,
    user_id: int | None,
    run_id: int | None,
    tool_call_id: str,
    tool_name: str,
    arguments: Any,
    outcome: str,
    blocked_by: str = "",
    duration_ms: float | None = None,
    result: Any = None,
    has_result: bool = False,
    error: str = "",
) -> None:
    """Append one call to the log (once per ``(run, tool_call_id)``: a repeat adds nothing)."""
    size, digest = result_digest(result) if has_result else (None, "")
    slug, sep, _ = tool_name.partition("__")
    row = ConnectorCallLog(
        organization_id=org_id,
        agent_id=agent_id,
        user_id=user_id,
        run_id=run_id,
        tool_call_id=str(tool_call_id or "")[:100],
        tool_name=tool_name[:120],
        connector_slug=slug[:40] if sep else "",
        arguments=jsonsafe.storable(redacted_arguments(arguments)),
        outcome=outcome,
        blocked_by=(blocked_by or "")[:120],
        duration_ms=duration_ms,
        result_size=size,
        result_sha256=digest,
        error=redact_credentials(jsonsafe.text(error)) if error else "",
    )
    if run_id is not None and _logged(run_id=run_id, tool_call_id=row.tool_call_id):
        return
    try:
        with transaction.atomic():
            chain_append(row)
    except IntegrityError:
        # A concurrent record of the same call won the unique (run, tool_call_id) constraint; the
        # head it moved and this row rolled back together, so the chain has no gap. Anything
        # else that failed the insert is an error.
        if run_id is None or not _logged(run_id=run_id, tool_call_id=row.tool_call_id):
            raise


def _logged(*, run_id: int, tool_call_id: str) -> bool:
    return ConnectorCallLog.objects.filter(run_id=run_id, tool_call_id=tool_call_id).exists()


@register_hook
class AuditLog(PostToolUseHook):
    """Records every tool call, blocked ones included, in the connector call log."""

    name = "audit_log"
    description = "Records every connector call (and every blocked one) in the append-only call log."
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"tools": TOOL_PATTERNS_SCHEMA},
        "additionalProperties": False,
    }
    observes_blocked_calls = True
    # First among PostToolUse hooks, enforced or not: it digests the tool's own result, not a
    # rewritten one, and changes nothing, so running before the agent's hooks gives them no say.
    band = Band.GUARD
    priority = -1000
    timeout = 10.0

    def __init__(self, *, tools: Any = "*", **kw: Any) -> None:
        super().__init__(**kw)
        self.tools = tool_patterns(tools, "tools")

    def should_trigger(self, ctx: HookContext) -> bool:
        return tool_matches(ctx.tool_name, self.tools)

    @staticmethod
    def _who(ctx: HookContext) -> dict[str, Any]:
        meta = ctx.metadata
        if meta.get("org_id") is None:
            raise ValueError("the call's organisation is unknown; it cannot be audited")
        return {
            "org_id": meta["org_id"],
            "agent_id": ctx.agent_id,
            "user_id": ctx.user_id,
            "run_id": meta.get("run_id"),
            "tool_call_id": str(meta.get("tool_call_id") or ""),
            "tool_name": ctx.tool_name,
            "arguments": ctx.tool_args,
        }

    async def execute(self, ctx: HookContext) -> HookResult:
        failed = ctx.metadata.get("tool_status") == ConnectorCallLog.Outcome.FAILED
        duration = ctx.metadata.get("duration_ms")
        await db(
            connector_call_log_record,
            **self._who(ctx),
            outcome=ConnectorCallLog.Outcome.FAILED if failed else ConnectorCallLog.Outcome.SUCCEEDED,
            duration_ms=float(duration) if isinstance(duration, int | float) else None,
            result=ctx.tool_result,
            has_result=True,
            error=ctx.tool_result if failed else "",
        )
        return HookResult()

    async def on_blocked(self, ctx: HookContext, *, blocked_by: str, error: str) -> None:
        await db(
            connector_call_log_record,
            **self._who(ctx),
            outcome=ConnectorCallLog.Outcome.BLOCKED,
            blocked_by=blocked_by,
            error=error,
        )
