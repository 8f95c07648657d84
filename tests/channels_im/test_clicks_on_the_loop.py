"""Card clicks answered on the server's event loop (channels_im/quick.py), as production answers
them: PostgreSQL, Redis, Celery with a broker. The common click is verified, decided and answered
without a thread, writing what the thread path writes plus its follow-up in the outbox (and
nothing sent to the broker from the web process); everything else is handed to the thread path
with what was done, and answered as that path answers it."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import AsyncClient

from agents.models import Membership, Role
from agents.services import run_start
from approvals.decision_sql import click_facts
from approvals.models import ConfirmationEvent, ConfirmationRequest, ConfirmationStatus, ConfirmationVote
from approvals.services import clicks_on_the_loop
from approvals.tasks import confirmation_settled_task
from channels_im import quick, replay
from channels_im.identities import clicker_and_facts_async, identity_for_click
from channels_im.models import ChannelConfig
from fimone import adb, rates
from fimone.audit_chain import chain_verify
from fimone.models import OutboxMessage
from tests.agents.engine_kit import Harness
from tests.approvals.kit import Resumes, paying_agent, set_policy
from tests.channels_im.click_kit import APRIL, Kind, nothing_written, park, post_click, written
from tests.channels_im.feishu_fake import click_event, keys_of, signed_body
from tests.channels_im.slack_fake import FakeSlack
from tests.channels_im.test_click_guards import (
    NUL_REASON,
    STORED_REASON,
    api_decision_status,
    refused_for_the_rate,
    set_decision_rate,
    use_up_the_rate,
)
from tests.channels_im.test_slack_flow import park as park_in_slack

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


class Handoffs:
    """The thread path's work the lane handed over (``sync_to_async`` calls), recorded."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, function: Callable[..., Any], **kwargs: Any) -> Callable[..., Any]:
        name = getattr(getattr(function, "func", function), "__name__", repr(function))
        handed = sync_to_async(function, **kwargs)

        async def call(*args: Any) -> Any:
            self.calls.append(name)
            return await handed(*args)

        return call


class Production:
    """Celery with a broker, as deployed, on a queue of this test's own (emptied after): from
    :meth:`on`, once the test's world is set up (its cards delivered in process)."""

    def __init__(self, settings: Any) -> None:
        from fimone.celery import app

        self.app, self.settings = app, settings
        self.queue = f"loop-test-{uuid.uuid4().hex[:8]}"
        self.previous = app.conf.task_default_queue, app.conf.task_always_eager
        settings.RUN_EXECUTOR = settings.CHANNEL_DELIVERY = "celery"
        settings.QUICK_CLICKS = True

    def on(self) -> None:
        self.app.conf.task_default_queue, self.app.conf.task_always_eager = self.queue, False

    def off(self) -> None:
        self.app.conf.task_default_queue, self.app.conf.task_always_eager = self.previous
        client = redis.Redis.from_url(settings.REDIS_URL)
        for key in client.scan_iter(match=f"{self.queue}*"):
            client.delete(key)
        client.close()


@pytest.fixture
def production(settings: Any) -> Iterator[Production]:
    world = Production(settings)
    try:
        yield world
    finally:
        world.off()


@pytest.fixture
def handoffs(monkeypatch: Any, production: Production) -> Handoffs:
    recorded = Handoffs()
    monkeypatch.setattr(quick, "sync_to_async", recorded)
    return recorded


@pytest.fixture
async def loop_connections() -> AsyncIterator[None]:
    """The test loop's pool and Redis client are closed with it."""
    yield
    await adb.close()
    await replay.close_async()
    await rates.close_async()


@pytest.fixture
def parked(
    production: Production, personas: Any, resumes: Resumes, channel: ChannelConfig, harness: Harness
) -> ConfirmationRequest:
    request = park(personas, harness)
    production.on()
    return request


async def parked_with(
    production: Production, personas: Any, harness: Harness, **policy: Any
) -> ConfirmationRequest:
    request = await db(park)(personas, harness, **policy)
    production.on()
    return request


def broker_messages(queue: str) -> int:
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        return client.llen(queue)
    finally:
        client.close()


def the_outbox() -> list[tuple[str, list[Any]]]:
    return list(OutboxMessage.objects.order_by("pk").values_list("task", "args"))


db = sync_to_async


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


async def test_a_click_by_an_unlinked_account_is_handed_to_the_thread_path_which_offers_a_link(
    handoffs: Handoffs, production: Production, loop_connections: None, parked: ConfirmationRequest, channel
) -> None:
    keys = keys_of(channel)
    body, headers = signed_body(
        click_event(keys, request_id=str(parked.pk), decision="approve", open_id="ou_somebody_else"),
        encrypt_key=keys.encrypt_key,
    )
    response = await AsyncClient().post(
        f"/im/callback/{channel.callback_key}/", data=body, content_type="application/json", headers=headers
    )

    assert response.status_code == 200
    toast = response.json()["toast"]
    assert toast["type"] == "error" and "/im/link/" in toast["content"]
    assert handoffs.calls == ["answer_parsed"]
    assert (await db(written)(parked))["kinds"][-1] == Kind.CLICK_REFUSED
    assert await db(the_outbox)() == []


