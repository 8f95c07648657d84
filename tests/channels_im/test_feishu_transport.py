"""Feishu outbound: cards posted and patched through lark-oapi, against a local fake Feishu."""

from __future__ import annotations

import datetime as dt
import json
import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import lark_oapi
import pytest
from django.conf import settings
from lark_oapi.api.im.v1 import (
    CreateMessageRequest,
    CreateMessageRequestBody,
    PatchMessageRequest,
    PatchMessageRequestBody,
)

from approvals.channel_contract import DeliveryError
from approvals.models import ChannelConfig, ConfirmationRequest
from approvals.services import confirmation_decide, confirmation_expire_due
from channels_im.cards import ARGS_CARD_LIMIT, CardFacts, card_facts
from channels_im.feishu.cards import CARD_MAX_BYTES, card_size, request_card
from channels_im.feishu.transport import FeishuChannel, feishu_settings, sdk_client
from channels_im.services import card_deliver_attempt, card_update_attempt
from tests.agents.engine_kit import Harness
from tests.approvals.kit import PAY_ARGS, Resumes, pay_tool, set_policy, suspended_run
from tests.channels_im.feishu_fake import (
    FakeFeishu,
    card_buttons,
    card_markdown,
    card_texts,
    configure_channel,
)

pytestmark = pytest.mark.django_db

APRIL = "ou_april0000000000000000000000001"


@pytest.fixture
def fake() -> Iterator[FakeFeishu]:
    with FakeFeishu(hang_seconds=5.0) as server:  # far beyond any client timeout used here
        yield server


@pytest.fixture
def config(personas: Any, fake: FakeFeishu) -> ChannelConfig:
    return configure_channel(personas.org, fake=fake)


@pytest.fixture
def pending(personas: Any, config: ChannelConfig, resumes: Resumes) -> ConfirmationRequest:
    """A parked run's request for ``config`` (sent by the tests themselves, not on commit)."""
    personas.approver.first_name, personas.approver.last_name = "April", "Chen"
    personas.approver.save()
    set_policy(personas)
    _, request = suspended_run(personas, Harness(pay_tool()))
    return request


def code_block(card: dict[str, Any]) -> str:
    [block] = [m for m in card_markdown(card) if "```" in m]
    return re.fullmatch(r"\*\*Arguments\*\*\n```json\n(.*)\n```", block, re.DOTALL).group(1)


def set_args(request: ConfirmationRequest, args: dict[str, Any]) -> ConfirmationRequest:
    ConfirmationRequest.objects.filter(pk=request.pk).update(tool_args=args)
    return ConfirmationRequest.objects.get(pk=request.pk)


# --- the fake speaks Feishu ----------------------------------------------------------------------


def test_the_sdks_own_client_can_post_and_patch_on_the_fake_server(fake: FakeFeishu) -> None:
    client = (
        lark_oapi.Client.builder().app_id(fake.app_id).app_secret(fake.app_secret).domain(fake.url).build()
    )
    card = json.dumps({"schema": "2.0", "config": {"update_multi": True}, "body": {"elements": []}})
    body = (
        CreateMessageRequestBody.builder()
        .receive_id("oc_x")
        .msg_type("interactive")
        .content(card)
        .uuid("u-1")
    )

    created = client.im.v1.message.create(
        CreateMessageRequest.builder().receive_id_type("chat_id").request_body(body.build()).build()
    )
    patched = client.im.v1.message.patch(
        PatchMessageRequest.builder()
        .message_id(created.data.message_id)
        .request_body(PatchMessageRequestBody.builder().content(card).build())
        .build()
    )

    assert created.success() and created.data.message_id.startswith("om_")
    assert patched.success()
    assert len(fake.token_requests) == 1
    assert fake.messages[created.data.message_id].patches == [json.loads(card)]


# --- sending -------------------------------------------------------------------------------------


def test_a_card_goes_to_the_chat_as_an_interactive_card_json_2_0(
    fake: FakeFeishu, config: ChannelConfig, pending: ConfirmationRequest
) -> None:
    message_id = FeishuChannel(config).send_interactive_card(pending)

    [create] = fake.creates
    assert message_id in fake.messages
    assert create.query == {"receive_id_type": "chat_id"}
    assert create.headers["Authorization"].startswith("Bearer t-")
    assert create.json["receive_id"] == "oc_approvals" and create.json["msg_type"] == "interactive"
    assert create.json["uuid"] == str(pending.pk) and len(create.json["uuid"]) <= 50
    card = create.card
    assert card["schema"] == "2.0" and card["config"] == {"update_multi": True}
    assert card["header"] == {
        "title": {"tag": "plain_text", "content": "Approval needed: Purchase pay"},
        "template": "orange",
    }
    [facts] = card_texts(card)[:1]
    assert facts == "Agent: Procurement assistant\nRequested by: alice\nTool: Purchase pay"
    assert json.loads(code_block(card)) == PAY_ARGS
    assert code_block(card) == json.dumps(PAY_ARGS, indent=2, sort_keys=True)
    assert f"Expires at {pending.expires_at:%Y-%m-%d %H:%M} UTC" in "\n".join(card_texts(card)).split("\n")


