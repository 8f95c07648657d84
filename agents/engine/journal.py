"""The run journal: what every engine writes about a run, in order, while it holds the run's lease.

One :class:`RunJournal` per driven run. It numbers events (gap-free ``seq``), stores them with the
checkpoint and other writes in lease-guarded transactions (:meth:`RunJournal.commit`), pushes them
to the run's stream through a background sender (the run never waits on Redis), beats the lease,
and ends the run once: completed or failed (:meth:`finish`), parked on an approval (:meth:`park`),
cancelled or lost to another worker (:meth:`after_lease_lost`). Engines (ReAct, DAG, single-call)
keep their own state in :attr:`checkpoint`; the journal stores it.

Checkpoint layout (the engine's own keys aside): ``{"v": 1, "message_count": n, …}``, the
messages themselves being ``RunMessage`` rows appended as the run goes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from agents import events as ev
from agents import executors
from agents.consumers import run_group
from agents.engine import batch, child_runs, store
from agents.engine.db import db
from agents.engine.loop_writes import LoopWriter
from agents.models import Run, RunStatus
from agents.tools.redaction import redact_credentials
from hooks import SideEffect

log = logging.getLogger(__name__)

STREAM_FLUSH_SECONDS = 5.0
"""How long a run, once it ends, waits for its stream's last messages to leave."""

STREAM_SPACING_SECONDS = 0.002
"""The least time between two sends of one run's stream. A run that writes less often (one
waiting on its model or its tools) sends each write's events at once; a busy one (fast tools,
a streamed answer) sends what came meanwhile as one message: each send costs the run's process
about 0.1 ms of CPU in the Redis client, and each watching server one message to hand out, while
2 ms are nothing to a reader (the stream's target is p99 <= 100 ms)."""


