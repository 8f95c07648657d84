"""Synchronous persistence for the engine, called through ``database_sync_to_async``.

Every function here is a small transaction; the engine serialises its writes so that events are
committed in ``seq`` order. Preconditions are stated per function; "the caller holds the lease"
means ``Run.lease_owner`` is the caller's token, checked again on every checkpoint write.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from agents import events as ev
from agents.engine import batch, jsonsafe
from agents.engine.batch import Change, Guard, QueuedEvent, Rows, Write
from agents.models import (
    Run,
    RunEvent,
    RunMessage,
    RunStatus,
    ToolExecution,
)
from agents.signals import run_cancelled, run_settled

T = TypeVar("T")


def args_sha256(args: Any) -> str:
    """SHA-256 of the canonical JSON of tool arguments (sorted keys, no spaces, UTF-8)."""
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # surrogatepass: a lone surrogate (valid in JSON text from an LLM) hashes instead of crashing;
    # any other string hashes exactly as plain UTF-8.
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def lease_deadline() -> dt.datetime:
    return timezone.now() + dt.timedelta(seconds=settings.RUN_LEASE_SECONDS)


def run_claim(*, run_id: int, owner: str, from_statuses: tuple[str, ...]) -> bool:
    """Take the run's lease with one conditional update: it must be in ``from_statuses``, or be
    ``running`` with an expired lease (its worker died). Exactly one concurrent caller wins."""
    now = timezone.now()
    claimable = Q(status__in=from_statuses) | Q(status=RunStatus.RUNNING, lease_expires_at__lt=now)
    won = Run.objects.filter(claimable, pk=run_id, cancel_requested=False).update(
        status=RunStatus.RUNNING,
        lease_owner=owner,
        lease_expires_at=lease_deadline(),
        heartbeat_at=now,
        started_at=Coalesce("started_at", Value(now)),  # the first claim's time; resumes keep it
    )
    return bool(won)


@dataclass(frozen=True, slots=True)
class Opening:
    """What a journal reads when it opens a run (one trip to the database thread)."""

    run: Run
    last_seq: int
    messages: list[dict[str, Any]] | None
    """The checkpoint's stored messages; ``None`` for a run that never saved a checkpoint."""
    writes_on_loop: bool
    """Whether the run's step writes may run on the event loop (:mod:`agents.engine.loop_writes`):
    PostgreSQL, and this thread's connection is not inside a caller's transaction."""


def run_open(*, run_id: int) -> Opening:
    run = run_load(run_id=run_id)
    count = (run.checkpoint or {}).get("message_count", 0) if run.checkpoint else None
    return Opening(
        run=run,
        last_seq=last_seq(run_id=run_id),
        messages=messages_load(run_id=run_id, count=count) if count is not None else None,
        writes_on_loop=_postgres() and not connection.in_atomic_block,
    )


def opening_of_new_run(run: Run, *, started_on_loop: bool = False) -> Opening:
    """What :func:`run_open` would read of ``run``, a run its caller has just created (claimed,
    with its agent, organisation, conversation and user in hand): no event, no checkpoint yet.
    Called in the database thread, outside the transaction that created it, or on the event
    loop for a run started there (``started_on_loop``: PostgreSQL, committed)."""
    on_loop = started_on_loop or (_postgres() and not connection.in_atomic_block)
    return Opening(run=run, last_seq=0, messages=None, writes_on_loop=on_loop)


def run_load(*, run_id: int) -> Run:
    return Run.objects.select_related("agent", "agent__organization", "conversation", "user").get(pk=run_id)


def last_seq(*, run_id: int) -> int:
    return RunEvent.objects.filter(run_id=run_id).aggregate(m=Max("seq"))["m"] or 0


def messages_load(*, run_id: int, count: int) -> list[dict[str, Any]]:
    """The first ``count`` stored messages of a run, in order."""
    return list(
        RunMessage.objects.filter(run_id=run_id, index__lt=count)
        .order_by("index")
        .values_list("message", flat=True)
    )


