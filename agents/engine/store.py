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
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max, Q
from django.utils import timezone

from agents.models import Run, RunEvent, RunMessage, RunStatus, ToolExecution

T = TypeVar("T")


class LeaseLost(Exception):
    """Another process took this run over (our lease expired) or it was cancelled under us."""


def args_sha256(args: Any) -> str:
    """SHA-256 of the canonical JSON of tool arguments (sorted keys, no spaces, UTF-8)."""
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def lease_deadline() -> dt.datetime:
    return timezone.now() + dt.timedelta(seconds=settings.RUN_LEASE_SECONDS)


def run_claim(*, run_id: int, owner: str, from_statuses: tuple[str, ...]) -> bool:
    """Take the run's lease with one conditional update: it must be in ``from_statuses``, or be
    ``running`` with an expired lease (its worker died). Exactly one concurrent caller wins."""
    now = timezone.now()
    claimable = Q(status__in=from_statuses) | Q(status=RunStatus.RUNNING, lease_expires_at__lt=now)
    won = Run.objects.filter(claimable, pk=run_id, cancel_requested=False).update(
        status=RunStatus.RUNNING, lease_owner=owner, lease_expires_at=lease_deadline(), heartbeat_at=now
    )
    if won:
        Run.objects.filter(pk=run_id, started_at__isnull=True).update(started_at=now)
    return bool(won)


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
    """The conversation so far: the messages of the latest completed run before this one."""
    earlier = (
        Run.objects.filter(conversation_id=run.conversation_id, status=RunStatus.COMPLETED, pk__lt=run.pk)
        .order_by("-pk")
        .values_list("pk", "checkpoint")
        .first()
    )
    if earlier is None:
        return []
    return messages_load(run_id=earlier[0], count=(earlier[1] or {}).get("message_count", 0))


# --- the hot path ---------------------------------------------------------------------------------
# Events and messages are written on every step of every run. These inserts are plain SQL: on a
# small CPU, building them through the ORM cost several times what the database takes to run them.


def _json_placeholder() -> str:
    return "%s::jsonb" if connection.vendor == "postgresql" else "%s"


def _insert(
    table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]], json_columns: set[str]
) -> None:
    quote = connection.ops.quote_name
    marks = ", ".join(_json_placeholder() if column in json_columns else "%s" for column in columns)
    values = ", ".join(f"({marks})" for _ in rows)
    names = ", ".join(quote(column) for column in columns)
    sql = f"INSERT INTO {quote(table)} ({names}) VALUES {values}"  # noqa: S608 - names are ours
    with connection.cursor() as cursor:
        cursor.execute(sql, [value for row in rows for value in row])


def _append_messages(run_id: int, first: int, messages: list[dict[str, Any]]) -> None:
    if messages:
        _insert(
            RunMessage._meta.db_table,
            ("run_id", "index", "message"),
            [(run_id, first + offset, json.dumps(message)) for offset, message in enumerate(messages)],
            {"message"},
        )


def _insert_events(events: list[RunEvent]) -> None:
    now = timezone.now()
    stamp = connection.ops.adapt_datetimefield_value(now)
    for event in events:
        event.created_at = now
    _insert(
        RunEvent._meta.db_table,
        ("run_id", "seq", "type", "payload", "created_at"),
        [(e.run_id, e.seq, e.type, json.dumps(e.payload), stamp) for e in events],
        {"payload"},
    )


def commit(*, events: list[RunEvent], op: Callable[[], T] | None = None) -> T | None:
    """Run ``op`` and store ``events`` in one transaction. Precondition: the caller holds the lease."""
    with transaction.atomic():
        result = op() if op is not None else None
        if events:
            _insert_events(events)
    return result


def checkpoint_save(
    *, run_id: int, owner: str, checkpoint: dict[str, Any], new_messages: list[dict[str, Any]] = ()
) -> None:
    """Save the checkpoint; raise :class:`LeaseLost` if the run is no longer ours or a
    cancellation was requested. The lease is renewed by the heartbeat, not here: leaving the
    indexed lease column alone keeps this frequent update cheap."""
    sql = (
        f"UPDATE {connection.ops.quote_name(Run._meta.db_table)} SET checkpoint = {_json_placeholder()} "  # noqa: S608
        "WHERE id = %s AND lease_owner = %s AND status = %s AND NOT cancel_requested"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [json.dumps(checkpoint), run_id, owner, RunStatus.RUNNING.value])
        updated = cursor.rowcount
    if not updated:
        raise LeaseLost(f"run {run_id} is no longer held by {owner}")
    _append_messages(run_id, checkpoint["message_count"] - len(new_messages), list(new_messages))