class RunJournal:
    """Events, checkpoint and endings of one run. Precondition: ``owner`` holds the run's lease.

    It is also the run's :class:`hooks.RunEvents`: the registry hands it to system hooks (the
    approval gate publishes ``approval.pending`` through it); it never travels in ``metadata``.
    """

    def __init__(self, run_id: int, *, owner: str) -> None:
        self.run_id = run_id
        self.owner = owner
        self.layer = get_channel_layer()
        self.checkpoint: dict[str, Any] | None = None
        self.execution_path: str | None = None  # the run's, once opened
        self._buffer: list[batch.QueuedEvent] = []
        self._write_lock = asyncio.Lock()
        self._seq = 0
        self._delta_index = 0
        self._checkpoint_dirty = False
        self._stored_messages = 0
        self._outbox: deque[dict[str, Any]] = deque()
        self._sender: asyncio.Task[None] | None = None
        self._last_send = float("-inf")  # the loop's clock
        self._writer: LoopWriter | None = None
        #: Told the run's status once its ending is written, before higher apps are told
        #: (``run_settled``): a caller waiting for the outcome need not wait for them.
        self.on_ended: Callable[[str], None] | None = None

    # --- opening ----------------------------------------------------------------------------------

    async def open(self, opening: store.Opening | None = None) -> Run:
        """Load the run, its last ``seq`` and its checkpoint (messages included), or leave
        :attr:`checkpoint` ``None`` for a run that never saved one. ``opening``: what the caller
        read already (a run it has just created: ``store.opening_of_new_run``)."""
        if opening is None:
            opening = await db(store.run_open, run_id=self.run_id)
        run = opening.run
        self.execution_path = run.execution_path
        self._seq = opening.last_seq
        if opening.messages is not None:
            checkpoint = dict(run.checkpoint)
            self._stored_messages = checkpoint.pop("message_count", 0)
            checkpoint["messages"] = opening.messages
            self.checkpoint = checkpoint
        if opening.writes_on_loop:
            self._writer = LoopWriter(pooled=executors.embedded.owns_running_loop())
        return run

    async def close(self) -> None:
        """Release what the journal holds (a connection of the run's own): the run stopped."""
        if self._writer is not None:
            await self._writer.close()

    # --- events -----------------------------------------------------------------------------------

    @property
    def seq(self) -> int:
        """The last seq handed out (stored or queued)."""
        return self._seq

    def emit(self, type_: str, payload: dict[str, Any]) -> None:
        """Queue an event; it is stored and pushed by the next :meth:`commit`."""
        self._seq += 1
        self._buffer.append(batch.QueuedEvent(self._seq, type_, payload))

    async def publish(self, type_: str, payload: dict[str, Any], *, at_once: bool = True) -> None:
        """Emit an event; ``at_once`` stores and pushes it now, otherwise it goes with the run's
        next write (saving a transaction when that write is imminent). (:class:`hooks.RunEvents`)"""
        self.emit(type_, payload)
        if at_once:
            await self.commit()

    def retract(self, seq: int) -> None:
        """Withdraw a queued, not yet stored event (an ending that did not happen); later queued
        events move down one, so seqs stay gap-free."""
        kept: list[batch.QueuedEvent] = []
        for event in self._buffer:
            if event.seq == seq:
                continue
            kept.append(
                event if event.seq < seq else batch.QueuedEvent(event.seq - 1, event.type, event.payload)
            )
        if len(kept) < len(self._buffer):
            self._buffer = kept
            self._seq -= 1

    def retract_call(self, tool_call_id: str, *, after: int) -> None:
        """Withdraw the queued, not yet stored events of one tool call numbered after ``after``
        (what a call that failed half-way had queued); later events move down, seqs stay gap-free."""
        doomed = [
            event.seq
            for event in self._buffer
            if event.seq > after and event.payload.get("tool_call_id") == tool_call_id
        ]
        for seq in reversed(doomed):
            self.retract(seq)

    def emit_side_effects(
        self, effects: list[SideEffect], *, point: str, tool_call_id: str | None
    ) -> list[SideEffect] | None:
        """One ``hook.side_effect`` event per note; those of hooks in shadow mode carry what the
        hook would have done (``shadow``) and are returned, for the audit record (``None``: none)."""
        shadows = None
        for effect in effects:
            payload = {
                "tool_call_id": tool_call_id,
                "hook": effect.hook,
                "point": point,
                # A failing hook's message quotes its exception, which may quote a URL.
                "message": redact_credentials(effect.message),
                "failure": effect.failure,
            }
            if effect.shadow is not None:
                payload["shadow"] = effect.shadow["decision"]
                shadows = [*(shadows or ()), effect]
            self.emit(ev.HOOK_SIDE_EFFECT, payload)
        return shadows

    # --- writes -----------------------------------------------------------------------------------

    def checkpoint_changed(self) -> None:
        """The checkpoint is saved with the next write (at the latest, the one recording a tool's
        start), instead of costing a transaction of its own."""
        self._checkpoint_dirty = True

    async def save(self) -> None:
        """Store the checkpoint (and queued events) now."""
        self._checkpoint_dirty = True
        await self.commit()

    async def commit(
        self,
        op: Callable[[], Any] | None = None,
        *,
        check_lease: bool = False,
        writes: tuple[batch.Write, ...] = (),
        facts: tuple[batch.Write, ...] = (),
        cancelled_ok: bool = False,
        durable: bool = True,
        ending: dict[str, Any] | None = None,
    ) -> Any:
        """Store queued events, the checkpoint if it changed, ``writes`` and ``op`` in one
        transaction, then push the events, in seq order.

        The checkpoint rides along with the next write instead of costing a transaction of its
        own; the write that precedes a tool's execution always carries it (and its lease check).
        Under a lease check everything but ``facts`` is written only if the run is still ours
        and not cancelled (``cancelled_ok``: still ours); ``facts`` (a tool's outcome) are
        written in the same transaction whatever happened to the run meanwhile. ``durable=False``
        (a tool's outcome only: :mod:`agents.engine.loop_writes` says why that is safe) lets the
        commit return before the database's disk has it. ``ending`` (the columns of the run's
        ending, ``store.run_ending``; only with the loop's writer) ends the run in the same
        guarded write.
        """
        assert ending is None or (self._writer is not None and op is None), "an ending on the loop only"
        async with self._write_lock:
            queued, self._buffer = self._buffer, []
            snapshot = self.checkpoint_snapshot() if self._checkpoint_dirty else None
            if not queued and op is None and snapshot is None and not writes and not facts and not ending:
                return None
            self._checkpoint_dirty = False
            guard = None
            parts: list[batch.Write] = []
            if snapshot is not None:  # also verifies the lease
                state, new_messages = snapshot
                guard = batch.Guard(self.run_id, self.owner, state, cancelled_ok=cancelled_ok, ending=ending)
                first = state["message_count"] - len(new_messages)
                parts.append(store.message_rows(run_id=self.run_id, first=first, messages=new_messages))
            elif check_lease or ending:
                guard = batch.Guard(self.run_id, self.owner, cancelled_ok=cancelled_ok, ending=ending)
            parts.extend(writes)
            stamp = timezone.now()
            parts.append(store.event_rows(run_id=self.run_id, events=queued, stamp=stamp))
            try:
                if op is None and self._writer is not None:
                    result = await self._write_on_loop(guard, parts, facts, durable=durable)
                else:
                    result = await db(store.write, guard=guard, writes=parts, op=op, facts=facts)
            except batch.LeaseLost:
                # Keep the events: if the run was cancelled they are stored with its ending.
                self._buffer[:0] = queued
                raise
            except Exception:
                # Nothing was written: keep the events and the checkpoint to save, so seqs stay
                # gap-free whatever the caller does next.
                self._buffer[:0] = queued
                self._checkpoint_dirty = self._checkpoint_dirty or snapshot is not None
                raise
            if snapshot is not None:
                self._stored_messages = snapshot[0]["message_count"]
            self._push(queued, stamp)
            return result

    async def _write_on_loop(
        self,
        guard: batch.Guard | None,
        writes: list[batch.Write],
        facts: tuple[batch.Write, ...],
        *,
        durable: bool,
    ) -> None:
        """:func:`agents.engine.store.write` without ``op``, run on the loop (PostgreSQL)."""
        assert self._writer is not None
        statement = batch.postgres_statement(
            guard, batch.non_empty(writes), batch.non_empty(facts), durable=durable
        )
        if statement is None:
            return
        held = await self._writer.run(*statement)
        if guard is not None and not held:
            raise batch.lease_lost(guard)

    def checkpoint_snapshot(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The checkpoint to store and the messages appended since the last save.

        Messages are stored as rows appended once (``RunMessage``), so a step writes only what it
        added, not the whole history. The copy (one level deep) is safe to serialise in the
        database thread while concurrent tool calls go on adding observations (message dicts
        never change once appended).
        """
        cp = self.checkpoint
        assert cp is not None, "the engine sets the checkpoint before saving it"
        messages = cp["messages"]
        state: dict[str, Any] = {}
        for key, value in cp.items():
            if key == "messages":
                continue
            state[key] = list(value) if type(value) is list else dict(value) if type(value) is dict else value
        state["message_count"] = len(messages)
        return state, messages[self._stored_messages :]

    # --- the stream -------------------------------------------------------------------------------

    def _push(self, queued: list[batch.QueuedEvent], stamp: dt.datetime) -> None:
        if self.layer is None or not queued:
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
            for event in queued
        ]
        # One channel-layer message per commit, not per event: each send is several Redis calls.
        self._send_soon({"type": "run.events", "events": events})

    def start_deltas(self) -> None:
        """A new LLM answer begins: its deltas are numbered from 0."""
        self._delta_index = 0

    async def on_delta(self, text: str) -> None:
        """Stream a piece of the LLM's answer (not stored: the whole answer is, as an event)."""
        if self.layer is None:
            return
        message = {"run_id": self.run_id, "seq": self._seq, "type": ev.LLM_DELTA}
        message["payload"] = {"text": text, "index": self._delta_index}
        self._delta_index += 1
        self._send_soon({"type": "run.event", "event": message})

    def _send_soon(self, message: dict[str, Any]) -> None:
        """Queue a message for the run's stream. One sender task sends them in order, so the run
        goes on while the channel layer talks to Redis; :meth:`flush_stream` waits for it."""
        self._outbox.append(message)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send_outbox())

    async def _send_outbox(self) -> None:
        group = run_group(self.run_id)
        loop = asyncio.get_running_loop()
        while self._outbox:
            wait = self._last_send + STREAM_SPACING_SECONDS - loop.time()
            if wait > 0:  # a busy run: what it queues meanwhile leaves in the same message
                await asyncio.sleep(wait)
            self._last_send = loop.time()
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

    async def flush_stream(self) -> None:
        """Wait (a bounded time: the stream is best effort) for queued messages to be sent."""
        if self._sender is None or self._sender.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._sender), STREAM_FLUSH_SECONDS)
        except TimeoutError:
            log.warning("run %s: the stream did not take its last events in time", self.run_id)

    # --- the lease --------------------------------------------------------------------------------

    async def heartbeat(self) -> None:
        """Extend the lease forever (run it as a task; cancel it when the run stops)."""
        interval = max(1.0, settings.RUN_LEASE_SECONDS / 3)
        while True:
            await asyncio.sleep(interval)
            await db(store.heartbeat, run_id=self.run_id, owner=self.owner)

    # --- endings ----------------------------------------------------------------------------------

    async def finish(self, status: str, *, output: str = "", error: str = "", stage: str = "") -> str:
        """End the run once: its terminal event, status and output are written together, and only
        while the run is ours and not cancelled. Otherwise that ending never happened (its event
        is withdrawn) and :meth:`after_lease_lost` decides: cancelled, or another holder's."""
        # A failure's text may quote a model service's or a hook's URL: never with its password.
        error = redact_credentials(error)
        if status == RunStatus.COMPLETED:
            self.emit(ev.RUN_COMPLETED, {"output": output})
        else:
            self.emit(ev.RUN_FAILED, {"error": error, "stage": stage})
        ending = self._seq
        self._checkpoint_dirty = self.checkpoint is not None
        try:
            if self._writer is not None:
                # One guarded statement on the loop (events, messages, checkpoint and the run's
                # ending), then higher apps are told in the database thread, as run_finish does
                # once its transaction committed: their receivers use the ORM.
                await self.commit(ending=store.run_ending(status=status, output=output, error=error))
            else:
                await self.commit(
                    lambda: store.run_finish(
                        run_id=self.run_id,
                        owner=self.owner,
                        status=status,
                        output=output,
                        error=error,
                        execution_path=self.execution_path,
                    ),
                    check_lease=True,
                )
        except batch.LeaseLost:
            self.retract(ending)
            return await self.after_lease_lost()
        if self.on_ended is not None:
            self.on_ended(status)
        if self._writer is not None:
            await db(
                store.run_settled_tell, run_id=self.run_id, status=status, execution_path=self.execution_path
            )
        return status

    async def after_lease_lost(self) -> str:
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
            except batch.LeaseLost:
                pass  # taken over meanwhile: the new holder ends it
            else:
                return RunStatus.CANCELLED
        self._buffer.clear()  # the new holder numbers events from here on
        log.warning("run %s: lease lost to another worker; stopping here", self.run_id)
        return "lease_lost"

    async def relay_approvals(self, *, child_run_ids: list[int]) -> None:
        """Show on this run the approvals its parked children (DAG steps, delegates) wait for,
        once each, as ``approval.pending`` events naming the child (``child_run_id``): whoever
        watches this run sees what it waits for and, if they may, decides it there."""
        assert self.checkpoint is not None
        relayed: list[Any] = self.checkpoint.setdefault("relayed_approvals", [])
        for child_id, payload in await db(child_runs.pending_approvals, run_ids=child_run_ids):
            if payload.get("request_id") in relayed:
                continue
            relayed.append(payload.get("request_id"))
            self.emit(ev.APPROVAL_PENDING, {**payload, "child_run_id": child_id})

    async def park(
        self,
        *,
        tool_call_id: str,
        tool: str,
        reason: str,
        detail: dict[str, Any],
        still_waiting: Callable[[], Awaitable[bool]] | None,
    ) -> str:
        """Suspend the run on a call that waits for an answer (an approval): the checkpoint is
        written with the parking, no coroutine waits (docs/design.md §1.6)."""
        self.emit(
            ev.RUN_SUSPENDED, {"tool_call_id": tool_call_id, "tool": tool, "reason": reason, "detail": detail}
        )
        parking = self._seq
        state, new_messages = self.checkpoint_snapshot()
        self._checkpoint_dirty = False  # parking writes the checkpoint itself
        try:
            # Guarded: a run cancelled meanwhile is not parked (nobody would resume it).
            await self.commit(
                lambda: store.run_park(
                    run_id=self.run_id, owner=self.owner, checkpoint=state, new_messages=new_messages
                ),
                check_lease=True,
            )
        except batch.LeaseLost:
            self.retract(parking)
            return await self.after_lease_lost()
        if still_waiting is not None and not await still_waiting():
            # The answer arrived while we were parking: its resume found the run still running
            # and gave up, so resume it ourselves (claims are idempotent).
            executors.dispatch_resume(
                self.run_id, reason="the awaited answer arrived while the run was parking"
            )
        return RunStatus.AWAITING_APPROVAL


def _events_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The events a stream message carries (``run.events``: several; ``run.event``: one)."""
    return list(message["events"]) if message["type"] == "run.events" else [message["event"]]