def previous_messages(*, run: Run) -> list[dict[str, Any]]:
    """The conversation so far: the messages of the latest completed run before this one.

    A child run (a DAG step, a delegate) starts from its own input alone, and is never taken for
    a turn of the conversation it shares with its parent."""
    if run.parent_run_id is not None:
        return []
    earlier = (
        Run.objects.filter(
            conversation_id=run.conversation_id,
            status=RunStatus.COMPLETED,
            pk__lt=run.pk,
            parent_run__isnull=True,
        )
        .order_by("-pk")
        .values_list("pk", "checkpoint")
        .first()
    )
    if earlier is None:
        return []
    return messages_load(run_id=earlier[0], count=(earlier[1] or {}).get("message_count", 0))


# --- the hot path ---------------------------------------------------------------------------------
# A step's writes (events, messages, tool executions) are plain SQL built in ``agents.engine.batch``;
# on PostgreSQL one statement, elsewhere one transaction of plain statements.


def _postgres() -> bool:
    return connection.vendor == "postgresql"


def _json_placeholder() -> str:
    return "%s::jsonb" if _postgres() else "%s"


def _table(model: type) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def event_rows(*, run_id: int, events: list[QueuedEvent], stamp: dt.datetime) -> Rows:
    return Rows(
        RunEvent._meta.db_table,
        ("run_id", "seq", "type", "payload", "created_at"),
        [(run_id, e.seq, e.type, e.payload, stamp) for e in events],
        frozenset({"payload"}),
    )


def message_rows(*, run_id: int, first: int, messages: list[dict[str, Any]]) -> Rows:
    return Rows(
        RunMessage._meta.db_table,
        ("run_id", "index", "message"),
        [(run_id, first + offset, message) for offset, message in enumerate(messages)],
        frozenset({"message"}),
    )


def execution_begin(
    *, run_id: int, tool_call_id: str, tool_name: str, args: dict[str, Any], digest: str
) -> Rows:
    """The record that a tool is about to run. Written under a :class:`Guard`; if a row already
    exists (someone started this call before and it must not run again) the whole write fails with
    ``IntegrityError``. No savepoint: the caller's whole transaction is void then. ``digest``:
    :func:`args_sha256` of ``args``, which the caller computed for the call's event."""
    return Rows(
        ToolExecution._meta.db_table,
        ("run_id", "tool_call_id", "tool_name", "args", "args_sha256", "status", "started_at"),
        [(run_id, tool_call_id, tool_name, args, digest, "started", timezone.now())],
        frozenset({"args"}),
    )


def execution_finish(
    *, run_id: int, tool_call_id: str, status: str, result: Any, duration_ms: float
) -> Change:
    return Change(
        ToolExecution._meta.db_table,
        "status = %s, result = {json}, duration_ms = %s, finished_at = %s",
        "run_id = %s AND tool_call_id = %s AND status = %s",
        [status, jsonsafe.dumps(result), duration_ms, timezone.now(), run_id, tool_call_id, "started"],
    )


def _insert_plain(rows: Rows) -> None:
    quote = connection.ops.quote_name
    adapt = connection.ops.adapt_datetimefield_value
    marks = ", ".join(_json_placeholder() if c in rows.json_columns else "%s" for c in rows.columns)
    json_at = [c in rows.json_columns for c in rows.columns]
    params = [
        jsonsafe.dumps(v) if is_json else _plain(adapt(v) if isinstance(v, dt.datetime) else v)
        for row in rows.values
        for v, is_json in zip(row, json_at, strict=True)
    ]
    names = ", ".join(quote(c) for c in rows.columns)
    values = ", ".join(f"({marks})" for _ in rows.values)
    sql = f"INSERT INTO {quote(rows.table)} ({names}) VALUES {values}"  # noqa: S608 - names are ours
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _plain(value: Any) -> Any:
    """A text column's value without what PostgreSQL text refuses (NUL, lone surrogates)."""
    return jsonsafe.text(value) if isinstance(value, str) else value