async def test_a_click_by_someone_who_may_not_decide_is_refused_and_logged_by_the_thread_path(
    handoffs: Handoffs,
    loop_connections: None,
    personas: Any,
    parked: ConfirmationRequest,
    channel: ChannelConfig,
) -> None:
    demoted = Membership.objects.filter(organization=personas.org, user=personas.approver).aupdate
    await demoted(role=Role.MEMBER)  # since the card went out: no longer an approver

    response = await post_click(AsyncClient(), channel, parked, decision="approve")

    assert response.status_code == 200 and response.json()["toast"]["type"] == "error"
    assert handoffs.calls == ["answer_parsed"]
    record = await db(written)(parked)
    assert record["request"][0] == ConfirmationStatus.PENDING and record["votes"] == []
    assert record["kinds"][-1] == Kind.CLICK_REFUSED
    assert await db(the_outbox)() == []


async def test_a_quorum_vote_is_counted_by_the_thread_path_and_leaves_the_request_pending(
    handoffs: Handoffs,
    production: Production,
    loop_connections: None,
    personas: Any,
    resumes: Resumes,
    channel,
    harness,
) -> None:
    parked = await parked_with(production, personas, harness, approvals_required=2)

    response = await post_click(AsyncClient(), channel, parked, decision="approve")

    assert response.status_code == 200
    assert handoffs.calls == ["answer_parsed"]
    parked = await db(ConfirmationRequest.objects.get)(pk=parked.pk)
    assert parked.status == ConfirmationStatus.PENDING
    assert await db(ConfirmationVote.objects.filter(request=parked).count)() == 1


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


def test_with_quick_clicks_off_the_thread_path_decides_and_queues_the_same_follow_up(
    handoffs: Handoffs,
    production: Production,
    parked: ConfirmationRequest,
    channel: ChannelConfig,
    settings: Any,
    client: Any,
) -> None:
    settings.QUICK_CLICKS = False

    response = post_click(client, channel, parked, decision="approve")

    assert response.json()["toast"] == {"type": "success", "content": "The request was approved."}
    assert handoffs.calls == [], "the lane was not asked"
    assert the_outbox() == [
        (confirmation_settled_task.name, [str(parked.pk), parked.run_id, "feishu", "approved"])
    ]
    assert broker_messages(production.queue) == 0, "the web process sent to the broker itself"


def loaded(instance: Any) -> dict[str, Any]:
    """The fields an instance holds (the deferred ones are not read)."""
    return {name: value for name, value in vars(instance).items() if not name.startswith("_")}


