"""A cancel racing an approved call (#9 item 12): whenever it lands, the run ends once, consistently,
and the approved call's outcome is in the trace."""

from __future__ import annotations

import pytest

from agents import events as ev
from agents.models import Run, RunStatus, ToolExecution
from approvals.services import confirmation_decide
from hooks import HookContext, HookResult, PostToolUseHook, PreToolUseHook
from hooks.catalog import register_hook
from tests.agents.engine_kit import Harness, events_of
from tests.approvals.kit import PAY_ARGS, pay_tool, paying_agent, set_policy, suspended_run
from tests.approvals.test_gate_decisions import Kind, log_kinds

# Verdicts act after commit (wake, resume, card update): let transactions really commit.
pytestmark = pytest.mark.django_db(transaction=True)


TERMINAL_EVENTS = (ev.RUN_COMPLETED, ev.RUN_FAILED)


def assert_one_consistent_ending(run: Run) -> list[str]:
    """Exactly one terminal event, matching the run's status and output; no execution left
    ``started``; every execution's outcome is in the trace. Returns the run's event types."""
    run.refresh_from_db()
    types = list(run.events.order_by("seq").values_list("type", flat=True))
    endings = [t for t in types if t in TERMINAL_EVENTS]
    assert len(endings) == 1 and types[-1] == endings[0], types
    [payload] = [e.payload for e in run.events.filter(type__in=TERMINAL_EVENTS)]
    if run.status == RunStatus.COMPLETED:
        assert endings == [ev.RUN_COMPLETED] and payload["output"] == run.output
    else:
        assert run.status == RunStatus.CANCELLED and run.output == "", (run.status, run.error)
        assert endings == [ev.RUN_FAILED] and payload["stage"] == "cancelled"
    finished = {p["tool_call_id"] for p in events_of(run, ev.TOOL_FINISHED)}
    for execution in ToolExecution.objects.filter(run=run):
        assert execution.status == ToolExecution.Status.SUCCEEDED, execution.status
        assert execution.tool_call_id in finished, "the tool's outcome is in the trace"
    seqs = list(run.events.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    return types


def cancel_from_inside(run_holder: dict, user) -> None:
    """Request the run's cancel from the engine's own thread (as a click would, meanwhile)."""
    from agents.services import run_cancel

    run_cancel(run=Run.objects.get(pk=run_holder["run"].pk), user=user)


def test_it_records_the_approved_call_then_ends_once_when_cancelled_while_the_call_runs(
    personas, resumes
) -> None:
    from asgiref.sync import sync_to_async

    set_policy(personas)
    tool = pay_tool()
    holder: dict = {}

    async def pay_then_see_cancel(args):
        tool.calls.append(args)
        await sync_to_async(cancel_from_inside)(holder, personas.member)
        return {"status": "paid"}

    tool.run = pay_then_see_cancel  # type: ignore[method-assign]
    harness = Harness(tool)
    run, request = suspended_run(personas, harness)
    holder["run"] = run
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)

    assert harness.resume(run) == RunStatus.CANCELLED

    assert tool.calls == [PAY_ARGS], "the approved call ran once"
    types = assert_one_consistent_ending(run)
    assert ev.RUN_COMPLETED not in types
    assert types.index(ev.TOOL_FINISHED) < types.index(ev.RUN_FAILED)
    assert ToolExecution.objects.get(run=run).result == {"status": "paid"}
    assert log_kinds(request)[-1] == Kind.EXECUTED


class CancelAfterTheTool(PostToolUseHook):
    """Requests the run's cancel between the tool's end and the run's finish."""

    name = "test_cancel_after_the_tool"
    holder: dict = {}

    async def execute(self, ctx: HookContext) -> HookResult:
        from asgiref.sync import sync_to_async

        await sync_to_async(cancel_from_inside)(self.holder, self.holder["user"])
        return HookResult()


register_hook(CancelAfterTheTool)


def test_it_ends_once_as_cancelled_when_the_cancel_lands_between_the_tool_and_the_finish(
    personas, resumes
) -> None:
    set_policy(personas)
    tool = pay_tool()
    harness = Harness(tool)
    run, request = suspended_run(
        personas, harness, paying_agent(personas, hooks=["test_cancel_after_the_tool"])
    )
    CancelAfterTheTool.holder.update(run=run, user=personas.member)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)

    assert harness.resume(run) == RunStatus.CANCELLED

    assert tool.calls == [PAY_ARGS]
    types = assert_one_consistent_ending(run)
    assert types.count(ev.LLM_MESSAGE) == 2, "the final answer was heard, then the run was cancelled"


class CancelWhileParking(PreToolUseHook):
    """Requests the run's cancel, then asks to suspend it: the cancel lands while it parks."""

    name = "test_cancel_while_parking"
    holder: dict = {}

    async def execute(self, ctx: HookContext) -> HookResult:
        from asgiref.sync import sync_to_async

        from hooks import SuspendRun

        await sync_to_async(cancel_from_inside)(self.holder, self.holder["user"])
        raise SuspendRun("waiting for the test")


register_hook(CancelWhileParking)


def test_it_does_not_park_a_run_whose_cancel_was_requested_meanwhile(personas, resumes) -> None:
    from agents.services import run_start

    tool = pay_tool()
    agent = paying_agent(personas, hooks=["test_cancel_while_parking"])
    run = run_start(agent=agent, user=personas.member, input="pay")
    CancelWhileParking.holder.update(run=run, user=personas.member)

    assert Harness(tool).execute(run) == RunStatus.CANCELLED

    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and tool.calls == []
    types = assert_one_consistent_ending(run)
    assert ev.RUN_SUSPENDED not in types


@pytest.mark.postgres
def test_cancels_racing_approved_resumes_leave_each_run_one_consistent_ending(personas, resumes) -> None:
    import asyncio
    import random
    import threading

    from django.db import connections

    from agents.services import run_cancel
    from fimone.errors import ServiceError

    set_policy(personas)
    tool = pay_tool()
    real_run = tool.run

    async def slow_pay(args):
        await asyncio.sleep(random.uniform(0, 0.03))
        return await real_run(args)

    tool.run = slow_pay  # type: ignore[method-assign]
    harness = Harness(tool)
    agent = paying_agent(personas)
    runs = []
    for _ in range(12):
        run, request = suspended_run(personas, harness, agent)
        confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
        runs.append(run)
    errors: list[BaseException] = []

    def resume(run: Run) -> None:
        try:
            harness.resume(run)
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)
        finally:
            connections.close_all()

    def cancel(run: Run, delay: float) -> None:
        try:
            threading.Event().wait(delay)
            run_cancel(run=Run.objects.get(pk=run.pk), user=personas.member)
        except ServiceError:
            pass  # already ended: the cancel came too late, which is fine
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = []
    for run in runs:
        threads.append(threading.Thread(target=resume, args=(run,)))
        threads.append(threading.Thread(target=cancel, args=(run, random.uniform(0, 0.15))))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert errors == []
    statuses = set()
    for run in runs:
        assert_one_consistent_ending(run)
        statuses.add(run.status)
        executions = ToolExecution.objects.filter(run=run).count()
        assert executions <= 1
    assert len(tool.calls) == ToolExecution.objects.filter(run__in=runs).count()
    assert statuses <= {RunStatus.COMPLETED, RunStatus.CANCELLED}