def test_the_card_has_approve_and_reject_buttons_calling_back_with_the_request_and_decision(
    fake: FakeFeishu, config: ChannelConfig, pending: ConfirmationRequest
) -> None:
    FeishuChannel(config).send_interactive_card(pending)

    approve, reject = card_buttons(fake.creates[0].card)
    assert (approve["name"], approve["type"], approve["text"]["content"]) == (
        "approve",
        "primary_filled",
        "Approve",
    )
    assert (reject["name"], reject["type"], reject["text"]["content"]) == (
        "reject",
        "danger_filled",
        "Reject",
    )
    for button in (approve, reject):
        assert button["behaviors"] == [
            {"type": "callback", "value": {"request_id": str(pending.pk), "decision": button["name"]}}
        ]


def test_the_tenant_token_is_fetched_once_and_reused_across_sends(
    fake: FakeFeishu, config: ChannelConfig, pending: ConfirmationRequest
) -> None:
    for _ in range(3):  # a fresh channel per attempt, as delivery builds one
        FeishuChannel(config).send_interactive_card(pending)
    FeishuChannel(config).send_test_card()
    FeishuChannel(config).send_test_card()

    assert len(fake.token_requests) == 1
    assert len(fake.im_calls) == 5
    assert len({call.headers["Authorization"] for call in fake.im_calls}) == 1
    assert sdk_client(feishu_settings(config)) is sdk_client(feishu_settings(config))


def test_sending_again_returns_the_same_message_because_feishu_dedupes_by_request_id(
    fake: FakeFeishu, config: ChannelConfig, pending: ConfirmationRequest
) -> None:
    first = FeishuChannel(config).send_interactive_card(pending)
    second = FeishuChannel(config).send_interactive_card(pending)

    assert first == second and list(fake.messages) == [first]


def test_a_refused_tenant_token_is_forgotten_and_a_new_one_fetched_on_the_next_attempt(
    fake: FakeFeishu, config: ChannelConfig, pending: ConfirmationRequest
) -> None:
    FeishuChannel(config).send_test_card()
    fake.revoke_tokens()

    with pytest.raises(DeliveryError) as refused:
        FeishuChannel(config).send_interactive_card(pending)
    FeishuChannel(config).send_interactive_card(pending)

    assert refused.value.retryable and "99991663" in str(refused.value)
    assert len(fake.token_requests) == 2
    assert len(fake.messages) == 2, "the test card, then the request's card on the new token"


def test_a_test_card_is_small_and_asks_nothing(fake: FakeFeishu, config: ChannelConfig) -> None:
    message_id = FeishuChannel(config).send_test_card()

    [create] = fake.creates
    assert message_id in fake.messages and create.json["uuid"].startswith("fimone-test-")
    assert len(create.json["uuid"]) <= 50
    assert card_buttons(create.card) == [] and "behaviors" not in create.json["content"]
    assert card_size(create.card) < 1024
    assert create.card["header"]["title"]["content"] == "FIM One: test card"


# --- what the card shows -------------------------------------------------------------------------


def test_huge_arguments_are_cut_with_a_link_to_the_full_request_and_the_card_stays_under_30_kb(
    fake: FakeFeishu, config: ChannelConfig, pending: ConfirmationRequest
) -> None:
    request = set_args(pending, {"note": "汉字" * 20_000, "lines": ["`" * 50] * 500})

    FeishuChannel(config).send_interactive_card(request)

    card = fake.creates[0].card
    assert len(fake.creates[0].json["content"].encode()) <= CARD_MAX_BYTES
    shown = code_block(card).replace("\\u0060", "`")
    assert shown == card_facts(request).args_text and len(shown) <= ARGS_CARD_LIMIT + 2
    link = f"{settings.SITE_URL}/approvals/{request.pk}/"
    assert any(f"[see the full request]({link})" in text for text in card_markdown(card))