def _update_plain(change: Change) -> None:
    assignments = change.assignments.format(json=_json_placeholder())
    sql = f"UPDATE {connection.ops.quote_name(change.table)} SET {assignments} WHERE {change.where}"  # noqa: S608
    adapt = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cursor:
        cursor.execute(sql, [adapt(p) if isinstance(p, dt.datetime) else p for p in change.params])


def _guard_plain(guard: Guard) -> bool:
    """Whether the run is held as ``guard`` says (storing its checkpoint if so). The row is
    locked until the transaction ends, so a cancel cannot slip in between the check and the
    writes it guards."""
    held_sql = batch.held_condition(guard)
    with connection.cursor() as cursor:
        if guard.checkpoint is not None:
            cursor.execute(
                f"UPDATE {_table(Run)} SET checkpoint = {_json_placeholder()} WHERE {held_sql}",  # noqa: S608
                [jsonsafe.dumps(guard.checkpoint), *batch.guard_params(guard)],
            )
            return bool(cursor.rowcount)
        lock = " FOR UPDATE" if _postgres() else ""  # SQLite: the write lock serialises anyway
        cursor.execute(f"SELECT 1 FROM {_table(Run)} WHERE {held_sql}{lock}", batch.guard_params(guard))  # noqa: S608
        return cursor.fetchone() is not None


def _write_postgres(guard: Guard | None, writes: list[Write], facts: list[Write]) -> None:
    statement = batch.postgres_statement(guard, writes, facts)
    if statement is None:
        return
    with connection.cursor() as cursor:
        cursor.execute(*statement)
        held = cursor.fetchone()[0]
    if guard is not None and not held:
        raise batch.lease_lost(guard)


def _apply_plain(items: list[Write] | tuple[Write, ...]) -> None:
    for item in items:
        if isinstance(item, Rows):
            if item.values:
                _insert_plain(item)
        else:
            _update_plain(item)


def write(
    *,
    guard: Guard | None,
    writes: list[Write],
    op: Callable[[], T] | None = None,
    facts: list[Write] | tuple[Write, ...] = (),
) -> T | None:
    """Apply ``writes`` (and ``op``, an ORM callable for the rare writes) in one transaction.

    With a ``guard`` nothing of ``writes`` and ``op`` is written unless the run is still ours,
    and :class:`LeaseLost` is raised. ``facts`` are written in the same transaction whatever the
    guard says: what happened (a tool's outcome) is recorded even when the run was cancelled or
    taken over meanwhile (such writes are conditional updates, harmless when stale).
    Precondition: the caller numbered the events it writes while holding the lease.
    """
    if op is None and _postgres():
        # One statement is one transaction in autocommit, and atomic inside a caller's block.
        _write_postgres(guard, batch.non_empty(writes), batch.non_empty(facts))
        return None
    with transaction.atomic():
        held = guard is None or _guard_plain(guard)
        _apply_plain(facts)
        if held:
            result = op() if op is not None else None
            _apply_plain(writes)
    if not held:
        raise batch.lease_lost(guard)
    return result


def run_keep_hook_chain(*, run_id: int, chain: dict[str, Any]) -> dict[str, Any]:
    """Record the hook chain of a run created without one (before chains were recorded); if one
    was recorded meanwhile, that one is the run's. Returns the run's chain."""
    Run.objects.filter(pk=run_id, hook_chain__isnull=True).update(hook_chain=chain)
    return Run.objects.values_list("hook_chain", flat=True).get(pk=run_id)


def cancel_requested(*, run_id: int) -> bool:
    return Run.objects.filter(pk=run_id, cancel_requested=True).exists()


def run_end_cancelled(*, run_id: int, owner: str, error: str) -> bool:
    """End a run we hold whose cancel was requested while it ran; once committed, other apps are
    told (``agents.signals.run_cancelled``: the approvals app withdraws its pending requests)."""
    ended = run_finish(run_id=run_id, owner=owner, status=RunStatus.CANCELLED, error=error)
    if ended:
        transaction.on_commit(lambda: run_cancelled.send(sender=Run, run_id=run_id))
    return ended


