"""The engine's step writes: all of a step or none of it, on SQLite and on PostgreSQL alike."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.engine import batch, store
from agents.models import Run, RunEvent, RunMessage, RunStatus, ToolExecution
from agents.services import run_start
from tests.personas import make_agent

OWNER = "worker-1"


@pytest.fixture
def held_run(personas, monkeypatch) -> Run:
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    run = run_start(agent=make_agent(personas.org, personas.operator), user=personas.member, input="hi")
    assert store.run_claim(run_id=run.pk, owner=OWNER, from_statuses=(RunStatus.QUEUED,))
    return run


def step(run: Run, *, seq: int = 1, call_id: str = "call-1") -> list[batch.Write]:
    events = [batch.QueuedEvent(seq, "tool.started", {"tool_call_id": call_id, "note": "ünï ✓"})]
    return [
        store.message_rows(run_id=run.pk, first=0, messages=[{"role": "user", "content": "hi"}]),
        store.execution_begin(
            run_id=run.pk,
            tool_call_id=call_id,
            tool_name="noop",
            args={"b": 2, "a": [1]},
            digest=store.args_sha256({"b": 2, "a": [1]}),
        ),
        store.event_rows(run_id=run.pk, events=events, stamp=timezone.now()),
    ]


def test_a_step_stores_its_checkpoint_messages_execution_and_events_together(held_run) -> None:
    store.write(guard=batch.Guard(held_run.pk, OWNER, {"v": 1, "message_count": 1}), writes=step(held_run))

    held_run.refresh_from_db()
    assert held_run.checkpoint == {"v": 1, "message_count": 1}
    assert list(RunMessage.objects.filter(run=held_run).values_list("message", flat=True)) == [
        {"role": "user", "content": "hi"}
    ]
    execution = ToolExecution.objects.get(run=held_run)
    assert (execution.status, execution.args) == ("started", {"b": 2, "a": [1]})
    assert execution.args_sha256 == store.args_sha256({"a": [1], "b": 2})
    assert execution.started_at is not None
    event = RunEvent.objects.get(run=held_run)
    assert (event.seq, event.type, event.payload["note"]) == (1, "tool.started", "ünï ✓")
    assert abs((timezone.now() - event.created_at).total_seconds()) < 60


def test_nothing_of_a_step_is_written_once_another_worker_holds_the_run(held_run) -> None:
    checkpoint = {"v": 1, "message_count": 1}
    with pytest.raises(batch.LeaseLost):
        store.write(guard=batch.Guard(held_run.pk, "worker-2", checkpoint), writes=step(held_run))
    with pytest.raises(batch.LeaseLost):
        store.write(guard=batch.Guard(held_run.pk, "worker-2"), writes=step(held_run))

    held_run.refresh_from_db()
    assert held_run.checkpoint != {"v": 1, "message_count": 1}
    assert not RunMessage.objects.filter(run=held_run).exists()
    assert not ToolExecution.objects.filter(run=held_run).exists()
    assert not RunEvent.objects.filter(run=held_run).exists()


def test_nothing_of_a_step_is_written_once_the_user_cancelled(held_run) -> None:
    Run.objects.filter(pk=held_run.pk).update(cancel_requested=True)

    with pytest.raises(batch.LeaseLost):
        store.write(guard=batch.Guard(held_run.pk, OWNER), writes=step(held_run))

    assert not ToolExecution.objects.filter(run=held_run).exists()
    assert not RunEvent.objects.filter(run=held_run).exists()


def test_a_second_start_of_the_same_call_fails_and_writes_none_of_its_step(held_run) -> None:
    store.write(guard=batch.Guard(held_run.pk, OWNER), writes=step(held_run)[1:])

    with pytest.raises(IntegrityError), transaction.atomic():
        store.write(guard=batch.Guard(held_run.pk, OWNER), writes=step(held_run, seq=2)[1:])

    assert ToolExecution.objects.filter(run=held_run).count() == 1
    assert list(RunEvent.objects.filter(run=held_run).values_list("seq", flat=True)) == [1]


def test_a_finished_call_stores_its_outcome_and_a_finished_call_is_not_finished_twice(held_run) -> None:
    store.write(guard=batch.Guard(held_run.pk, OWNER), writes=step(held_run)[1:2])

    finish = store.execution_finish(
        run_id=held_run.pk, tool_call_id="call-1", status="succeeded", result={"paid": True}, duration_ms=1.5
    )
    store.write(guard=None, writes=[finish])
    late = store.execution_finish(
        run_id=held_run.pk, tool_call_id="call-1", status="failed", result="boom", duration_ms=9.0
    )
    store.write(guard=None, writes=[late])

    execution = ToolExecution.objects.get(run=held_run)
    assert (execution.status, execution.result, execution.duration_ms) == ("succeeded", {"paid": True}, 1.5)
    assert execution.finished_at is not None
