"""The ReAct engine: LLM → tool calls (through hooks) → observations → … → final answer.

One :class:`ReactEngine` drives one run while its process holds the run's lease. Everything it
needs to continue lives in the checkpoint, saved after every step, so any process can pick the run
up after a suspension or a crash (DESIGN §4):

``{"v": 1, "message_count": n, "session_context": [...] | null, "iteration": n,
"pending_calls": [{"id", "name", "arguments", "raw_arguments"}], "observations": {id: text}}``,
the messages themselves being ``RunMessage`` rows appended as the run goes.

Tool calls of one turn run concurrently. Each goes PreToolUse → ToolExecution(started) → tool →
ToolExecution(finished) → PostToolUse; a row left ``started`` by a crash is reported to the LLM as
"outcome unknown" and never re-run (DESIGN §1.5).
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from channels.layers import get_channel_layer
from django.db import IntegrityError
from django.utils import timezone

from agents import events as ev
from agents.checks import hook_chain_of
from agents.consumers import run_group
from agents.engine import jsonsafe, store
from agents.engine.db import db
from agents.llm.base import LLMError, LLMProvider, LLMResponse
from agents.llm.factory import provider_for
from agents.models import RunStatus, ToolExecution
from agents.tools.base import Tool, ToolError
from agents.tools.redaction import redact_credentials
from agents.tools.schema import argument_errors
from agents.tools.toolbox import ToolboxError, tools_for_agent
from hooks import HookContext, SideEffect, SuspendRun
from hooks.catalog import HookDeclarationError, registry_from_chain

log = logging.getLogger(__name__)

RULES = (
    "Rules enforced by the platform: a tool call may be blocked, rewritten or sent to a human for "
    "approval. When a call is blocked or rejected, do not retry the same call: explain the outcome "
    "to the user. An observation saying a call's outcome is unknown means it may or may not have "
    "taken effect: do not repeat it."
)

STREAM_FLUSH_SECONDS = 5.0
"""How long a run, once it ends, waits for its stream's last messages to leave."""

UNKNOWN_OUTCOME = (
    "Outcome unknown: this tool call started but the process running it stopped before its result "
    "was recorded. It was not run again. Check the target system before doing anything else."
)


def _text(value: Any) -> str:
    """What the LLM reads for a value: storable text, whatever the value holds."""
    return jsonsafe.text(value)


class EventSink:
    """What hooks get (``ctx.metadata["run_events"]``) to publish structured run events, such as
    the approval gate's ``approval.pending``, stored and pushed at once."""

    def __init__(self, engine: ReactEngine) -> None:
        self._engine = engine

    async def publish(self, type_: str, payload: dict[str, Any], *, at_once: bool = True) -> None:
        """Emit an event; ``at_once`` stores and pushes it now, otherwise it goes with the run's
        next write (saving a transaction when that write is imminent)."""
        self._engine.emit(type_, payload)
        if at_once:
            await self._engine.commit()


class RunFailed(Exception):
    def __init__(self, error: str, stage: str) -> None:
        super().__init__(error)
        self.error, self.stage = error, stage


class Suspended(Exception):
    def __init__(self, call: dict[str, Any], signal: SuspendRun) -> None:
        super().__init__(signal.reason)
        self.call, self.reason, self.detail = call, signal.reason, signal.detail
        self.still_waiting = signal.still_waiting