def cancel_requested(*, run_id: int) -> bool:
    return Run.objects.filter(pk=run_id, cancel_requested=True).exists()


def heartbeat(*, run_id: int, owner: str) -> bool:
    return bool(
        Run.objects.filter(pk=run_id, lease_owner=owner, status=RunStatus.RUNNING).update(
            lease_expires_at=lease_deadline(), heartbeat_at=timezone.now()
        )
    )


def run_finish(*, run_id: int, owner: str, status: str, output: str = "", error: str = "") -> bool:
    """Move a run we hold to a terminal status (completed / failed / cancelled)."""
    return bool(
        Run.objects.filter(pk=run_id, lease_owner=owner, status=RunStatus.RUNNING).update(
            status=status, output=output, error=error, finished_at=timezone.now(), lease_expires_at=None
        )
    )


def run_park(
    *, run_id: int, owner: str, checkpoint: dict[str, Any], new_messages: list[dict[str, Any]] = ()
) -> bool:
    """Suspend a run we hold: no lease, no worker, nothing in memory; a resume claims it again."""
    parked = Run.objects.filter(pk=run_id, lease_owner=owner, status=RunStatus.RUNNING).update(
        status=RunStatus.AWAITING_APPROVAL,
        checkpoint=checkpoint,
        lease_owner="",
        lease_expires_at=None,
    )
    if parked:
        _append_messages(run_id, checkpoint["message_count"] - len(new_messages), list(new_messages))
    return bool(parked)


def execution_find(*, run_id: int, tool_call_id: str) -> ToolExecution | None:
    return ToolExecution.objects.filter(run_id=run_id, tool_call_id=tool_call_id).first()


def lease_check(*, run_id: int, owner: str) -> None:
    """Raise :class:`LeaseLost` unless the run is still ours, running and not cancelled."""
    if not Run.objects.filter(
        pk=run_id, lease_owner=owner, status=RunStatus.RUNNING, cancel_requested=False
    ).exists():
        raise LeaseLost(f"run {run_id} is no longer held by {owner} or was cancelled")


def execution_begin(*, run_id: int, tool_call_id: str, tool_name: str, args: dict[str, Any]) -> None:
    """Record that the tool is about to run. Precondition: the same transaction verified the
    lease (:func:`lease_check` or :func:`checkpoint_save`). Raises ``IntegrityError`` if a row
    already exists: someone started this call before and it must not run again. No savepoint:
    the caller's whole transaction is void then."""
    stamp = connection.ops.adapt_datetimefield_value(timezone.now())
    _insert(
        ToolExecution._meta.db_table,
        ("run_id", "tool_call_id", "tool_name", "args", "args_sha256", "status", "started_at"),
        [(run_id, tool_call_id, tool_name, json.dumps(args), args_sha256(args), "started", stamp)],
        {"args"},
    )


def execution_finish(*, run_id: int, tool_call_id: str, status: str, result: Any, duration_ms: float) -> None:
    quote = connection.ops.quote_name
    sql = (
        f"UPDATE {quote(ToolExecution._meta.db_table)} SET status = %s, result = {_json_placeholder()}, "  # noqa: S608
        "duration_ms = %s, finished_at = %s WHERE run_id = %s AND tool_call_id = %s AND status = %s"
    )
    stamp = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(sql, [status, json.dumps(result), duration_ms, stamp, run_id, tool_call_id, "started"])


def execution_mark_unknown(*, run_id: int, tool_call_id: str) -> None:
    ToolExecution.objects.filter(
        run_id=run_id, tool_call_id=tool_call_id, status=ToolExecution.Status.STARTED
    ).update(status=ToolExecution.Status.UNKNOWN, finished_at=timezone.now())
