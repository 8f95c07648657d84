"""Production mode: runs execute on a real Celery worker and stream through the Redis layer."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from agents import events as ev
from agents.consumers import run_group
from agents.models import Run, RunStatus
from agents.services import run_start
from tests.personas import make_agent, scripted

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


def test_a_run_dispatched_to_a_celery_worker_completes_and_streams_its_events(
    personas, celery_worker_process, monkeypatch
) -> None:
    from agents import executors

    real_dispatch = executors.dispatch_execute
    started: list[int] = []
    monkeypatch.setattr("agents.services.dispatch_execute", started.append)  # hold it until we listen
    agent = make_agent(
        personas.org,
        personas.operator,
        builtin_tools=["calculator"],
        model_config_json=scripted(
            {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]},
            {"content": "The answer is {last}"},
        ),
    )
    run = run_start(agent=agent, user=personas.member, input="what is 6 * 7?")
    assert started == [run.pk]

    async def listen() -> list[dict]:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(run_group(run.pk), channel)
        await asyncio.get_running_loop().run_in_executor(None, real_dispatch, run.pk)
        received: list[dict] = []
        async with asyncio.timeout(60):
            while not received or received[-1]["type"] not in (ev.RUN_COMPLETED, ev.RUN_FAILED):
                message = await layer.receive(channel)  # one event, or a transaction's batch
                received += message["events"] if message["type"] == "run.events" else [message["event"]]
        return received

    received = async_to_sync(listen)()

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output == 'The answer is {"expression": "6 * 7", "value": 42}'
    assert run.lease_owner.split(":")[1] == str(celery_worker_process.pid), "it ran in the worker process"
    stored = [e for e in received if e["type"] != ev.LLM_DELTA]
    assert [e["seq"] for e in stored] == list(Run.objects.get(pk=run.pk).events.values_list("seq", flat=True))
    assert [e["type"] for e in stored] == [
        ev.RUN_STARTED,
        ev.LLM_MESSAGE,
        ev.TOOL_PROPOSED,
        ev.TOOL_STARTED,
        ev.TOOL_FINISHED,
        ev.LLM_MESSAGE,
        ev.RUN_COMPLETED,
    ]
    assert any(e["type"] == ev.LLM_DELTA for e in received), "streamed text arrives as deltas"
