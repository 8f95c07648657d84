"""The run stream: a WebSocket behind session auth and an origin check, fed after commit."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore

from agents.consumers import run_group
from agents.models import Run
from agents.services import run_start
from fimone.asgi import application
from tests.personas import make_agent

pytestmark = pytest.mark.django_db(transaction=True)


def session_cookie(user) -> str:
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    return f"{settings.SESSION_COOKIE_NAME}={session.session_key}"


def make_run(personas, monkeypatch) -> Run:
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    agent = make_agent(personas.org, personas.operator)
    return run_start(agent=agent, user=personas.member, input="hello")


def communicator(
    run: Run, *, cookie: str | None, origin: str = "http://127.0.0.1:8000"
) -> WebsocketCommunicator:
    headers = [(b"origin", origin.encode())]
    if cookie:
        headers.append((b"cookie", cookie.encode()))
    return WebsocketCommunicator(application, f"/ws/runs/{run.pk}/", headers=headers)


def test_the_owner_receives_events_pushed_to_the_run_group(personas, monkeypatch) -> None:
    run = make_run(personas, monkeypatch)
    cookie = session_cookie(personas.member)

    async def scenario():
        ws = communicator(run, cookie=cookie)
        connected, _ = await ws.connect()
        assert connected
        event = {"run_id": run.pk, "seq": 1, "type": "run.started", "payload": {}, "created_at": None}
        await get_channel_layer().group_send(run_group(run.pk), {"type": "run.event", "event": event})
        assert await ws.receive_json_from(timeout=5) == event
        await ws.disconnect()

    async_to_sync(scenario)()


def test_the_owner_watches_a_whole_run_event_by_event_in_seq_order(personas, monkeypatch) -> None:
    from agents.engine.runner import run_execute
    from tests.personas import scripted

    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    config = scripted(
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]},
        {"content": "The answer is {last}"},
    )
    agent = make_agent(
        personas.org, personas.operator, builtin_tools=["calculator"], model_config_json=config
    )
    run = run_start(agent=agent, user=personas.member, input="what is 6 * 7?")
    cookie = session_cookie(personas.member)

    async def scenario() -> list[dict]:
        ws = communicator(run, cookie=cookie)
        assert (await ws.connect())[0]
        await run_execute(run.pk)  # returns once its last events went to the stream
        received = []
        while not received or received[-1]["type"] != "run.completed":
            received.append(await ws.receive_json_from(timeout=5))
        await ws.disconnect()
        return received

    received = async_to_sync(scenario)()

    stored = [e for e in received if e["type"] != "llm.delta"]
    assert [e["seq"] for e in stored] == list(run.events.values_list("seq", flat=True))
    assert [e["type"] for e in stored][:5] == [
        "run.started",
        "llm.message",
        "tool.proposed",
        "tool.started",
        "tool.finished",
    ]
    assert all(e["run_id"] == run.pk and e["created_at"] for e in stored)


def test_an_anonymous_socket_is_refused(personas, monkeypatch) -> None:
    run = make_run(personas, monkeypatch)

    async def scenario():
        ws = communicator(run, cookie=None)
        connected, code = await ws.connect()
        assert not connected and code == 4401

    async_to_sync(scenario)()


def test_someone_elses_run_is_refused_as_not_found(personas, monkeypatch) -> None:
    run = make_run(personas, monkeypatch)
    cookie = session_cookie(personas.approver)  # same organisation, not the run's user

    async def scenario():
        ws = communicator(run, cookie=cookie)
        connected, code = await ws.connect()
        assert not connected and code == 4404

    async_to_sync(scenario)()


def test_a_socket_from_a_foreign_origin_is_refused(personas, monkeypatch) -> None:
    run = make_run(personas, monkeypatch)
    cookie = session_cookie(personas.member)

    async def scenario():
        ws = communicator(run, cookie=cookie, origin="https://evil.example.com")
        connected, _ = await ws.connect()
        assert not connected

    async_to_sync(scenario)()


def test_stored_events_are_pushed_after_commit_by_the_cancel_service(personas, monkeypatch) -> None:
    from agents.services import run_cancel

    run = make_run(personas, monkeypatch)
    cookie = session_cookie(personas.member)

    async def scenario():
        ws = communicator(run, cookie=cookie)
        assert (await ws.connect())[0]
        await sync_to_async(run_cancel)(run=run, user=personas.member)
        message = await ws.receive_json_from(timeout=5)
        assert message["type"] == "run.failed" and message["payload"]["stage"] == "cancelled"
        stored = await sync_to_async(lambda: Run.objects.get(pk=run.pk).events.get(type="run.failed").seq)()
        assert message["seq"] == stored
        await ws.disconnect()

    async_to_sync(scenario)()


def test_a_deeply_nested_frame_from_the_client_is_ignored_and_the_stream_goes_on(
    personas, monkeypatch
) -> None:
    run = make_run(personas, monkeypatch)
    cookie = session_cookie(personas.member)

    async def scenario():
        ws = communicator(run, cookie=cookie)
        assert (await ws.connect())[0]
        await ws.send_to(text_data="[" * 100_000 + "]" * 100_000)
        await ws.send_to(text_data='{"type": "run.cancel"}')  # nothing is read from the client
        event = {"run_id": run.pk, "seq": 1, "type": "run.started", "payload": {}, "created_at": None}
        await get_channel_layer().group_send(run_group(run.pk), {"type": "run.event", "event": event})
        assert await ws.receive_json_from(timeout=5) == event
        await ws.disconnect()

    async_to_sync(scenario)()


# --- a stream stops when its watcher loses access (docs/design.md §1.11) ------------------------------------


def _event(run: Run, seq: int) -> dict:
    return {"run_id": run.pk, "seq": seq, "type": "tool.finished", "payload": {"observation": "secret"},
            "created_at": None}  # fmt: skip


def _watch_until_closed(run: Run, user, change) -> tuple[list[dict], int | None]:
    """Connect as ``user``, receive one event, make ``change`` (in the database thread), then push
    ten more events: return what arrived after the change and the close code."""
    cookie = session_cookie(user)

    async def scenario():
        ws = communicator(run, cookie=cookie)
        assert (await ws.connect())[0]
        layer = get_channel_layer()
        await layer.group_send(run_group(run.pk), {"type": "run.event", "event": _event(run, 1)})
        assert (await ws.receive_json_from(timeout=5))["seq"] == 1
        await sync_to_async(change)()
        for seq in range(2, 12):
            await layer.group_send(run_group(run.pk), {"type": "run.event", "event": _event(run, seq)})
        after, code = [], None
        while True:
            output = await ws.receive_output(timeout=5)
            if output["type"] == "websocket.close":
                code = output.get("code")
                break
            after.append(output)
        await ws.disconnect()
        return after, code

    return async_to_sync(scenario)()


def test_a_watcher_removed_from_the_organisation_is_sent_nothing_more(personas, monkeypatch) -> None:
    run = make_run(personas, monkeypatch)

    after, code = _watch_until_closed(
        run, personas.member, lambda: personas.member.memberships.filter(organization=personas.org).delete()
    )

    assert after == [] and code == 4403


def test_a_deactivated_watcher_is_sent_nothing_more(personas, monkeypatch) -> None:
    run = make_run(personas, monkeypatch)

    def deactivate():
        personas.member.is_active = False
        personas.member.save()

    after, code = _watch_until_closed(run, personas.member, deactivate)

    assert after == [] and code == 4403


def test_a_lost_role_is_noticed_without_any_push_within_the_recheck_period(personas, monkeypatch) -> None:
    """An auditor watches a run behind a request; their role is taken by a bulk update, which
    tells nobody. The stream checks again with its next event once its check is old enough."""
    from tenancy.models import Membership, Role
    from tests.approvals.kit import recorded_request

    run = recorded_request(personas).run
    monkeypatch.setattr("agents.consumers.RECHECK_SECONDS", 0.0)

    after, code = _watch_until_closed(
        run,
        personas.auditor,
        lambda: Membership.objects.filter(user=personas.auditor).update(role=Role.MEMBER),
    )

    assert after == [] and code == 4403


def test_a_watcher_who_keeps_access_keeps_the_stream_through_unrelated_changes(personas, monkeypatch) -> None:
    run = make_run(personas, monkeypatch)
    cookie = session_cookie(personas.member)

    async def scenario():
        ws = communicator(run, cookie=cookie)
        assert (await ws.connect())[0]
        await sync_to_async(lambda: personas.member.save())()  # pushes access.changed
        event = _event(run, 1)
        await get_channel_layer().group_send(run_group(run.pk), {"type": "run.event", "event": event})
        assert await ws.receive_json_from(timeout=5) == event
        await ws.disconnect()

    async_to_sync(scenario)()