class ReactEngine:
    """Drives one run. Precondition: ``owner`` holds the run's lease (``store.run_claim``)."""

    def __init__(
        self,
        run_id: int,
        *,
        owner: str,
        provider_factory: Callable[[dict[str, Any]], LLMProvider] = provider_for,
        tools_factory: Callable[[Any], dict[str, Tool]] | None = None,
    ) -> None:
        self.run_id = run_id
        self.owner = owner
        self.provider_factory = provider_factory
        self.tools_factory = tools_factory
        self._buffer: list[store.QueuedEvent] = []
        self._pushed: list[dict[str, Any]] = []
        self._write_lock = asyncio.Lock()
        self._seq = 0
        self._delta_index = 0
        self.layer = get_channel_layer()
        self.sink = EventSink(self)
        self._proposed_here: set[str] = set()
        self._checkpoint_dirty = False
        self._stored_messages = 0
        self._outbox: deque[dict[str, Any]] = deque()
        self._sender: asyncio.Task[None] | None = None

    # --- events ---------------------------------------------------------------------------------

    def emit(self, type_: str, payload: dict[str, Any]) -> None:
        """Queue an event; it is stored and pushed by the next :meth:`commit`."""
        self._seq += 1
        self._buffer.append(store.QueuedEvent(self._seq, type_, payload))

    def _retract(self, seq: int) -> None:
        """Withdraw a queued, not yet stored event (an ending that did not happen); later queued
        events move down one, so seqs stay gap-free."""
        kept: list[store.QueuedEvent] = []
        for event in self._buffer:
            if event.seq == seq:
                continue
            kept.append(
                event if event.seq < seq else store.QueuedEvent(event.seq - 1, event.type, event.payload)
            )
        if len(kept) < len(self._buffer):
            self._buffer = kept
            self._seq -= 1

    def emit_side_effects(self, effects: list[SideEffect], *, point: str, tool_call_id: str | None) -> None:
        for effect in effects:
            self.emit(
                ev.HOOK_SIDE_EFFECT,
                {
                    "tool_call_id": tool_call_id,
                    "hook": effect.hook,
                    "point": point,
                    # A failing hook's message quotes its exception, which may quote a URL.
                    "message": redact_credentials(effect.message),
                    "failure": effect.failure,
                },
            )

    async def commit(
        self,
        op: Callable[[], Any] | None = None,
        *,
        check_lease: bool = False,
        writes: tuple[store.Write, ...] = (),
        facts: tuple[store.Write, ...] = (),
        cancelled_ok: bool = False,
    ) -> Any:
        """Store queued events, the checkpoint if it changed, ``writes`` and ``op`` in one
        transaction, then push the events, in seq order.

        The checkpoint rides along with the next write instead of costing a transaction of its
        own; the write that precedes a tool's execution always carries it (and its lease check).
        Under a lease check everything but ``facts`` is written only if the run is still ours
        and not cancelled (``cancelled_ok``: still ours); ``facts`` (a tool's outcome) are
        written in the same transaction whatever happened to the run meanwhile.
        """
        async with self._write_lock:
            batch, self._buffer = self._buffer, []
            snapshot = self._checkpoint_snapshot() if self._checkpoint_dirty else None
            if not batch and op is None and snapshot is None and not writes and not facts:
                return None
            self._checkpoint_dirty = False
            guard = None
            parts: list[store.Write] = []
            if snapshot is not None:  # also verifies the lease
                state, new_messages = snapshot
                guard = store.Guard(self.run_id, self.owner, state, cancelled_ok=cancelled_ok)
                first = state["message_count"] - len(new_messages)
                parts.append(store.message_rows(run_id=self.run_id, first=first, messages=new_messages))
            elif check_lease:
                guard = store.Guard(self.run_id, self.owner, cancelled_ok=cancelled_ok)
            parts.extend(writes)
            stamp = timezone.now()
            parts.append(store.event_rows(run_id=self.run_id, events=batch, stamp=stamp))
            try:
                result = await db(store.write, guard=guard, writes=parts, op=op, facts=facts)
            except store.LeaseLost:
                # Keep the events: if the run was cancelled they are stored with its ending.
                self._buffer[:0] = batch
                raise
            if snapshot is not None:
                self._stored_messages = snapshot[0]["message_count"]
            await self._push(batch, stamp)
            return result

    def _checkpoint_snapshot(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The checkpoint to store and the messages appended since the last save.

        Messages are stored as rows appended once (``RunMessage``), so a step writes only what it
        added, not the whole history. The copy is safe to serialise in the database thread while
        concurrent tool calls go on adding observations (message dicts never change once appended).
        """
        cp = self.checkpoint
        messages = cp["messages"]
        state = {key: value for key, value in cp.items() if key != "messages"}
        state.update(
            message_count=len(messages),
            pending_calls=list(cp["pending_calls"]),
            observations=dict(cp["observations"]),
            session_context=list(cp["session_context"]) if cp["session_context"] is not None else None,
        )
        return state, messages[self._stored_messages :]

    async def _push(self, batch: list[store.QueuedEvent], stamp: dt.datetime) -> None:
        if self.layer is None:
            return
        if not batch:
            return
        created_at = stamp.isoformat()
        events = [
            {
                "run_id": self.run_id,
                "seq": event.seq,
                "type": event.type,
                "payload": event.payload,
                "created_at": created_at,
            }
            for event in batch
        ]
        # One channel-layer message per commit, not per event: each send is several Redis calls.
        self._send_soon({"type": "run.events", "events": events})

    async def on_delta(self, text: str) -> None:
        if self.layer is None:
            return
        message = {"run_id": self.run_id, "seq": self._seq, "type": ev.LLM_DELTA}
        message["payload"] = {"text": text, "index": self._delta_index}
        self._delta_index += 1
        self._send_soon({"type": "run.event", "event": message})

    def _send_soon(self, message: dict[str, Any]) -> None:
        """Queue a message for the run's stream. One sender task sends them in order, so the run
        goes on while the channel layer talks to Redis; :meth:`_flush_stream` waits for it."""
        self._outbox.append(message)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send_outbox())

    async def _send_outbox(self) -> None:
        group = run_group(self.run_id)
        while self._outbox:
            message = self._outbox.popleft()
            if self._outbox:
                # What was queued while the previous send was on its way (stored batches and the
                # deltas of a streamed answer) goes out as one message, in order: a busy run costs
                # fewer sends and fewer slots of the watchers' queues; an idle one sends at once.
                events = _events_of(message)
                while self._outbox:
                    events += _events_of(self._outbox.popleft())
                message = {"type": "run.events", "events": events}
            try:
                await self.layer.group_send(group, message)
            except Exception:  # the stream is best effort; the stored events are the record
                log.warning("could not push to the stream of run %s", self.run_id, exc_info=True)

    async def _flush_stream(self) -> None:
        """Wait (a bounded time: the stream is best effort) for queued messages to be sent."""
        if self._sender is None or self._sender.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._sender), STREAM_FLUSH_SECONDS)
        except TimeoutError:
            log.warning("run %s: the stream did not take its last events in time", self.run_id)

    # --- the run --------------------------------------------------------------------------------

    async def execute(self, *, resumed_reason: str | None = None) -> str:
        """Drive the run until it completes, fails or suspends; return its final status."""
        run = await db(store.run_load, run_id=self.run_id)
        self.run = run
        self._seq = await db(store.last_seq, run_id=self.run_id)
        checkpoint = dict(run.checkpoint or {})
        if checkpoint:
            count = checkpoint.pop("message_count", 0)
            checkpoint["messages"] = await db(store.messages_load, run_id=self.run_id, count=count)
            self._stored_messages = count
            if resumed_reason is not None:
                self.emit(ev.RUN_RESUMED, {"reason": resumed_reason})
        else:
            history = await db(store.previous_messages, run=run)
            checkpoint = {
                "v": 1,
                "messages": [*history, {"role": "user", "content": run.input}],
                "session_context": None,
                "iteration": 0,
                "pending_calls": [],
                "observations": {},
            }
            self.emit(
                ev.RUN_STARTED,
                {"agent_id": run.agent_id, "execution_path": run.execution_path, "input": run.input},
            )
        self.checkpoint = checkpoint
        heartbeat = asyncio.create_task(self._heartbeat())
        try:
            return await self._drive()
        except RunFailed as failure:
            return await self._finish(RunStatus.FAILED, error=failure.error, stage=failure.stage)
        except Suspended as suspension:
            return await self._suspend(suspension)
        except store.LeaseLost:
            return await self._after_lease_lost()
        except Exception as exc:
            log.exception("run %s crashed", self.run_id)
            return await self._finish(
                RunStatus.FAILED, error=f"internal error: {type(exc).__name__}", stage="engine"
            )
        finally:
            heartbeat.cancel()
            await self._flush_stream()  # the run's last events reach the stream before it returns

    async def _heartbeat(self) -> None:
        from django.conf import settings

        interval = max(1.0, settings.RUN_LEASE_SECONDS / 3)
        while True:
            await asyncio.sleep(interval)
            await db(store.heartbeat, run_id=self.run_id, owner=self.owner)

    async def _drive(self) -> str:
        run = self.run
        agent = run.agent
        archived = agent.archived_reason()
        if archived is not None:
            # Archiving stops runs in flight; this catches one that was claimed meanwhile.
            raise RunFailed(archived, "archived")
        # The chain recorded when the run was created, not the agent's current one: editing an
        # agent never changes a run in flight, resumed or not (DESIGN §1.10).
        chain = run.hook_chain
        if chain is None:  # created before runs recorded their chain: resolved once, now
            chain = await db(store.run_keep_hook_chain, run_id=run.pk, chain=hook_chain_of(agent))
        self.chain = chain
        try:
            registry = registry_from_chain(chain)
        except HookDeclarationError as exc:
            raise RunFailed(f"the agent's hooks cannot be built: {exc}", "hooks") from None
        self.registry = registry
        try:
            provider = self.provider_factory(agent.provider_config())
        except LLMError as exc:
            raise RunFailed(f"the agent's model is misconfigured: {exc}", "llm") from None
        factory = self.tools_factory or tools_for_agent
        try:
            self.tools = await db(factory, agent=agent)
        except ToolboxError as exc:
            raise RunFailed(f"the agent's tools cannot be built: {exc}", "tools") from None

        cp = self.checkpoint
        if cp["session_context"] is None:
            outcome = await registry.run_session_start(self._context())
            self.emit_side_effects(outcome.side_effects, point="SessionStart", tool_call_id=None)
            if not outcome.ok:
                raise RunFailed(outcome.error or "a session hook failed", "hooks")
            cp["session_context"] = outcome.additional_context
            await self._save()

        while True:
            if cp["pending_calls"]:
                await self._run_pending_calls()
            if cp["iteration"] >= agent.max_iterations:
                raise RunFailed(
                    f"the agent did not finish within {agent.max_iterations} steps", "max_iterations"
                )
            cp["iteration"] += 1
            self._delta_index = 0
            try:
                response = await provider.complete(
                    messages=self._messages(), tools=self._tool_specs(), on_delta=self.on_delta
                )
            except LLMError as exc:
                raise RunFailed(str(exc), "llm") from None
            cp["messages"].append(response.as_message())
            self.emit(ev.LLM_MESSAGE, self._message_payload(response))
            if not response.tool_calls:
                return await self._finish(RunStatus.COMPLETED, output=response.content)
            cp["pending_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments, "raw_arguments": c.raw_arguments}
                for c in response.tool_calls
            ]
            cp["observations"] = {}
            self._proposed_here = {call["id"] for call in cp["pending_calls"]}
            for call in cp["pending_calls"]:
                self.emit(
                    ev.TOOL_PROPOSED,
                    {"tool_call_id": call["id"], "tool": call["name"], "arguments": call["arguments"]},
                )
            # Saved with the next write (at the latest, the one recording a tool's start).
            self._checkpoint_dirty = True

    def _message_payload(self, response: LLMResponse) -> dict[str, Any]:
        return {
            "content": response.content,
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls
            ],
            "iteration": self.checkpoint["iteration"],
        }

    def _messages(self) -> list[dict[str, Any]]:
        parts = [self.run.agent.instructions.strip(), *(self.checkpoint["session_context"] or []), RULES]
        system = "\n\n".join(p for p in parts if p)
        return [{"role": "system", "content": system}, *self.checkpoint["messages"]]

    def _tool_specs(self) -> list[dict[str, Any]]:
        return [tool.spec.as_openai_tool() for tool in self.tools.values()]

    def _context(self, **fields: Any) -> HookContext:
        run = self.run
        metadata = {
            "org_id": run.agent.organization_id,
            "org_read_only": run.agent.organization.read_only,
            "conversation_id": run.conversation_id,
            "run_id": run.pk,
            "execution_path": run.execution_path,
            "require_confirmation_for_all": bool(self.chain.get("require_confirmation_for_all")),
            "run_events": self.sink,
            **fields.pop("metadata", {}),
        }
        return HookContext(agent_id=run.agent_id, user_id=run.user_id, metadata=metadata, **fields)

    async def _save(self) -> None:
        self._checkpoint_dirty = True
        await self.commit()

    # --- tool calls -------------------------------------------------------------------------------

    async def _run_pending_calls(self) -> None:
        cp = self.checkpoint
        todo = [c for c in cp["pending_calls"] if c["id"] not in cp["observations"]]
        results = await asyncio.gather(*(self._run_call(c) for c in todo), return_exceptions=True)
        suspension: Suspended | None = None
        for call, result in zip(todo, results, strict=True):
            if isinstance(result, Suspended):
                suspension = suspension or result
            elif isinstance(result, BaseException):
                raise result
            else:
                cp["observations"][call["id"]] = result
        if suspension is not None:
            raise suspension
        for call in cp["pending_calls"]:
            cp["messages"].append(
                {"role": "tool", "tool_call_id": call["id"], "content": cp["observations"][call["id"]]}
            )
        # No checkpoint here: the next one is saved with the LLM's answer. A crash in between
        # re-enters these calls, finds their executions recorded and replays their observations.
        cp["pending_calls"], cp["observations"] = [], {}

    async def _run_call(self, call: dict[str, Any]) -> str:
        """Return the observation for one tool call, or raise :class:`Suspended`."""
        call_id, name = call["id"], call["name"]
        if call_id not in self._proposed_here:  # proposed before a crash or suspension: look
            previous = await db(store.execution_find, run_id=self.run_id, tool_call_id=call_id)
            if previous is not None:
                return await self._observation_of_previous(call, previous)

        tool = self.tools.get(name)
        if tool is None:
            return self._refuse(
                call, f"Unknown tool {name!r}. Available tools: {', '.join(self.tools) or 'none'}."
            )
        args = call["arguments"]
        problems = argument_errors(tool.spec.parameters, args) if args is not None else ["not valid JSON"]
        if problems:
            return self._refuse(call, f"Invalid arguments for {name}: " + "; ".join(problems[:5]))

        ctx = self._context(
            tool_name=name,
            tool_args=args,
            metadata={
                "tool_call_id": call_id,
                "requires_confirmation": tool.spec.requires_confirmation,
                "is_write": tool.spec.is_write,
            },
        )
        pre = await self.registry.run_pre_tool_use(ctx)
        self.emit_side_effects(pre.side_effects, point="PreToolUse", tool_call_id=call_id)
        if pre.suspended:
            raise Suspended(call, pre.suspension)
        if not pre.allow:
            error = redact_credentials(pre.error or "Blocked.")
            self.emit(
                ev.TOOL_BLOCKED,
                {"tool_call_id": call_id, "tool": name, "blocked_by": pre.blocked_by, "error": error},
            )
            await self.commit()
            return error
        # The engine's own copy: a hook that kept a reference to the arguments cannot change
        # them between this check and the tool's run.
        final_args = copy.deepcopy(pre.tool_args)
        digest = store.args_sha256(final_args)
        mismatch = self.approval_mismatch(pre.approved_args_sha256, digest)
        if mismatch is not None:
            self.emit(
                ev.TOOL_BLOCKED,
                {"tool_call_id": call_id, "tool": name, "blocked_by": "approval_binding", "error": mismatch},
            )
            await self.commit()
            return mismatch
        self.emit(
            ev.TOOL_STARTED,
            {"tool_call_id": call_id, "tool": name, "arguments": final_args, "args_sha256": digest},
        )
        try:
            # Never start a tool on a run that was cancelled or taken over meanwhile.
            await self.commit(
                writes=(
                    store.execution_begin(
                        run_id=self.run_id, tool_call_id=call_id, tool_name=name, args=final_args
                    ),
                ),
                check_lease=True,
            )
        except IntegrityError:  # another process started this very call: never run it twice
            return await self._unknown(call)

        started = time.perf_counter()
        try:
            result: Any = await tool.run(final_args)
            status = ToolExecution.Status.SUCCEEDED
        except ToolError as exc:
            # Tools mask the secrets they know; this catches a credential-shaped text any tool let by.
            result, status = f"Tool error: {redact_credentials(str(exc))}", ToolExecution.Status.FAILED
        except Exception as exc:  # a tool bug must not crash the run; the LLM hears it plainly
            log.exception("tool %s crashed in run %s", name, self.run_id)
            result, status = f"Tool error: {name} failed unexpectedly ({type(exc).__name__}).", "failed"
        duration = (time.perf_counter() - started) * 1000
        # Whatever the tool returned, its outcome can be stored (and read back): unstorable parts
        # (huge integers, NaN, NUL, lone surrogates, too deep nesting) become placeholders, so
        # the execution always ends recorded and the run goes on. Hooks see what is stored.
        stored = jsonsafe.storable(result)
        # The outcome is stored with the observation, after the (time-bounded) PostToolUse hooks:
        # one write instead of two. A crash in between reports the call as "outcome unknown".
        return await self._post(
            call,
            ctx,
            stored,
            status,
            duration,
            record=store.execution_finish(
                run_id=self.run_id, tool_call_id=call_id, status=status, result=stored, duration_ms=duration
            ),
        )

    @staticmethod
    def approval_mismatch(approved: str | None, digest: str) -> str | None:
        """Refuse arguments that differ from the ones a human approved (DESIGN §1.3, §1.10).

        ``approved`` comes from the registry's outcome, which takes it only from the approval
        gate (a system hook), never from ``metadata`` that every hook can write: whatever changed
        the arguments after the approval cannot make them run.
        """
        if approved is None or approved == digest:
            return None
        return (
            "Refused: the arguments about to run differ from the ones that were approved. "
            "The call was not executed."
        )

    async def _post(
        self,
        call: dict[str, Any],
        ctx: HookContext,
        result: Any,
        status: str,
        ms: float,
        record: store.Write | None = None,
    ) -> str:
        post_ctx = HookContext(
            tool_name=ctx.tool_name,
            tool_args=ctx.tool_args,
            agent_id=ctx.agent_id,
            user_id=ctx.user_id,
            metadata={**ctx.metadata, "tool_status": status},
            tool_result=result,
        )
        post = await self.registry.run_post_tool_use(post_ctx)
        self.emit_side_effects(post.side_effects, point="PostToolUse", tool_call_id=call["id"])
        observation = _text(post.result)
        self.emit(
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
        await self.commit(facts=(record,) if record is not None else ())
        return observation

    async def _observation_of_previous(self, call: dict[str, Any], previous: ToolExecution) -> str:
        if previous.status in (ToolExecution.Status.STARTED, ToolExecution.Status.UNKNOWN):
            return await self._unknown(call)
        # It finished but the checkpoint did not record the observation: replay PostToolUse on the
        # stored result rather than running the tool again.
        ctx = self._context(
            tool_name=call["name"], tool_args=previous.args, metadata={"tool_call_id": call["id"]}
        )
        return await self._post(call, ctx, previous.result, previous.status, previous.duration_ms or 0.0)

    async def _unknown(self, call: dict[str, Any]) -> str:
        await db(store.execution_mark_unknown, run_id=self.run_id, tool_call_id=call["id"])
        self.emit(
            ev.TOOL_FINISHED,
            {
                "tool_call_id": call["id"],
                "tool": call["name"],
                "status": ToolExecution.Status.UNKNOWN,
                "observation": UNKNOWN_OUTCOME,
                "duration_ms": None,
            },
        )
        await self.commit()
        return UNKNOWN_OUTCOME

    def _refuse(self, call: dict[str, Any], error: str) -> str:
        self.emit(
            ev.TOOL_BLOCKED,
            {"tool_call_id": call["id"], "tool": call["name"], "blocked_by": None, "error": error},
        )
        return error

    # --- endings ----------------------------------------------------------------------------------

    async def _finish(self, status: str, *, output: str = "", error: str = "", stage: str = "") -> str:
        """End the run once: its terminal event, status and output are written together, and only
        while the run is ours and not cancelled. Otherwise that ending never happened (its event
        is withdrawn) and :meth:`_after_lease_lost` decides: cancelled, or another holder's."""
        # A failure's text may quote a model service's or a hook's URL: never with its password.
        error = redact_credentials(error)
        if status == RunStatus.COMPLETED:
            self.emit(ev.RUN_COMPLETED, {"output": output})
        else:
            self.emit(ev.RUN_FAILED, {"error": error, "stage": stage})
        ending = self._seq
        self._checkpoint_dirty = hasattr(self, "checkpoint")
        try:
            await self.commit(
                lambda: store.run_finish(
                    run_id=self.run_id, owner=self.owner, status=status, output=output, error=error
                ),
                check_lease=True,
            )
        except store.LeaseLost:
            self._retract(ending)
            return await self._after_lease_lost()
        return status

    async def _after_lease_lost(self) -> str:
        """A guarded write was refused: either the user cancelled the run (we still hold the
        lease: end it as cancelled, once) or another process took it over (stop without writing).

        Order: whatever the run did before (a tool's outcome included) is already recorded or
        queued; the cancellation is its one ending (``run.failed``, stage ``cancelled``)."""
        if await db(store.cancel_requested, run_id=self.run_id):
            error = "cancelled by the user"
            self.emit(ev.RUN_FAILED, {"error": error, "stage": "cancelled"})
            try:
                await self.commit(
                    lambda: store.run_end_cancelled(run_id=self.run_id, owner=self.owner, error=error),
                    check_lease=True,
                    cancelled_ok=True,
                )
            except store.LeaseLost:
                pass  # taken over meanwhile: the new holder ends it
            else:
                return RunStatus.CANCELLED
        self._buffer.clear()  # the new holder numbers events from here on
        log.warning("run %s: lease lost to another worker; stopping here", self.run_id)
        return "lease_lost"

    async def _suspend(self, suspension: Suspended) -> str:
        call = suspension.call
        self.emit(
            ev.RUN_SUSPENDED,
            {
                "tool_call_id": call["id"],
                "tool": call["name"],
                "reason": suspension.reason,
                "detail": suspension.detail,
            },
        )
        parking = self._seq
        state, new_messages = self._checkpoint_snapshot()
        self._checkpoint_dirty = False  # parking writes the checkpoint itself
        try:
            # Guarded: a run cancelled meanwhile is not parked (nobody would resume it).
            await self.commit(
                lambda: store.run_park(
                    run_id=self.run_id, owner=self.owner, checkpoint=state, new_messages=new_messages
                ),
                check_lease=True,
            )
        except store.LeaseLost:
            self._retract(parking)
            return await self._after_lease_lost()
        if suspension.still_waiting is not None and not await suspension.still_waiting():
            # The answer arrived while we were parking: its resume found the run still running
            # and gave up, so resume it ourselves (claims are idempotent).
            from agents.executors import dispatch_resume

            dispatch_resume(self.run_id, reason="the awaited answer arrived while the run was parking")
        return RunStatus.AWAITING_APPROVAL


def _events_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The events a stream message carries (``run.events``: several; ``run.event``: one)."""
    return list(message["events"]) if message["type"] == "run.events" else [message["event"]]