async def test_the_loops_one_read_finds_what_the_thread_paths_two_reads_find(
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
    thread_facts = await db(click_facts)(
        request_id=parked.pk, organization_id=channel.organization_id, user_id=personas.approver.pk
    )

    assert loaded(identity) == loaded(by_thread) and loaded(identity.user) == loaded(by_thread.user)
    assert facts.standing == thread_facts.standing and facts.standing.tier is not None
    assert loaded(facts.request) == loaded(thread_facts.request)
    assert loaded(facts.request.agent) == loaded(thread_facts.request.agent)
    assert loaded(facts.request.requested_by) == loaded(thread_facts.request.requested_by)
    assert stranger == (None, None), "a click from an unlinked account maps to nobody"
    assert elsewhere[0] is not None and elsewhere[1] is None, "no such request: no facts"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


async def test_a_slack_click_is_handed_whole_to_the_thread_path_which_decides_it(
    production: Production,
    handoffs: Handoffs,
    loop_connections: None,
    personas: Any,
    resumes: Resumes,
    slack: FakeSlack,
) -> None:
    flow = await db(park_in_slack)(personas, slack)
    production.on()
    body, headers = flow.click()

    response = await AsyncClient().post(
        f"/im/callback/{flow.config.callback_key}/",
        data=body,
        content_type="application/x-www-form-urlencoded",
        headers=headers,
    )

    assert response.status_code == 200 and response.json()["replace_original"] is True
    assert handoffs.calls == ["answer_for_channel"], "Slack is verified in a thread"
    request = await db(flow.refresh)()
    assert request.status == ConfirmationStatus.APPROVED
    assert [args[0] for _, args in await db(the_outbox)()] == [str(request.pk)]


# --- what a click on the loop cannot get past (tests/channels_im/test_click_guards.py: the thread
# path): a NUL in its reason, the clicker's decision rate, separation of duties (DESIGN §1.13).


async def test_a_click_with_a_nul_in_its_reason_is_decided_on_the_loop(
    handoffs: Handoffs,
    production: Production,
    loop_connections: None,
    personas: Any,
    resumes: Resumes,
    harness: Harness,
    channel: ChannelConfig,
) -> None:
    request = await parked_with(production, personas, harness)

    response = await post_click(
        AsyncClient(), channel, request, decision="reject", form_value={"reason": NUL_REASON}
    )

    assert response.status_code == 200
    assert response.json()["toast"]["content"] == "The request was rejected."
    assert handoffs.calls == [], "decided on the loop"
    record = await db(written)(request)
    assert record["request"][0] == ConfirmationStatus.REJECTED and record["request"][3] == STORED_REASON


async def test_a_click_on_the_loop_counts_against_the_rate(
    handoffs: Handoffs,
    production: Production,
    loop_connections: None,
    personas: Any,
    resumes: Resumes,
    harness: Harness,
    channel: ChannelConfig,
    settings: Any,
) -> None:
    set_decision_rate(settings, 1)
    request = await parked_with(production, personas, harness)

    decided = await post_click(AsyncClient(), channel, request, decision="approve")

    assert decided.json()["toast"]["type"] == "success" and handoffs.calls == []
    assert await db(api_decision_status)(personas.approver) == 429, "the loop's click was counted"


async def test_a_click_past_the_rate_on_the_loop_is_refused_and_logged_by_the_thread_path(
    handoffs: Handoffs,
    production: Production,
    loop_connections: None,
    personas: Any,
    resumes: Resumes,
    harness: Harness,
    channel: ChannelConfig,
    settings: Any,
) -> None:
    request = await parked_with(production, personas, harness)
    await db(use_up_the_rate)(personas.approver, set_decision_rate(settings, 2))

    response = await post_click(AsyncClient(), channel, request, decision="approve")

    assert response.status_code == 200 and response.json()["toast"]["type"] == "error"
    assert handoffs.calls == ["answer_parsed"]
    assert await db(refused_for_the_rate)(request, personas.approver)


# --- separation of duties on the loop ---------------------------------------------------------------


def _configured_by_april_after_she_was_asked(personas: Any, request: ConfirmationRequest) -> None:
    """Since the card went out, April changed the agent (recorded as the admin records it)."""
    agent = request.agent
    agent._history_user = personas.approver
    agent.save()


async def test_on_the_loop_a_configurer_without_the_approver_role_is_refused_and_it_is_logged(
    handoffs: Handoffs,
    production: Production,
    loop_connections: None,
    personas: Any,
    resumes: Resumes,
    harness: Harness,
    channel: ChannelConfig,
) -> None:
    def named_april() -> ConfirmationRequest:
        policy = set_policy(personas, allow_org_approvers=False, allow_agent_owner=False)
        policy.named_users.set([personas.approver])
        request = park(personas, harness, allow_org_approvers=False, allow_agent_owner=False)
        Membership.objects.filter(user=personas.approver).update(role=Role.OPERATOR)
        _configured_by_april_after_she_was_asked(personas, request)
        return request

    request = await db(named_april)()
    production.on()

    response = await post_click(AsyncClient(), channel, request, decision="approve")

    assert response.status_code == 200 and response.json()["toast"]["type"] == "error"
    assert "made them an approver" in response.json()["toast"]["content"]
    assert handoffs.calls == ["answer_parsed"]
    record = await db(written)(request)
    assert record["request"][0] == ConfirmationStatus.PENDING and record["votes"] == []
    assert record["kinds"][-1] == Kind.CLICK_REFUSED


async def test_on_the_loop_a_requester_who_configured_the_agent_cannot_approve_their_own_call(
    handoffs: Handoffs,
    production: Production,
    loop_connections: None,
    personas: Any,
    resumes: Resumes,
    harness: Harness,
    channel: ChannelConfig,
) -> None:
    def aprils_own_call() -> ConfirmationRequest:
        set_policy(personas, allow_initiator=True, allow_self_approval=True)
        run = run_start(agent=paying_agent(personas), user=personas.approver, input="pay")
        assert harness.execute(run) == "awaiting_approval"
        request = ConfirmationRequest.objects.get(run=run)
        _configured_by_april_after_she_was_asked(personas, request)
        return request

    request = await db(aprils_own_call)()
    production.on()

    response = await post_click(AsyncClient(), channel, request, decision="approve")

    assert response.json()["toast"]["type"] == "error"
    assert "may not decide their own call" in response.json()["toast"]["content"]
    assert handoffs.calls == ["answer_parsed"]
    assert not await db(nothing_written)(request), "the refusal is logged"
    assert (await db(written)(request))["request"][0] == ConfirmationStatus.PENDING
