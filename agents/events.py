"""The run event types and their payloads — the one place that documents them.

Every event is a ``RunEvent`` row (``run``, ``seq`` unique per run, ``type``, ``payload``) and, after
its transaction commits, a message on the run's channel-layer group (``agents.consumers.run_group``)
shaped like ``RunEvent.as_message()``: ``{"run_id", "seq", "type", "payload", "created_at"}``.

Only the process holding a run's lease writes its events, so ``seq`` is allocated by that process
(continuing from the highest stored seq) and the ``(run, seq)`` constraint guards against a second
writer.

``llm.delta`` is the one exception: streamed text is pushed to the group but not stored (the full
text is stored once as ``llm.message``); its ``seq`` is that of the last stored event and it
carries ``index``, its position in the message.
"""

from __future__ import annotations

from typing import Final

RUN_STARTED: Final = "run.started"
"""``{"agent_id", "execution_path", "input", "resumed": false}``"""

LLM_DELTA: Final = "llm.delta"
"""``{"text", "index"}`` — not stored; see the module docstring."""

LLM_MESSAGE: Final = "llm.message"
"""``{"content", "tool_calls": [{"id", "name", "arguments"}], "iteration"}``"""

TOOL_PROPOSED: Final = "tool.proposed"
"""``{"tool_call_id", "tool", "title", "arguments"}`` — as the LLM proposed them, before any hook;
``title`` is the tool as people read it."""

HOOK_SIDE_EFFECT: Final = "hook.side_effect"
"""``{"tool_call_id" (null at SessionStart), "hook", "point", "message", "failure"}``"""

TOOL_BLOCKED: Final = "tool.blocked"
"""``{"tool_call_id", "tool", "blocked_by", "error"}`` — ``error`` is what the LLM is told."""

TOOL_STARTED: Final = "tool.started"
"""``{"tool_call_id", "tool", "arguments", "args_sha256"}`` — the arguments that actually run."""

TOOL_FINISHED: Final = "tool.finished"
"""``{"tool_call_id", "tool", "status": "succeeded"|"failed"|"unknown", "observation",
"duration_ms"}`` — ``observation`` is what the LLM reads (after PostToolUse hooks)."""

RUN_SUSPENDED: Final = "run.suspended"
"""``{"tool_call_id", "tool", "reason", "detail"}`` — the run waits (e.g. for an approval)."""

RUN_RESUMED: Final = "run.resumed"
"""``{"reason"}`` — a suspended or orphaned run continues."""

RUN_COMPLETED: Final = "run.completed"
"""``{"output"}``"""

RUN_FAILED: Final = "run.failed"
"""``{"error", "stage"}`` — ``stage`` is one of hooks, tools, llm, engine, cancelled, max_iterations,
plan (a DAG plan unusable after one re-plan), steps (a DAG step failed)."""

DAG_PLANNED: Final = "dag.planned"
"""``{"steps": [{"id", "task", "depends_on"}], "attempt"}`` — a DAG run's plan, validated."""

DAG_PLAN_REJECTED: Final = "dag.plan_rejected"
"""``{"error", "attempt"}`` — the planner's answer was not a usable plan (one re-plan is asked)."""

DAG_STEP_STARTED: Final = "dag.step_started"
"""``{"step", "run_id"}`` — a step runs as the child run ``run_id`` (same agent, same hooks)."""

DAG_STEP_FINISHED: Final = "dag.step_finished"
"""``{"step", "run_id", "status": "done"|"waiting"|"failed", "output", "error"}``"""

APPROVAL_PENDING: Final = "approval.pending"
"""``{"request_id", "tool_call_id", "tool", "tool_title", "arguments", "context": [{"label",
"value"}], "approvers": [{"id", "name"}], "expires_at", "channel", "approvals_required"}`` — a
human must decide before the call runs (approvals.gate); ``tool_title`` and ``context`` (text for
people, approvals.presentation) say what the call is about. On a DAG run or a delegate's caller
it also names the child run that waits (``child_run_id``)."""

APPROVAL_DECIDED: Final = "approval.decided"
"""``{"request_id", "tool_call_id", "status", "by", "reason", "at", "delivery_problem", "votes":
[{"by", "approve", "at", "reason"}], "approvals"}`` — the verdict as the run learns it, with every
vote (``by`` names the last); ``delivery_problem`` says why an expired request reached nobody."""

APPROVAL_VOTED: Final = "approval.voted"
"""``{"request_id", "tool_call_id", "votes": [{"by", "approve", "at", "reason"}], "approvals",
"approvals_required"}`` — someone voted on a request that still waits for more votes. Pushed to
the run's stream once the vote committed, never stored (like ``llm.delta``, it carries the seq of
the last stored event): a page that missed it reads the votes again when it reloads."""

EPHEMERAL: Final = frozenset({LLM_DELTA, APPROVAL_VOTED})
"""Events pushed to a run's stream but not stored: they never advance its seq."""

ALL: Final = (
    RUN_STARTED,
    LLM_DELTA,
    LLM_MESSAGE,
    TOOL_PROPOSED,
    HOOK_SIDE_EFFECT,
    TOOL_BLOCKED,
    TOOL_STARTED,
    TOOL_FINISHED,
    RUN_SUSPENDED,
    RUN_RESUMED,
    RUN_COMPLETED,
    RUN_FAILED,
    DAG_PLANNED,
    DAG_PLAN_REJECTED,
    DAG_STEP_STARTED,
    DAG_STEP_FINISHED,
    APPROVAL_PENDING,
    APPROVAL_DECIDED,
)
