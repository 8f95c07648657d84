"""The tool-call pipeline: the one way any path runs a tool (docs/design.md §1.2, §4).

PreToolUse chain (the approval gate last) → at-most-once execution record → tool → PostToolUse
chain → events. ReAct turns, DAG steps, delegated agents, workflow nodes and MCP gateway calls
(single-call runs: no LLM at all) and eval cases (a sandboxed chain) all use it, each with its
run's :class:`~agents.engine.journal.RunJournal` and registry.

Outcomes are values, not exceptions: :class:`Observation` (the tool ran, or its earlier outcome
was replayed), :class:`Blocked` (a hook, the approval binding or a bad call refused it: the text is
what the LLM reads) or :class:`Suspended` (the gate waits for a human: the caller parks the run).

Invariants kept here: a hook that blocks or fails blocks (§1.1); the arguments that run are the
ones approved (§1.3: the gate's hash, never ``metadata``); a call runs at most once — its
``ToolExecution`` row is written, lease-guarded, before the tool starts, and a row left
``started`` by a crash is reported as "outcome unknown", never re-run (§1.5).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from django.conf import settings
from django.db import IntegrityError

from agents import events as ev
from agents.engine import batch, jsonsafe, store
from agents.engine.db import db
from agents.engine.journal import RunJournal
from agents.models import ToolExecution
from agents.shadow_log import shadow_notes_record
from agents.tools.base import OutcomeUnknown, ReentrantTool, Tool, ToolError, ToolSuspension
from agents.tools.redaction import redact_credentials
from agents.tools.sandbox import DryRunTool, dry_run_text
from agents.tools.schema import argument_errors
from fimone import telemetry
from fimone.storable import unstorable
from hooks import HookContext, HookRegistry

log = logging.getLogger(__name__)

UNKNOWN_OUTCOME = (
    "Outcome unknown: this tool call started but the process running it stopped before its result "
    "was recorded. It was not run again. Check the target system before doing anything else."
)

INTERRUPTED_OUTCOME = (
    "Outcome unknown: {error}. It was not run again. Check the target system before doing anything else."
)

UNRECORDED_OUTCOME = (
    "Tool error: {tool} ran, but its outcome could not be processed or recorded ({error}). It may "
    "have taken effect: check the target system before trying again."
)

CANCEL_POLL_SECONDS = 1.0
"""How often a call that stops on cancellation looks whether its run was cancelled."""

APPROVAL_MISMATCH = (
    "Refused: the arguments about to run differ from the ones that were approved. The call was not executed."
)

APPROVAL_MISSING = (
    "Refused: this call needs a person's approval and no approval gate answered for it. "
    "The call was not executed."
)


@dataclass(frozen=True, slots=True)
class Observation:
    """The call ran (now or before a crash / suspension); ``text`` is what the LLM reads.
    ``status``: its execution's (``ToolExecution.Status``), where the pipeline knows it."""

    text: str
    status: str | None = None


@dataclass(frozen=True, slots=True)
class Blocked:
    """The call did not run; ``text`` (the refusal) is what the LLM reads."""

    text: str
    blocked_by: str | None = None


@dataclass(frozen=True, slots=True)
class Suspended:
    """The call waits for an answer (an approval): the caller parks the run. ``still_waiting``
    is asked once the run is parked (``False``: the answer arrived meanwhile, resume at once)."""

    call: dict[str, Any]
    reason: str
    detail: dict[str, Any] = field(default_factory=dict)
    still_waiting: Callable[[], Awaitable[bool]] | None = None


StepOutcome = Observation | Blocked | Suspended


class Ran(NamedTuple):
    """What a tool's run left to record: its result (or its error in words), status, duration in
    milliseconds, and the journal's ``seq`` when it returned (events after it belong to the
    attempt to record this outcome)."""

    result: Any
    status: str
    duration_ms: float
    returned_at: int


def approval_mismatch(approved: str | None, digest: str) -> str | None:
    """Refuse arguments that differ from the ones a human approved (docs/design.md §1.3, §1.10).

    ``approved`` comes from the registry's outcome, which takes it only from the approval gate (a
    system hook), never from ``metadata`` that every hook can write: whatever changed the
    arguments after the approval cannot make them run.
    """
    if approved is None or approved == digest:
        return None
    return APPROVAL_MISMATCH


