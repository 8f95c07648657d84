"""Suspending, resuming and cancelling runs of the ReAct engine: a call cut off by a crash is never
re-run, concurrent resumes let exactly one proceed, and a cancelled run runs no further tool."""

from __future__ import annotations

import pytest

from agents import events as ev
from agents.models import Run, RunStatus, ToolExecution
from agents.services import run_cancel
from hooks import HookContext, HookResult, PreToolUseHook, SuspendRun
from hooks.catalog import register_hook
from tests.agents.engine_kit import Harness, RecordingTool, event_types, events_of
from tests.agents.run_kit import PAY_SCHEMA, pay_agent, start


def test_a_tool_left_started_by_a_crash_is_reported_unknown_and_not_run_again(personas, no_dispatch) -> None:
    pay = RecordingTool("oa__purchase_pay", parameters=PAY_SCHEMA)
    run = start(personas, pay_agent(personas))
    harness = Harness(pay)
    # Simulate a worker that proposed the call, recorded the start, then died mid-call.
    crashed = RecordingTool("oa__purchase_pay", parameters=PAY_SCHEMA)

    async def die(args):
        raise SystemExit("worker killed")

    crashed.run = die  # type: ignore[method-assign]
    with pytest.raises(SystemExit):
        Harness(crashed).execute(run)
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    assert ToolExecution.objects.get(run=run).status == ToolExecution.Status.STARTED
    Run.objects.filter(pk=run.pk).update(lease_expires_at="2000-01-01T00:00:00Z")  # its lease ran out

    assert harness.resume(run) == RunStatus.COMPLETED

    run.refresh_from_db()
    assert pay.calls == [], "a call whose outcome is unknown is never re-run"
    assert ToolExecution.objects.get(run=run).status == ToolExecution.Status.UNKNOWN
    assert "Outcome unknown" in run.output
    assert ev.RUN_RESUMED in event_types(run)


def test_two_concurrent_resumes_let_exactly_one_proceed(personas, no_dispatch) -> None:
    import asyncio

    from asgiref.sync import async_to_sync

    from agents.engine.runner import run_resume

    pay = RecordingTool("oa__purchase_pay", parameters=PAY_SCHEMA)
    run = start(personas, pay_agent(personas))
    Run.objects.filter(pk=run.pk).update(status=RunStatus.AWAITING_APPROVAL)
    harness = Harness(pay)

    async def both():
        return await asyncio.gather(
            run_resume(run.pk, reason="a", **harness.options()),
            run_resume(run.pk, reason="b", **harness.options()),
        )

    outcomes = async_to_sync(both)()
    assert sorted(outcomes, key=str) == [None, RunStatus.COMPLETED]
    assert len(pay.calls) == 1


class PauseUntilReleased(PreToolUseHook):
    """Suspends the run until the test flips ``released`` (a stand-in for a human's decision)."""

    name = "test_pause_until_released"
    released = False

    async def execute(self, ctx: HookContext) -> HookResult:
        if not type(self).released:
            raise SuspendRun("waiting for the test", detail={"tool_call_id": ctx.metadata["tool_call_id"]})
        return HookResult(side_effects=["released"])


register_hook(PauseUntilReleased)


def test_a_suspending_hook_parks_the_run_and_a_resume_finishes_it_once(personas, no_dispatch) -> None:
    PauseUntilReleased.released = False
    pay = RecordingTool("oa__purchase_pay", result="paid", parameters=PAY_SCHEMA)
    run = start(personas, pay_agent(personas, hooks=["test_pause_until_released"]))
    harness = Harness(pay)

    assert harness.execute(run) == RunStatus.AWAITING_APPROVAL
    run.refresh_from_db()
    assert run.status == RunStatus.AWAITING_APPROVAL and run.lease_owner == "" and pay.calls == []
    [suspended] = events_of(run, ev.RUN_SUSPENDED)
    assert suspended["tool"] == "oa__purchase_pay" and suspended["reason"] == "waiting for the test"

    assert harness.resume(run) == RunStatus.AWAITING_APPROVAL, "still undecided: parks again"
    PauseUntilReleased.released = True
    assert Harness(pay).resume(run, reason="released") == RunStatus.COMPLETED  # a fresh engine
    assert harness.resume(run) is None, "a completed run cannot be resumed again"

    run.refresh_from_db()
    assert pay.calls == [{"purchase_id": "PO-1", "amount": 5000}]
    assert run.output == "Result: paid"
    seqs = list(run.events.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)), "event seqs stay gap-free across suspensions"


def test_cancelling_a_suspended_run_ends_it_and_a_resume_then_does_nothing(personas, no_dispatch) -> None:
    PauseUntilReleased.released = False
    pay = RecordingTool("oa__purchase_pay", parameters=PAY_SCHEMA)
    run = start(personas, pay_agent(personas, hooks=["test_pause_until_released"]))
    harness = Harness(pay)
    harness.execute(run)

    run_cancel(run=run, user=personas.member)
    PauseUntilReleased.released = True

    assert harness.resume(run) is None
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and pay.calls == []
    assert events_of(run, ev.RUN_FAILED)[-1]["stage"] == "cancelled"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_resumes_from_separate_connections_let_exactly_one_proceed(personas, monkeypatch) -> None:
    import threading

    from django.db import connections

    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    PauseUntilReleased.released = True
    pay = RecordingTool("oa__purchase_pay", parameters=PAY_SCHEMA)
    runs = [start(personas, pay_agent(personas, name=f"agent {i}")) for i in range(10)]
    Run.objects.filter(pk__in=[r.pk for r in runs]).update(status=RunStatus.AWAITING_APPROVAL)
    harness = Harness(pay)
    outcomes: list = []
    barrier = threading.Barrier(4)

    def resume_all() -> None:
        barrier.wait()
        try:
            for run in runs:
                outcomes.append(harness.resume(run))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=resume_all) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)

    assert outcomes.count(RunStatus.COMPLETED) == 10 and outcomes.count(None) == 30
    assert len(pay.calls) == 10, "each run's tool ran exactly once"


def test_cancelling_a_running_run_stops_it_before_its_next_tool_runs(personas, no_dispatch) -> None:
    from asgiref.sync import sync_to_async

    holder: dict = {}

    async def cancel_me(args):
        await sync_to_async(
            lambda: run_cancel(run=Run.objects.get(pk=holder["run"].pk), user=personas.member)
        )()
        return "cancel requested"

    first = RecordingTool("t_first")
    first.run = cancel_me  # type: ignore[method-assign]
    second = RecordingTool("t_second")
    agent = pay_agent(
        personas,
        {"tool_calls": [{"name": "t_first", "arguments": {}}]},
        {"tool_calls": [{"name": "t_second", "arguments": {}}]},
        {"content": "done"},
    )
    run = holder["run"] = start(personas, agent)

    assert Harness(first, second).execute(run) == RunStatus.CANCELLED

    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and second.calls == []
    assert events_of(run, ev.RUN_FAILED)[-1]["stage"] == "cancelled"
    seqs = list(run.events.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
