"""A run's step writes on the event loop (PostgreSQL): the same records as through the database
thread, the same refusals, a connection that does not outlive the run, and only a tool's outcome
committed without waiting for the disk."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import IntegrityError, connection
from django.utils import timezone

from agents import events as ev
from agents import executors
from agents.engine import batch, loop_writes, store
from agents.engine.journal import RunJournal
from agents.models import Run, RunEvent, RunStatus, ToolExecution
from agents.services import run_cancel, run_start
from agents.signals import run_settled
from tests.agents.engine_kit import Harness, RecordingTool, event_types
from tests.personas import make_agent, scripted

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


class Writes(list):
    """The durability of every statement run on the loop, in order, the statements themselves and
    the writers that ran them."""

    writers: set[loop_writes.LoopWriter]
    statements: list[str]


@pytest.fixture
def writes(monkeypatch) -> Writes:
    seen = Writes()
    seen.writers = set()
    seen.statements = []
    real = loop_writes.LoopWriter.run

    async def run(self, sql, params):
        seen.append(batch.COMMIT_WITHOUT_WAITING not in sql)
        seen.statements.append(sql)
        seen.writers.add(self)
        return await real(self, sql, params)

    monkeypatch.setattr(loop_writes.LoopWriter, "run", run)
    return seen


def two_calls(personas, no_dispatch) -> Run:
    call = {"name": "t_note", "arguments": {}}
    agent = make_agent(
        personas.org,
        personas.operator,
        model_config_json=scripted(
            {"tool_calls": [{**call, "id": "c1"}]},
            {"tool_calls": [{**call, "id": "c2"}]},
            {"content": "done"},
        ),
    )
    return run_start(agent=agent, user=personas.member, input="note twice")


def test_a_run_outside_a_transaction_writes_its_steps_on_the_loop_and_closes_its_connection(
    personas, no_dispatch, writes
) -> None:
    run = two_calls(personas, no_dispatch)

    assert Harness(RecordingTool("t_note", result="noted")).execute(run) == RunStatus.COMPLETED

    # Each call: its start, durable, before the tool runs; its outcome, not waiting for the disk.
    assert writes.count(False) == 2 and writes.count(True) >= 2
    assert list(ToolExecution.objects.filter(run=run).values_list("status", flat=True)) == ["succeeded"] * 2
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert event_types(run).count(ev.TOOL_FINISHED) == 2 and event_types(run)[-1] == ev.RUN_COMPLETED
    [writer] = writes.writers
    assert not writer.pooled and writer._own is None, "the run's own connection closed when it stopped"


@pytest.fixture
def settled() -> list[tuple[int, str, str | None]]:
    """What higher apps hear of runs that stopped running (``run_settled``), in order."""
    heard: list[tuple[int, str, str | None]] = []

    def note(sender, *, run_id, status, execution_path=None, **kwargs) -> None:
        heard.append((run_id, status, execution_path))

    run_settled.connect(note, dispatch_uid="test_loop_writes.settled")
    yield heard
    run_settled.disconnect(dispatch_uid="test_loop_writes.settled")


def test_a_run_ends_in_one_durable_guarded_statement_and_higher_apps_hear_of_it_once(
    personas, no_dispatch, writes, settled
) -> None:
    run = two_calls(personas, no_dispatch)

    assert Harness(RecordingTool("t_note", result="noted")).execute(run) == RunStatus.COMPLETED

    # The ending (status, output, end time, no lease) is set by the lease-guarded update of the
    # run's row that stores the last events and messages, not by a transaction of the ORM.
    ending = writes.statements[-1]
    assert '"status" = %s' in ending and '"finished_at" = %s' in ending and "lease_owner = %s" in ending
    assert writes[-1], "the ending waits for the disk"
    run.refresh_from_db()
    assert (run.status, run.output, run.lease_expires_at) == (RunStatus.COMPLETED, "done", None)
    assert run.finished_at is not None and run.checkpoint["message_count"] == 6
    assert run.messages.count() == 6 and event_types(run)[-1] == ev.RUN_COMPLETED
    assert settled == [(run.pk, RunStatus.COMPLETED, run.execution_path)]


def test_a_run_cancelled_before_its_ending_is_written_ends_cancelled_not_completed(
    personas, no_dispatch, writes, settled
) -> None:
    agent = make_agent(
        personas.org,
        personas.operator,
        model_config_json=scripted(
            {"tool_calls": [{"name": "t_cancel", "arguments": {}, "id": "c1"}]}, {"content": "done"}
        ),
    )
    run = run_start(agent=agent, user=personas.member, input="cancel yourself")
    cancel = RecordingTool("t_cancel")

    async def cancel_the_run(args):  # the call's outcome is written unguarded; the ending is not
        await sync_to_async(lambda: run_cancel(run=Run.objects.get(pk=run.pk), user=personas.member))()
        return "cancel requested"

    cancel.run = cancel_the_run  # type: ignore[method-assign]

    assert Harness(cancel).execute(run) == RunStatus.CANCELLED

    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.output == ""
    assert ev.RUN_COMPLETED not in event_types(run)
    assert event_types(run)[-1] == ev.RUN_FAILED and ToolExecution.objects.get(run=run).status == "succeeded"
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)), "the refused ending's event was withdrawn"
    assert settled == [(run.pk, RunStatus.CANCELLED, None)]


def test_an_operator_may_have_every_outcome_wait_for_the_disk(
    personas, no_dispatch, writes, settings
) -> None:
    settings.RUN_OUTCOMES_WAIT_FOR_DISK = True
    run = two_calls(personas, no_dispatch)

    assert Harness(RecordingTool("t_note")).execute(run) == RunStatus.COMPLETED

    assert writes and all(writes), "every step write waited for the disk"
    assert ToolExecution.objects.filter(run=run, status="succeeded").count() == 2


@pytest.mark.django_db(transaction=False)
def test_a_run_driven_inside_a_transaction_writes_through_it(personas, no_dispatch, writes) -> None:
    run = two_calls(personas, no_dispatch)

    assert Harness(RecordingTool("t_note")).execute(run) == RunStatus.COMPLETED

    assert writes == [], "the caller's transaction holds every write (it is rolled back with it)"
    assert ToolExecution.objects.filter(run=run, status="succeeded").count() == 2


def test_only_a_write_said_not_to_be_durable_skips_waiting_for_the_disk() -> None:
    async def settings_seen() -> tuple[str, str, str]:
        writer = loop_writes.LoopWriter(pooled=False)
        try:
            read = "SELECT current_setting('synchronous_commit')"
            return (
                await writer.run(batch.assemble([], read), []),
                # What the statement's transaction commits with, read as its last act.
                await writer.run(batch.assemble([], read, durable=False), []),
                await writer.run(batch.assemble([], read), []),  # SET LOCAL ended with its transaction
            )
        finally:
            await writer.close()

    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        configured = cursor.fetchone()[0]
    assert async_to_sync(settings_seen)() == (configured, "off", configured)


def held(personas, no_dispatch) -> Run:
    run = two_calls(personas, no_dispatch)
    assert store.run_claim(run_id=run.pk, owner="worker-1", from_statuses=(RunStatus.QUEUED,))
    return run


def test_a_call_started_twice_is_refused_as_the_orm_would_refuse_it(personas, no_dispatch) -> None:
    run = held(personas, no_dispatch)

    async def start_twice() -> None:
        journal = RunJournal(run.pk, owner="worker-1")
        await journal.open()
        try:
            begin = store.execution_begin(
                run_id=run.pk, tool_call_id="c1", tool_name="t_note", args={}, digest=store.args_sha256({})
            )
            await journal.commit(writes=(begin,), check_lease=True)
            journal.emit(ev.TOOL_STARTED, {"tool_call_id": "c1"})
            await journal.commit(writes=(begin,), check_lease=True)
        finally:
            await journal.close()

    with pytest.raises(IntegrityError):
        async_to_sync(start_twice)()
    assert ToolExecution.objects.filter(run=run).count() == 1
    assert not RunEvent.objects.filter(run=run).exists(), "the refused write wrote nothing"


def test_a_step_of_a_run_no_longer_held_writes_nothing_but_its_facts(personas, no_dispatch) -> None:
    run = held(personas, no_dispatch)
    ToolExecution.objects.create(run=run, tool_call_id="c1", tool_name="t_note", args={}, status="started")
    Run.objects.filter(pk=run.pk).update(lease_owner="worker-2")

    async def write_as_the_old_holder() -> None:
        journal = RunJournal(run.pk, owner="worker-1")
        await journal.open()
        try:
            journal.emit(ev.TOOL_FINISHED, {"tool_call_id": "c1"})
            outcome = store.execution_finish(
                run_id=run.pk, tool_call_id="c1", status="succeeded", result="noted", duration_ms=1.0
            )
            await journal.commit(check_lease=True, facts=(outcome,))
        finally:
            await journal.close()

    with pytest.raises(batch.LeaseLost):
        async_to_sync(write_as_the_old_holder)()
    assert not RunEvent.objects.filter(run=run).exists()
    assert ToolExecution.objects.get(run=run).status == "succeeded", "what happened is recorded"


def test_on_a_loop_that_outlives_the_run_writes_share_the_loops_pool(personas, no_dispatch, writes) -> None:
    run = two_calls(personas, no_dispatch)
    pooled: list[bool] = []
    real_open = RunJournal.open

    async def open_and_note(self, opening=None):
        opened = await real_open(self, opening)
        pooled.append(self._writer.pooled)
        return opened

    harness = Harness(RecordingTool("t_note"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RunJournal, "open", open_and_note)
        from agents.engine.runner import run_execute

        future = executors.embedded.submit(lambda: run_execute(run.pk, **harness.options()))
        assert future.result(timeout=60) == RunStatus.COMPLETED

    assert pooled == [True]
    assert ToolExecution.objects.filter(run=run, status="succeeded").count() == 2
    assert writes.count(False) == 2


@pytest.mark.parametrize("guarded", [False, True], ids=["facts-alone", "under-the-lease"])
def test_the_outcome_write_is_one_statement_that_sets_its_own_commit(personas, no_dispatch, guarded) -> None:
    """The commit's mode travels in the statement: it can be prepared like every other write."""
    run = held(personas, no_dispatch)
    ToolExecution.objects.create(run=run, tool_call_id="c1", tool_name="t_note", args={}, status="started")
    outcome = store.execution_finish(
        run_id=run.pk, tool_call_id="c1", status="succeeded", result={"n": 1}, duration_ms=2.5
    )
    events = store.event_rows(
        run_id=run.pk,
        events=[batch.QueuedEvent(1, ev.TOOL_FINISHED, {"tool_call_id": "c1"})],
        stamp=timezone.now(),
    )
    guard = batch.Guard(run.pk, "worker-1") if guarded else None
    sql, params = batch.postgres_statement(guard, [events], [outcome], durable=False)
    assert sql.startswith(f"WITH {batch.COMMIT_WITHOUT_WAITING}")

    async def write() -> object:
        writer = loop_writes.LoopWriter(pooled=False)
        try:
            return await asyncio.wait_for(writer.run(sql, params), 10)
        finally:
            await writer.close()

    assert async_to_sync(write)() == 1
    execution = ToolExecution.objects.get(run=run)
    assert (execution.status, execution.result, execution.duration_ms) == ("succeeded", {"n": 1}, 2.5)
    assert RunEvent.objects.get(run=run).payload == {"tool_call_id": "c1"}
