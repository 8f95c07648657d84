"""Waiting for a verdict: inline wake-ups through the channel layer, and resuming from scratch."""

from __future__ import annotations

import time

import pytest

from agents import events as ev
from agents.engine.runner import run_execute
from agents.executors import EmbeddedExecutor
from agents.models import Run, RunStatus, ToolExecution
from agents.services import run_start
from approvals.models import ConfirmationRequest
from approvals.services import confirmation_decide
from tests.agents.engine_kit import Harness, event_types
from tests.approvals.kit import PAY_ARGS, pay_tool, paying_agent, set_policy, suspended_run

pytestmark = pytest.mark.django_db(transaction=True)


def wait_for(predicate, timeout: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_decision_within_the_inline_window_wakes_the_waiting_run_at_once(
    personas, monkeypatch, settings
) -> None:
    settings.APPROVAL_POLL_SECONDS = 30  # the safety-net poll is far slower than the test allows
    executor = EmbeddedExecutor()
    monkeypatch.setattr("agents.executors.embedded", executor)
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    set_policy(personas, inline_wait_seconds=20)
    tool = pay_tool()
    harness = Harness(tool)
    run = run_start(agent=paying_agent(personas), user=personas.member, input="pay")

    executor.submit(lambda: run_execute(run.pk, **harness.options()))
    request = wait_for(lambda: ConfirmationRequest.objects.filter(run=run).first(), what="the request")
    time.sleep(0.2)  # the run is now waiting inline
    decided_at = time.monotonic()
    assert confirmation_decide(request_id=request.pk, user=personas.approver, approve=True).accepted
    executor.wait_idle(timeout=10)
    woke_after = time.monotonic() - decided_at

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert tool.calls == [PAY_ARGS]
    assert ev.RUN_SUSPENDED not in event_types(run), "decided inside the window: never suspended"
    assert woke_after < 5, f"woken at once, not by the {settings.APPROVAL_POLL_SECONDS} s poll"


def test_a_parked_run_resumes_on_a_fresh_executor_after_everything_in_memory_is_gone(
    personas, monkeypatch
) -> None:
    """The restart test: the executor that parked the run is thrown away with every object it
    held; the decision alone brings the run back on a new one, and the tool runs once."""
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    set_policy(personas, inline_wait_seconds=0)
    agent = paying_agent(personas)
    agent.model_config_json["script"]["turns"][0] = {
        "tool_calls": [{"name": "calculator", "arguments": {"expression": "1250.5 * 2"}}]
    }
    agent.builtin_tools = ["calculator"]
    agent.require_confirmation_for_all = True
    agent.save()

    first = EmbeddedExecutor()
    monkeypatch.setattr("agents.executors.embedded", first)
    run = run_start(agent=agent, user=personas.member, input="double it")
    first.submit(lambda: run_execute(run.pk))
    first.wait_idle(timeout=10)
    assert Run.objects.get(pk=run.pk).status == RunStatus.AWAITING_APPROVAL
    del first  # nothing of the first executor survives

    fresh = EmbeddedExecutor()
    monkeypatch.setattr("agents.executors.embedded", fresh)
    request = ConfirmationRequest.objects.get(run=run)
    assert confirmation_decide(request_id=request.pk, user=personas.approver, approve=True).accepted
    wait_for(lambda: Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED, what="the resumed run")
    fresh.wait_idle(timeout=10)

    [execution] = ToolExecution.objects.filter(run=run)
    assert execution.status == ToolExecution.Status.SUCCEEDED and execution.result["value"] == 2501.0
    assert Run.objects.get(pk=run.pk).output == 'Outcome: {"expression": "1250.5 * 2", "value": 2501.0}'


def test_a_verdict_message_from_another_process_wakes_the_waiter_through_the_channel_layer(
    personas, resumes, settings
) -> None:
    """No in-process wake-up here: only the channel-layer message (as another server sends it)."""
    import asyncio

    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    from approvals.waking import approval_group, wait_for_verdict

    settings.APPROVAL_POLL_SECONDS = 30
    set_policy(personas, inline_wait_seconds=0)
    _, request = suspended_run(personas, Harness(pay_tool()))

    async def scenario() -> tuple[str, float]:
        waiter = asyncio.ensure_future(wait_for_verdict(request.pk, window=20, poll=30))
        await asyncio.sleep(0.3)  # subscribed and waiting
        started = time.monotonic()
        await get_channel_layer().group_send(approval_group(request.pk), {"type": "approval.verdict"})
        return await waiter, time.monotonic() - started

    status, took = async_to_sync(scenario)()
    assert status == "woken" and took < 5


def test_with_everything_on_celery_the_worker_that_follows_a_verdict_up_wakes_the_waiter(
    personas, resumes, settings
) -> None:
    """The deciding server only publishes the follow-up; the worker running it wakes the waiter."""
    import asyncio

    from asgiref.sync import async_to_sync, sync_to_async

    from approvals.tasks import confirmation_settled_task
    from approvals.waking import wait_for_verdict

    settings.APPROVAL_POLL_SECONDS = 30
    settings.RUN_EXECUTOR = settings.CHANNEL_DELIVERY = "celery"
    set_policy(personas, inline_wait_seconds=0)
    _, request = suspended_run(personas, Harness(pay_tool()))
    ConfirmationRequest.objects.filter(pk=request.pk).update(channel="feishu")  # its card went there
    sent: list[tuple] = []
    publish = confirmation_settled_task.delay
    confirmation_settled_task.delay = lambda *args: sent.append(args)  # the broker, as the server sees it
    try:

        async def scenario() -> tuple[str, str, float]:
            waiter = asyncio.ensure_future(wait_for_verdict(request.pk, window=20, poll=30))
            await asyncio.sleep(0.3)  # subscribed and waiting
            await sync_to_async(confirmation_decide)(
                request_id=request.pk, user=personas.approver, approve=True, via_channel_id=None
            )
            await asyncio.sleep(0.5)
            before = "woken" if waiter.done() else "waiting"
            started = time.monotonic()
            await sync_to_async(confirmation_settled_task)(*sent[0])  # the worker runs the follow-up
            return before, await waiter, time.monotonic() - started

        before, status, took = async_to_sync(scenario)()
    finally:
        confirmation_settled_task.delay = publish
    assert len(sent) == 1
    assert before == "waiting", "the deciding process no longer wakes waiters itself"
    assert status == "woken" and took < 5