def heartbeat(*, run_id: int, owner: str) -> bool:
    return bool(
        Run.objects.filter(pk=run_id, lease_owner=owner, status=RunStatus.RUNNING).update(
            lease_expires_at=lease_deadline(), heartbeat_at=timezone.now()
        )
    )


def run_finish(
    *,
    run_id: int,
    owner: str,
    status: str,
    output: str = "",
    error: str = "",
    execution_path: str | None = None,
) -> bool:
    """Move a run we hold to a terminal status (completed / failed / cancelled); once committed,
    higher apps are told (``agents.signals.run_settled``)."""
    ended = bool(
        Run.objects.filter(pk=run_id, lease_owner=owner, status=RunStatus.RUNNING).update(
            **run_ending(status=status, output=output, error=error)
        )
    )
    if ended:
        _tell_settled(run_id=run_id, status=status, execution_path=execution_path)
    return ended


def run_ending(*, status: str, output: str = "", error: str = "") -> dict[str, Any]:
    """The columns a run's ending sets (:func:`run_finish`; the journal's ending on the loop sets
    the same ones in its guarded write, ``batch.Guard.ending``)."""
    return {
        "status": status,
        "output": output,
        "error": error,
        "finished_at": timezone.now(),
        "lease_expires_at": None,
    }


def run_settled_tell(*, run_id: int, status: str, execution_path: str | None = None) -> None:
    """Tell higher apps that a run ended by a write made elsewhere (the journal's, on the loop),
    once that write committed: what :func:`run_finish` does after its own update."""
    _tell_settled(run_id=run_id, status=status, execution_path=execution_path)


def _tell_settled(*, run_id: int, status: str, execution_path: str | None = None) -> None:
    transaction.on_commit(
        lambda: run_settled.send(sender=Run, run_id=run_id, status=status, execution_path=execution_path)
    )


def run_park(
    *, run_id: int, owner: str, checkpoint: dict[str, Any], new_messages: list[dict[str, Any]] = ()
) -> bool:
    """Suspend a run we hold: no lease, no worker, nothing in memory; a resume claims it again.
    A run whose cancel was requested is not parked (it would never be resumed nor cancelled)."""
    parked = Run.objects.filter(
        pk=run_id, lease_owner=owner, status=RunStatus.RUNNING, cancel_requested=False
    ).update(
        status=RunStatus.AWAITING_APPROVAL,
        checkpoint=jsonsafe.storable(checkpoint),
        lease_owner="",
        lease_expires_at=None,
    )
    if parked and new_messages:
        first = checkpoint["message_count"] - len(new_messages)
        _insert_plain(message_rows(run_id=run_id, first=first, messages=list(new_messages)))
    if parked:
        _tell_settled(run_id=run_id, status=RunStatus.AWAITING_APPROVAL)
    return bool(parked)


def execution_find(*, run_id: int, tool_call_id: str) -> ToolExecution | None:
    return ToolExecution.objects.filter(run_id=run_id, tool_call_id=tool_call_id).first()


def observation_recorded(*, run_id: int, tool_call_id: str) -> str | None:
    """The observation the run's ``tool.finished`` event of ``tool_call_id`` recorded (``None``
    if there is none). It was written in the same transaction as the call's outcome, after the
    PostToolUse hooks: the exact text the model was to read."""
    payload = (
        RunEvent.objects.filter(run_id=run_id, type=ev.TOOL_FINISHED, payload__tool_call_id=tool_call_id)
        .order_by("seq")
        .values_list("payload", flat=True)
        .first()
    )
    observation = payload.get("observation") if isinstance(payload, dict) else None
    return observation if isinstance(observation, str) else None


def execution_mark_unknown(*, run_id: int, tool_call_id: str) -> None:
    ToolExecution.objects.filter(
        run_id=run_id, tool_call_id=tool_call_id, status=ToolExecution.Status.STARTED
    ).update(status=ToolExecution.Status.UNKNOWN, finished_at=timezone.now())
