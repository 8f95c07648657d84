"""The run stream resumes from the last seq a page saw: missed events first, then live ones,
each exactly once; the same authentication and origin checks as a fresh stream."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from agents import events as ev
from agents.consumers import run_group
from agents.models import Run, RunEvent
from agents.services import run_start
from fimone.asgi import application
from tests.agents.test_stream import session_cookie
from tests.personas import make_agent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run(personas, monkeypatch) -> Run:
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    run = run_start(agent=make_agent(personas.org, personas.operator), user=personas.member, input="hi")
    for seq in range(1, 6):
        RunEvent.objects.create(run=run, seq=seq, type=ev.TOOL_PROPOSED, payload={"n": seq})
    return run


def socket(run: Run, cookie: str | None, query: str = "", origin: str = "http://127.0.0.1:8000"):
    headers = [(b"origin", origin.encode())]
    if cookie:
        headers.append((b"cookie", cookie.encode()))
    return WebsocketCommunicator(application, f"/ws/runs/{run.pk}/{query}", headers=headers)


def live(run: Run, *seqs: int, type_: str = ev.TOOL_STARTED) -> dict:
    events = [
        {"run_id": run.pk, "seq": s, "type": type_, "payload": {"n": s}, "created_at": None} for s in seqs
    ]
    return {"type": "run.events", "events": events}


async def drain(ws: WebsocketCommunicator) -> list[dict]:
    received = []
    while not await ws.receive_nothing(timeout=0.3):
        received.append(await ws.receive_json_from())
    return received


def test_a_resumed_stream_sends_the_missed_events_then_live_ones_without_doubles(personas, run) -> None:
    cookie = session_cookie(personas.member)

    async def scenario() -> list[dict]:
        ws = socket(run, cookie, "?after=2")
        assert (await ws.connect())[0]
        replayed = await drain(ws)
        layer = get_channel_layer()
        # The engine pushes 4..6 as one batch (4 and 5 were already replayed), then a delta.
        await layer.group_send(run_group(run.pk), live(run, 4, 5, 6))
        delta = {"run_id": run.pk, "seq": 6, "type": ev.LLM_DELTA, "payload": {"text": "He", "index": 0}}
        stale = {"run_id": run.pk, "seq": 3, "type": ev.LLM_DELTA, "payload": {"text": "old", "index": 0}}
        await layer.group_send(run_group(run.pk), {"type": "run.event", "event": stale})
        await layer.group_send(run_group(run.pk), {"type": "run.event", "event": delta})
        received = replayed + await drain(ws)
        await ws.disconnect()
        return received

    received = async_to_sync(scenario)()

    assert [(e["seq"], e["type"]) for e in received] == [
        (3, ev.TOOL_PROPOSED),
        (4, ev.TOOL_PROPOSED),
        (5, ev.TOOL_PROPOSED),
        (6, ev.TOOL_STARTED),
        (6, ev.LLM_DELTA),
    ]
    assert received[0] == RunEvent.objects.get(run=run, seq=3).as_message()


def test_an_event_committed_during_the_replay_arrives_once_and_in_order(personas, run, monkeypatch) -> None:
    """Subscribed before the replay reads the database: an event committed between the two is in
    both the replay and the live queue, and is sent once; one committed after is sent live."""
    from agents import consumers, selectors

    original = selectors.run_event_page_after.func

    def page_then_commit(**kwargs):
        page = original(**kwargs)
        RunEvent.objects.create(run_id=run.pk, seq=6, type=ev.TOOL_STARTED, payload={"n": 6})
        async_to_sync(get_channel_layer().group_send)(run_group(run.pk), live(run, 6))
        return page

    from channels.db import database_sync_to_async

    # The consumer reads its pages through the name it imported.
    monkeypatch.setattr(consumers, "run_event_page_after", database_sync_to_async(page_then_commit))
    cookie = session_cookie(personas.member)

    async def scenario() -> list[dict]:
        ws = socket(run, cookie, "?after=0")
        assert (await ws.connect())[0]
        received = await drain(ws)
        await ws.disconnect()
        return received

    seqs = [e["seq"] for e in async_to_sync(scenario)()]
    assert seqs == [1, 2, 3, 4, 5, 6]


def test_a_replay_longer_than_a_page_is_sent_whole(personas, run, monkeypatch) -> None:
    RunEvent.objects.bulk_create(
        RunEvent(run=run, seq=seq, type=ev.TOOL_FINISHED, payload={}) for seq in range(6, 451)
    )
    cookie = session_cookie(personas.member)

    async def scenario() -> list[dict]:
        ws = socket(run, cookie, "?after=0")
        assert (await ws.connect())[0]
        received = await drain(ws)
        await ws.disconnect()
        return received

    assert [e["seq"] for e in async_to_sync(scenario)()] == list(range(1, 451))


def test_events_the_channel_layer_lost_are_replayed_from_the_database_in_order(personas, run) -> None:
    """Redis pub/sub keeps nothing for a server that was not listening: a live event whose seq
    skips the next one expected makes the stream fetch what it missed before sending it."""
    cookie = session_cookie(personas.member)
    store = database_sync_to_async(
        lambda seq, type_=ev.TOOL_STARTED: RunEvent.objects.create(
            run=run, seq=seq, type=type_, payload={"n": seq}
        )
    )

    async def scenario() -> list[dict]:
        ws = socket(run, cookie, "?after=5")
        assert (await ws.connect())[0]
        layer = get_channel_layer()
        await store(6)
        await layer.group_send(run_group(run.pk), live(run, 6))
        # 7 and 8 are stored but never arrive live; 9 does (stored first, as every event is).
        for seq in (7, 8):
            await store(seq)
        await store(9, ev.TOOL_FINISHED)
        await ws.receive_nothing(timeout=0.2)
        await layer.group_send(run_group(run.pk), live(run, 9, type_=ev.TOOL_FINISHED))
        await layer.group_send(run_group(run.pk), live(run, 8))  # a late double: dropped
        received = await drain(ws)
        await ws.disconnect()
        return received

    received = async_to_sync(scenario)()

    assert [e["seq"] for e in received] == [6, 7, 8, 9]
    assert received[1] == RunEvent.objects.get(run=run, seq=7).as_message()


def test_a_live_only_stream_also_fills_a_gap_after_its_first_event(personas, run) -> None:
    for seq in (6, 7):
        RunEvent.objects.create(run=run, seq=seq, type=ev.TOOL_STARTED, payload={"n": seq})
    cookie = session_cookie(personas.member)

    async def scenario() -> list[dict]:
        ws = socket(run, cookie)
        assert (await ws.connect())[0]
        layer = get_channel_layer()
        await layer.group_send(run_group(run.pk), live(run, 5))
        await layer.group_send(run_group(run.pk), live(run, 7))
        received = await drain(ws)
        await ws.disconnect()
        return received

    assert [e["seq"] for e in async_to_sync(scenario)()] == [5, 6, 7]


@pytest.mark.parametrize(
    "query", ["?after=abc", "?after=-1", "?after=1.5", "?after=99999999999999", "?after=%D9%A3"]
)
def test_it_refuses_a_malformed_resume_point(personas, run, query) -> None:
    cookie = session_cookie(personas.member)

    async def scenario():
        ws = socket(run, cookie, query)
        connected, code = await ws.connect()
        assert not connected and code == 4400

    async_to_sync(scenario)()


def test_it_refuses_a_resume_by_anyone_but_the_runs_owner(personas, run) -> None:
    visitors = (
        (None, 4401),
        (session_cookie(personas.stranger), 4404),  # another organisation
        (session_cookie(personas.approver), 4404),  # a colleague: not their run
    )

    async def scenario():
        for cookie, expected in visitors:
            ws = socket(run, cookie, "?after=0")
            connected, code = await ws.connect()
            assert not connected and code == expected

    async_to_sync(scenario)()


def test_it_refuses_a_resume_from_a_foreign_origin(personas, run) -> None:
    cookie = session_cookie(personas.member)

    async def scenario():
        ws = socket(run, cookie, "?after=0", origin="https://evil.example")
        connected, _ = await ws.connect()
        assert not connected

    async_to_sync(scenario)()


@pytest.mark.postgres
@pytest.mark.redis
def test_a_resumed_stream_over_redis_has_no_gap_and_no_double(personas, run, settings) -> None:
    test_a_resumed_stream_sends_the_missed_events_then_live_ones_without_doubles(personas, run)