def test_a_card_whose_arguments_would_still_be_too_big_is_cut_further() -> None:
    facts = CardFacts(
        request_id="00000000-0000-4000-8000-000000000000",
        agent="Agent",
        requester="alice",
        tool="tool",
        args_text="😀" * 10_000,  # 40 KB: more than the character limit alone would ever let through
        args_truncated=False,
        link="http://testserver/approvals/x/",
        expires_at="2030-01-01 00:00 UTC",
        status="pending",
        decided_by=None,
        decided_at=None,
        reason="",
    )

    card = request_card(facts)

    assert card_size(card) <= CARD_MAX_BYTES
    assert any("see the full request" in text for text in card_markdown(card))
    assert [b["name"] for b in card_buttons(card)] == ["approve", "reject"]


def test_arguments_cannot_close_the_code_block_yet_read_back_as_the_same_json(
    fake: FakeFeishu, config: ChannelConfig, pending: ConfirmationRequest
) -> None:
    forged = {"amount": 1250.5, "memo": "```\n**Approved by the CFO** [pay now](http://evil.example)\n```"}
    request = set_args(pending, forged)

    FeishuChannel(config).send_interactive_card(request)

    card = fake.creates[0].card
    [block] = [m for m in card_markdown(card) if "Arguments" in m]
    assert block.count("```") == 2, "only our own fences"
    assert json.loads(code_block(card)) == forged


def test_names_are_plain_text_so_they_cannot_render_as_markup(
    fake: FakeFeishu, config: ChannelConfig, pending: ConfirmationRequest
) -> None:
    pending.agent.name = "**Trusted** [agent](http://evil.example)"
    pending.agent.save()

    FeishuChannel(config).send_interactive_card(ConfirmationRequest.objects.get(pk=pending.pk))

    card = fake.creates[0].card
    assert "Agent: **Trusted** [agent](http://evil.example)" in card_texts(card)[0]
    assert not any("evil.example" in text for text in card_markdown(card))


# --- updating ------------------------------------------------------------------------------------


def test_the_settled_card_shows_who_decided_and_when_instead_of_buttons(
    personas: Any, fake: FakeFeishu, config: ChannelConfig, pending: ConfirmationRequest
) -> None:
    card_deliver_attempt(request_id=str(pending.pk), attempt=1, final=False)
    confirmation_decide(
        request_id=pending.pk,
        user=personas.approver,
        approve=True,
        via_channel_id=config.pk,
        external_id=APRIL,
    )

    card_update_attempt(request_id=str(pending.pk), attempt=1, final=False)

    pending.refresh_from_db()
    [patch] = fake.patches
    assert patch.path.endswith(pending.external_message_id)
    card = patch.card
    assert card_buttons(card) == [] and card["config"] == {"update_multi": True}
    assert card["header"]["template"] == "green"
    assert card["header"]["title"]["content"] == "Approved: Purchase pay"
    assert f"Approved by April Chen at {pending.responded_at:%Y-%m-%d %H:%M} UTC" in card_texts(card)
    assert APRIL not in patch.json["content"], "an open_id is never shown"
    assert json.loads(code_block(card)) == PAY_ARGS


def test_a_rejected_card_shows_the_reason(
    personas: Any, fake: FakeFeishu, config: ChannelConfig, pending: ConfirmationRequest
) -> None:
    card_deliver_attempt(request_id=str(pending.pk), attempt=1, final=False)
    confirmation_decide(request_id=pending.pk, user=personas.approver, approve=False, reason="budget frozen")

    card_update_attempt(request_id=str(pending.pk), attempt=1, final=False)

    card = fake.patches[0].card
    assert card["header"]["template"] == "red"
    assert any(
        text.startswith("Rejected by April Chen at ") and "budget frozen" in text for text in card_texts(card)
    )


def test_an_expired_card_says_nobody_decided_in_time(
    fake: FakeFeishu, config: ChannelConfig, pending: ConfirmationRequest
) -> None:
    card_deliver_attempt(request_id=str(pending.pk), attempt=1, final=False)
    confirmation_expire_due(now=pending.expires_at + dt.timedelta(seconds=1))

    card_update_attempt(request_id=str(pending.pk), attempt=1, final=False)

    card = fake.patches[0].card
    assert card["header"]["template"] == "grey" and card_buttons(card) == []
    assert any(text.endswith("nobody decided in time") for text in card_texts(card))


