"""Claude Code's hook protocol, spoken by command and http hooks.

The hook receives one JSON object (on stdin, or as the POST body)::

    {"hook_event_name": "PreToolUse", "session_id": "<run id>", "tool_name": "oa__purchase_pay",
     "tool_input": {...}, "tool_use_id": "call_1", "tool_response": ... (PostToolUse only),
     "fimone": {"hook": "<name>", "org_id", "agent_id", "user_id", "run_id", "conversation_id",
                "execution_path", "requires_confirmation", "is_write"}}

and may answer a JSON object (an empty answer allows)::

    {"hookSpecificOutput": {"permissionDecision": "allow" | "deny" | "ask",
                            "permissionDecisionReason": "…",
                            "updatedInput": {...},             PreToolUse: the arguments to run
                            "additionalContext": "…",          SessionStart: system prompt;
                                                               PostToolUse: appended to the result
                            "updatedMCPToolOutput": ...},      PostToolUse: the new result
     "decision": "block", "reason": "…"}                       blocks (PreToolUse) or replaces the
                                                               result with the reason (PostToolUse)

``ask`` routes the call to the approval gate (:attr:`HookResult.require_confirmation`). Anything
that does not fit this shape raises :class:`ProtocolError`, which the registry reads as a failure
(closed unless the declaration says ``on_error: allow``).
"""

from __future__ import annotations

import json
from typing import Any

from hooks.contract import HookContext, HookPoint, HookResult

#: Metadata the engine puts in the context that a hook outside the process may see.
SHARED_METADATA = (
    "org_id",
    "run_id",
    "conversation_id",
    "execution_path",
    "requires_confirmation",
    "is_write",
    "mcp_tool_name",
)
MAX_REASON = 2_000


class ProtocolError(ValueError):
    """The hook's answer does not follow the protocol."""


def event_payload(ctx: HookContext, *, hook_name: str) -> bytes:
    """The JSON the hook receives, as UTF-8 bytes. Values JSON cannot carry are sent as text."""
    meta = ctx.metadata
    point = ctx.hook_point.value if ctx.hook_point is not None else ""
    fimone: dict[str, Any] = {"hook": hook_name, "agent_id": ctx.agent_id, "user_id": ctx.user_id}
    for key in SHARED_METADATA:
        if key in meta:
            fimone[key] = meta[key]
    if ctx.hook_point is HookPoint.PRE_TOOL_USE:
        # The registry's own value: the engine's flag and every earlier hook that asked.
        fimone["requires_confirmation"] = bool(ctx.requires_confirmation or meta.get("requires_confirmation"))
    body: dict[str, Any] = {
        "hook_event_name": point,
        "session_id": str(meta.get("run_id", "")),
        "fimone": fimone,
    }
    if ctx.hook_point is not HookPoint.SESSION_START:
        body["tool_name"] = ctx.tool_name
        body["tool_input"] = ctx.tool_args
        body["tool_use_id"] = str(meta.get("tool_call_id", ""))
    if ctx.hook_point is HookPoint.POST_TOOL_USE:
        body["tool_response"] = ctx.tool_result
    return json.dumps(body, default=str, ensure_ascii=False).encode()


def _reason(value: Any, default: str) -> str:
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        raise ProtocolError("a reason must be a string")
    return value.strip()[:MAX_REASON] or default


def parse_reply(raw: bytes) -> dict[str, Any]:
    """The hook's answer as a JSON object; empty (or whitespace) means ``{}``."""
    text = raw.decode("utf-8", errors="strict").strip() if raw else ""
    if not text:
        return {}
    try:
        reply = json.loads(text)
    except ValueError:
        raise ProtocolError("the hook's output is not JSON") from None
    if not isinstance(reply, dict):
        raise ProtocolError("the hook's output is not a JSON object")
    return reply


def result_from_reply(reply: dict[str, Any], ctx: HookContext, *, hook_name: str) -> HookResult:
    """Translate a protocol answer into a :class:`HookResult`, or raise :class:`ProtocolError`."""
    point = ctx.hook_point
    specific = reply.get("hookSpecificOutput") or {}
    if not isinstance(specific, dict):
        raise ProtocolError("hookSpecificOutput must be an object")
    blocked = f"Tool call blocked by '{hook_name}'."
    decision = reply.get("decision")
    if decision not in (None, "approve", "block"):
        raise ProtocolError(f"unknown decision {decision!r}")
    if reply.get("continue") is False:  # Claude Code's "stop": nothing more happens for this call
        decision, reply = "block", {**reply, "reason": reply.get("stopReason")}
    context = specific.get("additionalContext")
    if context is not None and not isinstance(context, str):
        raise ProtocolError("additionalContext must be a string")

    if point is HookPoint.PRE_TOOL_USE:
        permission = specific.get("permissionDecision")
        if permission not in (None, "allow", "deny", "ask"):
            raise ProtocolError(f"unknown permissionDecision {permission!r}")
        if decision == "block" or permission == "deny":
            why = specific.get("permissionDecisionReason") if permission == "deny" else reply.get("reason")
            return HookResult(allow=False, error=_reason(why, blocked))
        updated = specific.get("updatedInput")
        if updated is not None and not isinstance(updated, dict):
            raise ProtocolError("updatedInput must be an object")
        notes = [f"additional context: {context[:MAX_REASON]}"] if context else []
        asks = permission == "ask"
        why = _reason(specific.get("permissionDecisionReason"), "the hook asked") if asks else None
        return HookResult(
            modified_args=updated, require_confirmation=asks, confirmation_reason=why, side_effects=notes
        )

    if point is HookPoint.POST_TOOL_USE:
        result = ctx.tool_result
        changed = False
        if "updatedMCPToolOutput" in specific:
            result, changed = specific["updatedMCPToolOutput"], True
        if decision == "block":
            why = _reason(reply.get("reason"), "no reason given")
            return HookResult(
                modified_result=f"[The tool's result was withheld by '{hook_name}': {why}]",
                side_effects=[f"result withheld: {why}"],
            )
        if context:
            result = f"{result if isinstance(result, str) else json.dumps(result, default=str)}\n\n{context}"
            changed = True
        return HookResult(modified_result=result if changed else None)

    # SessionStart: a block stops the run before its first LLM call.
    if decision == "block":
        raise ProtocolError(_reason(reply.get("reason"), "blocked the session"))
    return HookResult(additional_context=context or None)
