"""Card clicks answered on the server's event loop (channels_im/quick.py), as production answers
them: PostgreSQL, Redis, Celery with a broker. The common click is verified, decided and answered
without a thread, writing what the thread path writes plus its follow-up in the outbox (and nothing
sent to the broker from the web process); a forged, replayed or unrecordable click is refused."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import AsyncClient

from approvals.models import ChannelConfig, ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from approvals.selectors import request_for_decision
from approvals.services import clicks_on_the_loop
from approvals.standing import standing_of
from approvals.tasks import confirmation_settled_task
from channels_im import replay
from channels_im.identities import clicker_and_facts_async, identity_for_click
from fimone import adb
from fimone.audit_chain import chain_verify
from tests.approvals.kit import Resumes
from tests.channels_im.click_kit import APRIL, Kind, nothing_written, post_click, written
from tests.channels_im.feishu_fake import click_event, keys_of, signed_body
from tests.channels_im.loop_kit import Handoffs, Production, broker_messages, db, the_outbox

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def test_production_mode_on_postgresql_decides_clicks_on_the_loop(production: Production, settings) -> None:
    assert not clicks_on_the_loop(), "Celery runs tasks in process: no broker to relay to"
    production.on()
    assert clicks_on_the_loop()
    settings.QUICK_CLICKS = False
    assert not clicks_on_the_loop(), "QUICK_CLICKS=false sends every click through a thread"


async def test_a_common_click_is_decided_on_the_loop_with_its_follow_up_in_the_outbox(
    handoffs: Handoffs,
    production: Production,
    loop_connections: None,
    personas: Any,
    parked: ConfirmationRequest,
    channel: ChannelConfig,
) -> None:
    response = await post_click(AsyncClient(), channel, parked, decision="approve")

    assert response.status_code == 200
    answer = response.json()
    assert answer["toast"] == {"type": "success", "content": "The request was approved."}
    assert answer["card"]["type"] == "raw", "the settled card comes back with the toast"
    assert handoffs.calls == [], "the common click went through a thread"
    record = await db(written)(parked)
    assert record["request"] == (ConfirmationStatus.APPROVED, personas.approver.pk, APRIL, "", True)
    assert record["kinds"][-1] == Kind.DECIDED and len(record["votes"]) == 1
    assert await db(the_outbox)() == [
        (confirmation_settled_task.name, [str(parked.pk), parked.run_id, "feishu", "approved"])
    ]
    assert await db(broker_messages)(production.queue) == 0, "the web process sent to the broker itself"
    assert (await db(chain_verify)(ConfirmationEvent, personas.org.pk)).broken is None


async def test_a_rejection_on_the_loop_keeps_the_reason_and_its_follow_up_says_rejected(
    handoffs: Handoffs, production: Production, loop_connections: None, parked: ConfirmationRequest, channel
) -> None:
    response = await post_click(
        AsyncClient(), channel, parked, decision="reject", form_value={"reason": "  not this month "}
    )

    assert response.json()["toast"]["content"] == "The request was rejected."
    record = await db(written)(parked)
    assert record["request"][0] == ConfirmationStatus.REJECTED and record["request"][3] == "not this month"
    assert [args[3] for _, args in await db(the_outbox)()] == ["rejected"]
    assert handoffs.calls == []


async def test_the_same_click_twice_is_refused_as_a_replay_by_the_thread_path_too(
    handoffs: Handoffs,
    production: Production,
    loop_connections: None,
    parked: ConfirmationRequest,
    channel: ChannelConfig,
    settings: Any,
) -> None:
    keys = keys_of(channel)
    body, headers = signed_body(
        click_event(keys, request_id=str(parked.pk), decision="approve", open_id=APRIL),
        encrypt_key=keys.encrypt_key,
    )
    url = f"/im/callback/{channel.callback_key}/"
    first = await AsyncClient().post(url, data=body, content_type="application/json", headers=headers)
    again = await AsyncClient().post(url, data=body, content_type="application/json", headers=headers)
    settings.QUICK_CLICKS = False  # the same replay memory serves the thread path
    in_a_thread = await AsyncClient().post(url, data=body, content_type="application/json", headers=headers)

    assert first.json()["toast"]["type"] == "success"
    for replayed in (again, in_a_thread):
        assert replayed.status_code == 200
        assert replayed.json()["toast"] == {"type": "info", "content": "This click was already handled."}
    assert handoffs.calls == ["answer_parsed"], "the replay is logged on its request by the thread path"
    assert len((await db(written)(parked))["votes"]) == 1
    assert len(await db(the_outbox)()) == 1


async def test_a_forged_click_is_refused_on_the_loop_and_changes_nothing(
    handoffs: Handoffs, production: Production, loop_connections: None, parked: ConfirmationRequest, channel
) -> None:
    keys = keys_of(channel)
    body, headers = signed_body(
        click_event(keys, request_id=str(parked.pk), decision="approve", open_id=APRIL),
        encrypt_key=keys.encrypt_key,
    )
    response = await AsyncClient().post(
        f"/im/callback/{channel.callback_key}/",
        data=body,
        content_type="application/json",
        headers={**headers, "X-Lark-Signature": "0" * 64},
    )

    assert response.status_code == 401
    assert "signature" in response.json()["error"]
    assert handoffs.calls == []
    assert await db(nothing_written)(parked)
    assert await db(the_outbox)() == []


async def test_an_unknown_callback_url_is_answered_404_on_the_loop(
    handoffs: Handoffs, production: Production, loop_connections: None
) -> None:
    production.on()
    response = await AsyncClient().post(
        "/im/callback/no-such-key/", data=b"{}", content_type="application/json"
    )

    assert response.status_code == 404 and response.json() == {"error": "unknown channel"}
    assert handoffs.calls == []


async def test_an_approval_and_a_rejection_at_once_on_the_loop_leave_one_verdict(
    handoffs: Handoffs, production: Production, loop_connections: None, parked: ConfirmationRequest, channel
) -> None:
    answers = await asyncio.gather(
        post_click(AsyncClient(), channel, parked, decision="approve"),
        post_click(AsyncClient(), channel, parked, decision="reject"),
    )

    toasts = sorted(answer.json()["toast"]["type"] for answer in answers)
    assert toasts == ["info", "success"], "one click won; the other was told it was already decided"
    record = await db(written)(parked)
    assert record["kinds"].count(Kind.DECIDED) == 1 and len(record["votes"]) == 1
    assert len(await db(the_outbox)()) == 1


async def test_the_redis_replay_memory_failing_refuses_the_click_on_the_loop(
    monkeypatch,
    handoffs: Handoffs,
    production: Production,
    loop_connections: None,
    parked: ConfirmationRequest,
    channel,
) -> None:
    async def down(key: str, ttl: int) -> bool:
        raise ConnectionError("Redis is down")

    monkeypatch.setattr(replay, "first_time_async", down)

    response = await post_click(AsyncClient(), channel, parked, decision="approve")

    assert response.status_code == 200
    assert response.json()["toast"]["content"].startswith("FIM One could not record this click")
    assert (await db(written)(parked))["request"][0] == ConfirmationStatus.PENDING
    assert await db(the_outbox)() == []


async def test_the_relay_sends_the_follow_up_which_resumes_the_parked_run(
    handoffs: Handoffs,
    production: Production,
    loop_connections: None,
    parked: ConfirmationRequest,
    channel: ChannelConfig,
    resumes: Resumes,
) -> None:
    from fimone.celery import app
    from fimone.outbox import relay_batch, relay_connection

    await post_click(AsyncClient(), channel, parked, decision="approve")

    def relay() -> tuple[str, list[Any]]:
        with relay_connection() as connection:
            assert relay_batch(connection, app) == 1
        client = redis.Redis.from_url(settings.REDIS_URL)
        try:
            [raw] = client.lrange(production.queue, 0, -1)
        finally:
            client.close()
        message = json.loads(raw)
        return message["headers"]["task"], json.loads(base64.b64decode(message["body"]))[0]

    task, args = await db(relay)()

    assert await db(the_outbox)() == [], "the relay left its message in the outbox"
    assert task == confirmation_settled_task.name
    await db(confirmation_settled_task)(*args)  # what the worker that receives it runs
    assert resumes.run_ids == [parked.run_id]


def loaded(instance: Any) -> dict[str, Any]:
    """The fields an instance holds (the deferred ones are not read)."""
    return {name: value for name, value in vars(instance).items() if not name.startswith("_")}


async def test_the_loops_one_read_finds_what_the_orms_reads_find(
    production: Production, loop_connections: None, personas: Any, parked: ConfirmationRequest, channel
) -> None:
    async with adb.connection() as connection:
        identity, facts = await clicker_and_facts_async(
            connection, config=channel, external_id=APRIL, request_id=parked.pk
        )
        stranger = await clicker_and_facts_async(
            connection, config=channel, external_id="ou_nobody", request_id=parked.pk
        )
        elsewhere = await clicker_and_facts_async(
            connection, config=channel, external_id=APRIL, request_id=uuid.uuid4()
        )
    by_thread = await db(identity_for_click)(config=channel, external_id=APRIL)
    request = await db(request_for_decision)(request_id=parked.pk)
    standing = await db(standing_of)(request=request, user=personas.approver)

    assert loaded(identity) == loaded(by_thread) and loaded(identity.user) == loaded(by_thread.user)
    assert facts.standing == standing and facts.standing.tier is not None
    assert loaded(facts.request) == loaded(request)
    shown = {
        name: value for name, value in loaded(request.agent).items() if name in loaded(facts.request.agent)
    }
    assert loaded(facts.request.agent) == shown, "the agent's fields a decided card shows"
    assert loaded(facts.request.requested_by).items() <= loaded(request.requested_by).items()
    assert stranger == (None, None), "a click from an unlinked account maps to nobody"
    assert elsewhere[0] is not None and elsewhere[1] is None, "no such request: no facts"