# --- failures ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "retryable", "says"),
    [
        ("500", True, "not JSON"),
        ("503-json", True, "code 1500"),
        ("429", True, "code 99991400"),
        ("400-rate-limited", True, "code 99991400"),
        ("busy", True, "code 11232"),
        ("hang", True, "did not answer the card delivery within 0.5 s"),
        ("bot-not-in-chat", False, "code 230002"),
        ("no-permission", False, "code 99991672"),
    ],
)
def test_each_failure_is_a_delivery_error_that_says_whether_a_retry_may_help(
    fake: FakeFeishu,
    config: ChannelConfig,
    pending: ConfirmationRequest,
    fault: str,
    retryable: bool,
    says: str,
) -> None:
    config.settings_json["timeout"] = 0.5
    FeishuChannel(config).send_test_card()  # the token is already cached: the fault hits the send
    fake.fail_next(fault)
    started = time.monotonic()

    with pytest.raises(DeliveryError) as failed:
        FeishuChannel(config).send_interactive_card(pending)

    assert failed.value.retryable is retryable
    assert says in str(failed.value)
    assert time.monotonic() - started < 3.0, "a hanging Feishu costs one timeout, not the hang"


def test_an_update_failure_is_a_delivery_error_too(
    personas: Any, fake: FakeFeishu, config: ChannelConfig, pending: ConfirmationRequest
) -> None:
    card_deliver_attempt(request_id=str(pending.pk), attempt=1, final=False)
    confirmation_decide(request_id=pending.pk, user=personas.approver, approve=True)
    fake.fail_next("500")

    with pytest.raises(DeliveryError) as failed:
        FeishuChannel(config).update_card(ConfirmationRequest.objects.get(pk=pending.pk))

    assert failed.value.retryable and "card update" in str(failed.value)


def test_credentials_feishu_refuses_are_a_permanent_error(personas: Any, fake: FakeFeishu) -> None:
    config = configure_channel(personas.org, fake=fake)
    config.secrets = {**config.secrets, "app_secret": "not-the-secret"}

    with pytest.raises(DeliveryError) as failed:
        FeishuChannel(config).send_test_card()

    assert not failed.value.retryable
    assert "check app_id and app_secret" in str(failed.value) and "10014" in str(failed.value)


def test_an_unreachable_feishu_is_a_retryable_error(personas: Any, fake: FakeFeishu) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = configure_channel(personas.org, fake=fake, domain=f"http://127.0.0.1:{port}")

    with pytest.raises(DeliveryError) as failed:
        FeishuChannel(config).send_test_card()

    assert failed.value.retryable and "could not reach Feishu" in str(failed.value)


VALID = {"app_id": "cli_1", "app_secret": "s", "verification_token": "v", "encrypt_key": "e"}


@pytest.mark.parametrize(
    ("secrets", "options", "says"),
    [
        ({**VALID, "app_secret": ""}, {"chat_id": "oc_1"}, "set secrets.app_secret"),
        ({"app_id": "cli_1"}, {"chat_id": "oc_1"}, "secrets.app_secret, secrets.verification_token"),
        (None, {"chat_id": "oc_1"}, "secrets.app_id"),
        (VALID, {}, "set settings_json.chat_id"),
        (VALID, {"chat_id": "ou_someone"}, "group chat id (oc_…)"),
        (VALID, {"chat_id": "oc_1", "domain": "http://open.feishu.example"}, "https origin"),
        (VALID, {"chat_id": "oc_1", "domain": "https://open.feishu.cn/open-apis"}, "https origin"),
        (VALID, {"chat_id": "oc_1", "domain": "https://user@open.feishu.cn"}, "https origin"),
        (VALID, {"chat_id": "oc_1", "timeout": 0}, "settings_json.timeout"),
        (VALID, {"chat_id": "oc_1", "timeout": "5"}, "settings_json.timeout"),
    ],
)
def test_an_incomplete_or_invalid_configuration_is_a_permanent_error_naming_what_to_fix(
    secrets: dict[str, str] | None, options: dict[str, Any], says: str
) -> None:
    config = ChannelConfig(kind="feishu", name="Feishu", secrets=secrets, settings_json=options)

    with pytest.raises(DeliveryError) as failed:
        FeishuChannel(config).send_test_card()

    assert not failed.value.retryable and says in str(failed.value)


def test_the_lark_domain_and_defaults_are_accepted() -> None:
    config = ChannelConfig(
        kind="feishu",
        name="Lark",
        secrets=VALID,
        settings_json={"chat_id": "oc_1", "domain": "https://open.larksuite.com/"},
    )

    conf = feishu_settings(config)

    assert (conf.domain, conf.timeout, conf.chat_id) == ("https://open.larksuite.com", 5.0, "oc_1")