ApprovalLookup = Callable[[int, str], bool]
_approval_lookups: list[ApprovalLookup] = []


def register_approval_lookup(lookup: ApprovalLookup) -> None:
    """Let a higher app (approvals) answer "was a human's approval asked for this call?"
    ``lookup(run_id, tool_call_id)`` runs in the database thread. Called at start-up."""
    if lookup not in _approval_lookups:
        _approval_lookups.append(lookup)


def approval_was_asked(run_id: int, tool_call_id: str) -> bool:
    """Whether an approval request exists for this call. Runs in the database thread."""
    return any(lookup(run_id, tool_call_id) for lookup in _approval_lookups)


class ToolPipeline:
    """Runs tool calls of one run through its hooks. Safe for concurrent calls of one run.

    ``facts`` are the JSON-able facts every hook of the run sees in ``metadata`` (``org_id``,
    ``run_id``, ``execution_path``, …); each call adds its own (``tool_call_id``,
    ``requires_confirmation``, ``is_write``). What the gate tells the engine travels outside it.
    """

    def __init__(
        self,
        *,
        journal: RunJournal,
        registry: HookRegistry,
        tools: dict[str, Tool],
        agent_id: int | None,
        user_id: int | None,
        facts: dict[str, Any],
        sandboxed: bool = False,
    ) -> None:
        self.journal = journal
        self.registry = registry
        self.tools = tools
        self.agent_id = agent_id
        self.user_id = user_id
        self.facts = facts
        #: an eval's run (docs/design.md §1.2): a call that needs approval is answered, never asked
        self.sandboxed = sandboxed

    async def record_shadows(
        self, notes: list[Any], *, point: str, tool_call_id: str | None, tool_name: str = ""
    ) -> None:
        """Record in the audit what hooks in shadow mode would have done (``agents.shadow_log``);
        the trace already has the same notes. A failure to record never touches the call."""
        await db(
            shadow_notes_record,
            org_id=self.facts.get("org_id"),
            agent_id=self.agent_id,
            run_id=self.journal.run_id,
            point=point,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            notes=notes,
        )

    def context(self, **fields: Any) -> HookContext:
        """A hook context for this run; ``metadata=`` adds per-call facts."""
        metadata = {**self.facts, **fields.pop("metadata", {})}
        return HookContext(agent_id=self.agent_id, user_id=self.user_id, metadata=metadata, **fields)

    async def run(self, call: dict[str, Any], *, fresh: bool) -> StepOutcome:
        """The outcome of one tool call ``{"id", "name", "arguments"}``.

        ``fresh``: proposed in this process, so it cannot have run yet; otherwise (proposed before
        a crash or a suspension) an execution already recorded is replayed, never re-run.
        """
        if not telemetry.ENABLED:
            return await self._run(call, fresh=fresh)
        attributes: dict[str, Any] = {
            "fim.run.id": self.journal.run_id,
            "fim.tool": call["name"],
            "fim.tool.call_id": call["id"],
        }
        if settings.TELEMETRY_TOOL_ARGUMENTS:  # an operator's opt-in; credentials never
            attributes["fim.tool.arguments"] = redact_credentials(jsonsafe.text(call["arguments"]))
        with telemetry.span("fim.tool", attributes=attributes) as span:
            outcome = await self._run(call, fresh=fresh)
            if isinstance(outcome, Observation):
                span.set_attribute("fim.tool.outcome", outcome.status or "replayed")
            elif isinstance(outcome, Blocked):
                span.set_attribute("fim.tool.outcome", "blocked")
                span.set_attribute("fim.tool.blocked_by", outcome.blocked_by or "")
            else:
                span.set_attribute("fim.tool.outcome", "waiting")
            return outcome

    async def _run(self, call: dict[str, Any], *, fresh: bool) -> StepOutcome:
        """One tool call, its stages in the order they run (docs/design.md §4):

        0. a call proposed before a crash or a suspension whose execution is recorded: replayed
           (``_replay``), never run again; a re-entrant tool's started call is continued;
        1. validated: a known tool, arguments its schema and the database accept;
        2. the PreToolUse chain, the approval gate last (``HookRegistry.run_pre_tool_use``; whether
           the call needs a person is :func:`hooks.contract.needs_approval`): blocked, suspended
           until a verdict, or let through;
        3. bound to what was approved: the arguments that run hash to the approved ones, and a call
           that needed a person runs only with the gate's approval;
        4. carried out (``_carry_out``): its start recorded under the run's lease, the tool run, its
           PostToolUse chain, and its outcome recorded.
        """
        journal = self.journal
        call_id, name = call["id"], call["name"]
        tool = self.tools.get(name)
        if not fresh:
            previous = await db(store.execution_find, run_id=journal.run_id, tool_call_id=call_id)
            if previous is not None:
                if isinstance(tool, ReentrantTool) and previous.status == ToolExecution.Status.STARTED:
                    # Its hooks passed when it started; it continues the same work (keyed by
                    # the call's id) with the arguments that started it.
                    ctx = self.context(
                        tool_name=name, tool_args=previous.args, metadata={"tool_call_id": call_id}
                    )
                    return await self._carry_out(call, tool, ctx, previous.args, None, begin=False)
                return await self._replay(call, previous)

        if tool is None:
            return self._refuse(
                call, f"Unknown tool {name!r}. Available tools: {', '.join(self.tools) or 'none'}."
            )
        args = call["arguments"]
        # json.loads reads NaN, Infinity and \u0000: a value no database stores is refused like
        # one the schema refuses, the model told which field, before any hook or record of a
        # start (docs/design.md §1.16). The proposal's own records were cleaned as they were written.
        unfit = unstorable(args, name="the arguments") if isinstance(args, dict) else None
        if unfit is not None:
            problems = [unfit]
        else:
            problems = argument_errors(tool.spec.parameters, args) if args is not None else ["not valid JSON"]
        if problems:
            return self._refuse(call, f"Invalid arguments for {name}: " + "; ".join(problems[:5]))
        if isinstance(tool, DryRunTool):
            # An eval's stand-in: it reaches nothing, so no hook runs for it (a command or http
            # hook would itself reach outside); its call is recorded like any other.
            ctx = self.context(tool_name=name, tool_args=args, metadata={"tool_call_id": call_id})
            return await self._carry_out(call, tool, ctx, args, None)

        needs_approval = bool(tool.spec.requires_confirmation)
        if not fresh and not needs_approval:
            # Once a human was asked, the call waits for that verdict whatever the hooks say on
            # re-entry: a hook that asked (confirm_when, a command hook's "ask") might answer
            # otherwise the second time, and the call must not slip past a pending or rejected
            # request. Only re-entered calls pay this one query.
            needs_approval = await db(approval_was_asked, run_id=journal.run_id, tool_call_id=call_id)
        ctx = self.context(
            tool_name=name,
            tool_args=args,
            tool_schema=tool.spec.parameters,
            metadata={
                "tool_call_id": call_id,
                "requires_confirmation": needs_approval,
                "is_write": tool.spec.is_write,
                **tool.call_facts,
            },
        )
        pre = await self.registry.run_pre_tool_use(ctx, events=journal)
        shadows = journal.emit_side_effects(pre.side_effects, point="PreToolUse", tool_call_id=call_id)
        if shadows:
            await self.record_shadows(shadows, point="PreToolUse", tool_call_id=call_id, tool_name=name)
        if pre.suspension is not None:
            signal = pre.suspension
            return Suspended(call, signal.reason, signal.detail, signal.still_waiting)
        if not pre.allow:
            error = redact_credentials(pre.error or "Blocked.")
            return await self._block(call, error, blocked_by=pre.blocked_by)
        # The engine's own copy: a hook that kept a reference to the arguments cannot change
        # them between this check and the tool's run.
        final_args = copy.deepcopy(pre.tool_args)
        digest = store.args_sha256(final_args)
        mismatch = approval_mismatch(pre.approved_args_sha256, digest)
        if mismatch is not None:
            return await self._block(call, mismatch, blocked_by="approval_binding")
        if pre.requires_confirmation and pre.approved_args_sha256 is None:
            # Whatever asked for a person (the tool's flag, a hook), a call runs only with the
            # gate's approval. In an eval there is no gate: the call is answered, never asked.
            if self.sandboxed:
                asked = ", ".join(pre.confirmation_requested_by)
                text = dry_run_text(name, final_args, needs_approval=True, asked_by=asked)
                return await self._block(call, text, blocked_by="eval_sandbox")
            return await self._block(call, APPROVAL_MISSING, blocked_by="approval_binding")
        if pre.confirmation_request_id is not None:
            # A fact for the hooks that follow (JSON, stated by the engine); the audit hook reads
            # the trusted copy on its context, never this one.
            ctx.metadata["confirmation_request_id"] = pre.confirmation_request_id
        return await self._carry_out(call, tool, ctx, final_args, pre.confirmation_request_id, digest=digest)

    async def _carry_out(
        self,
        call: dict[str, Any],
        tool: Tool,
        ctx: HookContext,
        final_args: dict[str, Any],
        confirmation_request_id: str | None,
        *,
        digest: str | None = None,
        begin: bool = True,
    ) -> StepOutcome:
        """A call let through, from its recorded start to its recorded outcome: the start written
        under the run's lease (not for a re-entrant call already started: ``begin=False``), the
        tool run, then its PostToolUse chain and outcome in one write."""
        if begin:
            if digest is None:
                final_args = copy.deepcopy(final_args)
                digest = store.args_sha256(final_args)
            if not await self._begin(call, tool, final_args, digest):
                return await self._unknown(call)
        ran = await self._execute(call, tool, final_args)
        if isinstance(ran, Suspended):
            return ran
        return await self._finish(call, tool, ctx, ran, confirmation_request_id)

    async def _begin(self, call: dict[str, Any], tool: Tool, final_args: dict[str, Any], digest: str) -> bool:
        """Record the call's start (lease-guarded: never on a run cancelled or taken over).
        ``False`` when another process started this very call already: it is never run twice."""
        journal = self.journal
        call_id, name = call["id"], call["name"]
        started = {"tool_call_id": call_id, "tool": name, "arguments": final_args, "args_sha256": digest}
        if isinstance(tool, DryRunTool):
            started["dry_run"] = True
        journal.emit(ev.TOOL_STARTED, started)
        try:
            await journal.commit(
                writes=(
                    store.execution_begin(
                        run_id=journal.run_id,
                        tool_call_id=call_id,
                        tool_name=name,
                        args=final_args,
                        digest=digest,
                    ),
                ),
                check_lease=True,
            )
        except IntegrityError:
            return False
        return True

    async def _execute(self, call: dict[str, Any], tool: Tool, final_args: dict[str, Any]) -> Ran | Suspended:
        """Run the tool whose execution is recorded as started: what it returned (or the error it
        raised, in words), or its suspension (a re-entrant tool still at work)."""
        journal = self.journal
        call_id, name = call["id"], call["name"]
        started = time.perf_counter()
        try:
            if isinstance(tool, ReentrantTool):
                result: Any = await tool.run_call(final_args, call_id=call_id)
                if isinstance(result, ToolSuspension):
                    # Still started: re-entering the call continues it (ReentrantTool).
                    await journal.commit()
                    return Suspended(call, result.reason, result.detail, result.still_waiting)
            elif tool.stops_on_cancel:
                result = await self._run_unless_cancelled(tool, final_args)
            else:
                result = await tool.run(final_args)
            status = ToolExecution.Status.SUCCEEDED
        except OutcomeUnknown as exc:
            # The service took the call and never said how it ended: recorded "unknown", so that
            # nothing (a resume, a retry) ever runs it again (docs/design.md §1.5).
            error = redact_credentials(str(exc))
            result, status = INTERRUPTED_OUTCOME.format(error=error), ToolExecution.Status.UNKNOWN
        except ToolError as exc:
            # Tools mask the secrets they know; this catches a credential-shaped text any tool let by.
            result, status = f"Tool error: {redact_credentials(str(exc))}", ToolExecution.Status.FAILED
        except Exception as exc:  # a tool bug must not crash the run; the LLM hears it plainly
            log.exception("tool %s crashed in run %s", name, journal.run_id)
            result, status = f"Tool error: {name} failed unexpectedly ({type(exc).__name__}).", "failed"
        return Ran(result, status, (time.perf_counter() - started) * 1000, journal.seq)

    async def _finish(
        self,
        call: dict[str, Any],
        tool: Tool,
        ctx: HookContext,
        ran: Ran,
        confirmation_request_id: str | None,
    ) -> Observation:
        """The PostToolUse chain over what the tool returned, and the outcome recorded; an outcome
        that cannot be processed or stored still ends the execution (``_unrecorded``)."""
        journal = self.journal
        call_id, name = call["id"], call["name"]
        result, status, duration, returned_at = ran
        try:
            # Whatever the tool returned, its outcome can be stored (and read back): unstorable
            # parts (huge integers, NaN, NUL, lone surrogates, too deep nesting) become
            # placeholders, so the execution always ends recorded and the run goes on. Hooks see
            # what is stored.
            stored = jsonsafe.storable(result)
            # The outcome is stored with the observation, after the (time-bounded) PostToolUse
            # hooks: one write instead of two. A crash in between reports the call as "outcome
            # unknown".
            return await self._post(
                call,
                ctx,
                stored,
                status,
                duration,
                confirmation_request_id=confirmation_request_id,
                run_hooks=not isinstance(tool, DryRunTool),
                record=store.execution_finish(
                    run_id=journal.run_id,
                    tool_call_id=call_id,
                    status=status,
                    result=stored,
                    duration_ms=duration,
                ),
            )
        except batch.LeaseLost:
            raise  # the outcome was written all the same (a fact); the run ends as cancelled or lost
        except Exception as exc:
            # Anything else failing once the tool returned (a bug, the database refusing the
            # write) still ends its execution, failed, with an observation saying so.
            log.exception("the outcome of %s could not be recorded in run %s", name, journal.run_id)
            return await self._unrecorded(call, exc, duration, returned_at=returned_at)

    async def _run_unless_cancelled(self, tool: Tool, args: dict[str, Any]) -> Any:
        """``tool.run(args)``, stopped if the run is cancelled meanwhile (looked for every
        :data:`CANCEL_POLL_SECONDS`): the tool's own cancellation tells the service (an MCP server
        gets ``notifications/cancelled``), and the outcome is unknown — it may have taken effect."""
        call = asyncio.ensure_future(tool.run(args))
        try:
            while True:
                done, _pending = await asyncio.wait({call}, timeout=CANCEL_POLL_SECONDS)
                if done:
                    return call.result()
                if await db(store.cancel_requested, run_id=self.journal.run_id):
                    call.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await call
                    raise OutcomeUnknown(
                        f"the run was cancelled during the call of {tool.name}; the service was told to "
                        "stop it, and it may or may not have taken effect"
                    )
        finally:
            if not call.done():  # this task itself was cancelled: the call goes with it
                call.cancel()

    async def _post(
        self,
        call: dict[str, Any],
        ctx: HookContext,
        result: Any,
        status: str,
        ms: float,
        *,
        confirmation_request_id: str | None = None,
        run_hooks: bool = True,
        record: batch.Write | None = None,
    ) -> Observation:
        """The observation of a call that ran: its PostToolUse chain over ``result`` (none for an
        eval's dry run, ``run_hooks=False``), its ``tool.finished`` and the outcome's write."""
        journal = self.journal
        if run_hooks:
            post_ctx = HookContext(
                tool_name=ctx.tool_name,
                tool_args=ctx.tool_args,
                agent_id=ctx.agent_id,
                user_id=ctx.user_id,
                metadata={**ctx.metadata, "tool_status": status, "duration_ms": round(ms, 3)},
                tool_result=result,
                confirmation_request_id=confirmation_request_id,
                tool_schema=ctx.tool_schema,
            )
            post = await self.registry.run_post_tool_use(post_ctx)
            shadows = journal.emit_side_effects(
                post.side_effects, point="PostToolUse", tool_call_id=call["id"]
            )
            if shadows:
                await self.record_shadows(
                    shadows, point="PostToolUse", tool_call_id=call["id"], tool_name=call["name"]
                )
            result = post.result
        observation = jsonsafe.text(result)
        telemetry.tool_finished(tool=call["name"], status=status, duration_ms=ms)
        journal.emit(
            ev.TOOL_FINISHED,
            {
                "tool_call_id": call["id"],
                "tool": call["name"],
                "status": status,
                "observation": observation,
                "duration_ms": round(ms, 3),
            },
        )
        # The outcome of a tool that ran is recorded even if the run was cancelled meanwhile: the
        # run then ends cancelled after it, never leaving the execution "started".
        # Unless configured otherwise, not waiting for the disk: a database crash that loses it
        # leaves the call started, never ended, which reads back as "outcome unknown", never as a
        # call to run again (docs/design.md §1.5).
        await journal.commit(
            facts=(record,) if record is not None else (), durable=settings.RUN_OUTCOMES_WAIT_FOR_DISK
        )
        return Observation(observation, status)

    async def _unrecorded(
        self, call: dict[str, Any], exc: Exception, ms: float, *, returned_at: int
    ) -> Observation:
        """End the execution of a tool that returned but whose outcome could not be processed or
        stored: ``failed``, its result the observation the LLM reads. The events the failed
        attempt queued for this call (``seq > returned_at``) are withdrawn, so the call has one
        ``tool.finished`` and seqs stay gap-free. Re-raises ``exc`` if the outcome was recorded
        after all (then there is nothing to end)."""
        journal = self.journal
        recorded = await db(store.execution_find, run_id=journal.run_id, tool_call_id=call["id"])
        if recorded is None or recorded.status != ToolExecution.Status.STARTED:
            raise exc
        journal.retract_call(call["id"], after=returned_at)
        observation = UNRECORDED_OUTCOME.format(tool=call["name"], error=type(exc).__name__)
        journal.emit(
            ev.TOOL_FINISHED,
            {
                "tool_call_id": call["id"],
                "tool": call["name"],
                "status": ToolExecution.Status.FAILED,
                "observation": observation,
                "duration_ms": round(ms, 3),
            },
        )
        record = store.execution_finish(
            run_id=journal.run_id,
            tool_call_id=call["id"],
            status=ToolExecution.Status.FAILED,
            result=observation,
            duration_ms=ms,
        )
        await journal.commit(facts=(record,))
        return Observation(observation, ToolExecution.Status.FAILED)

    async def _replay(self, call: dict[str, Any], previous: ToolExecution) -> Observation:
        if previous.status == ToolExecution.Status.STARTED:
            return await self._unknown(call)
        # It finished but the checkpoint did not record the observation (a crash came between the
        # outcome's write and the next step's). The outcome was written with its ``tool.finished``
        # event: the model reads that text again, exactly (a result read back from jsonb may list
        # its keys in another order), and the PostToolUse hooks, which already ran, run no second
        # time. Only an execution recorded without that event replays them on the stored result.
        recorded = await db(store.observation_recorded, run_id=self.journal.run_id, tool_call_id=call["id"])
        if recorded is not None:
            return Observation(recorded, previous.status)
        if previous.status == ToolExecution.Status.UNKNOWN:  # marked so by a crash's recovery
            return await self._unknown(call)
        ctx = self.context(
            tool_name=call["name"], tool_args=previous.args, metadata={"tool_call_id": call["id"]}
        )
        dry_run = isinstance(self.tools.get(call["name"]), DryRunTool)
        return await self._post(
            call, ctx, previous.result, previous.status, previous.duration_ms or 0.0, run_hooks=not dry_run
        )

    async def _unknown(self, call: dict[str, Any]) -> Observation:
        journal = self.journal
        await db(store.execution_mark_unknown, run_id=journal.run_id, tool_call_id=call["id"])
        journal.emit(
            ev.TOOL_FINISHED,
            {
                "tool_call_id": call["id"],
                "tool": call["name"],
                "status": ToolExecution.Status.UNKNOWN,
                "observation": UNKNOWN_OUTCOME,
                "duration_ms": None,
            },
        )
        await journal.commit()
        return Observation(UNKNOWN_OUTCOME, ToolExecution.Status.UNKNOWN)

    async def _block(self, call: dict[str, Any], error: str, *, blocked_by: str | None) -> Blocked:
        self.journal.emit(
            ev.TOOL_BLOCKED,
            {"tool_call_id": call["id"], "tool": call["name"], "blocked_by": blocked_by, "error": error},
        )
        await self.journal.commit()
        return Blocked(error, blocked_by)

    def _refuse(self, call: dict[str, Any], error: str) -> Blocked:
        """A call that cannot be run at all (unknown tool, bad arguments): stored with the run's
        next write."""
        self.journal.emit(
            ev.TOOL_BLOCKED,
            {"tool_call_id": call["id"], "tool": call["name"], "blocked_by": None, "error": error},
        )
        return Blocked(error)
