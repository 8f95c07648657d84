"""Slack outbound: the card as Block Kit through slack_sdk, its update, and what failures mean.

Every call goes to :class:`FakeSlack` on 127.0.0.1, which answers like the Web API (token, channel
and Block Kit limits checked) or fails on demand.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from approvals.channel_contract import DeliveryError
from approvals.channels import channel_for
from approvals.models import ChannelConfig, ConfirmationRequest
from approvals.services import confirmation_decide
from channels_im.slack.blocks import SECTION_TEXT_LIMIT
from channels_im.slack.transport import SlackChannel, parse_message_ref
from tests.agents.engine_kit import Harness
from tests.approvals.kit import PAY_ARGS, pay_tool, set_policy, suspended_run
from tests.channels_im.slack_fake import (
    BOT_TOKEN,
    CHANNEL,
    HANG,
    HTTP_500,
    SIGNING_SECRET,
    FakeSlack,
    api_error,
    ratelimited,
)


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def config(personas, slack: FakeSlack) -> ChannelConfig:
    return slack.channel_config(personas.org, is_default=True)


@pytest.fixture
def request_(personas, config: ChannelConfig, resumes) -> ConfirmationRequest:
    """A pending request whose card goes to ``config`` (not sent yet: these tests send it)."""
    set_policy(personas)
    return suspended_run(personas, Harness(pay_tool()))[1]


def with_args(request: ConfirmationRequest, tool_args: dict[str, Any]) -> ConfirmationRequest:
    ConfirmationRequest.objects.filter(pk=request.pk).update(tool_args=tool_args)
    request.refresh_from_db()
    return request


def blocks_of(slack: FakeSlack, method: str = "chat.postMessage") -> list[dict[str, Any]]:
    return slack.calls(method)[-1].body["blocks"]


def section_texts(blocks: list[dict[str, Any]]) -> list[str]:
    return [b["text"]["text"] for b in blocks if b["type"] == "section" and "text" in b]


# --- the card ------------------------------------------------------------------------------------


def test_the_card_is_posted_with_the_facts_and_buttons_carrying_the_request_id(
    slack: FakeSlack, config: ChannelConfig, request_: ConfirmationRequest
) -> None:
    ref = SlackChannel(config).send_interactive_card(request_)

    [call] = slack.calls("chat.postMessage")
    assert call.headers["Authorization"] == f"Bearer {BOT_TOKEN}"
    assert call.body["channel"] == CHANNEL
    assert "Procurement assistant wants to run Purchase pay" in call.body["text"]
    header, facts, arguments, context, actions = call.body["blocks"]
    assert header["text"]["text"] == "Approval needed: Purchase pay"
    assert [f["text"] for f in facts["fields"]] == [
        "*Agent*\nProcurement assistant",
        "*Requested by*\nalice",
        "*Tool*\nPurchase pay",
    ]
    assert (
        arguments["text"]["text"]
        == "*Arguments*\n```\n" + json.dumps(PAY_ARGS, indent=2, sort_keys=True) + "\n```"
    )
    assert "Expires at" in context["elements"][0]["text"]
    assert f"/approvals/{request_.pk}/|Open in FIM One>" in context["elements"][0]["text"]
    assert actions["block_id"] == "fimone_approval"
    assert [(b["action_id"], b["style"], b["value"]) for b in actions["elements"]] == [
        ("approve", "primary", str(request_.pk)),
        ("reject", "danger", str(request_.pk)),
    ]
    # How a retry after a lost answer recognises the card in the channel's history.
    assert call.body["metadata"] == {
        "event_type": "fimone_approval_card",
        "event_payload": {"request_id": str(request_.pk)},
    }
    ((channel, ts),) = slack.messages
    assert ref == f"{channel}:{ts}" and channel == CHANNEL


def test_the_channel_is_found_by_its_kind_through_the_provider_registry(config: ChannelConfig) -> None:
    assert isinstance(channel_for(config), SlackChannel)


def test_long_arguments_are_cut_to_fit_a_section_with_a_link_to_the_full_request(
    slack: FakeSlack, config: ChannelConfig, request_: ConfirmationRequest
) -> None:
    # Escaping makes "&" five characters long: the cut must count escaped text, not raw text.
    request = with_args(request_, {"note": "&" * 1900, "memo": "<b>" * 100})

    SlackChannel(config).send_interactive_card(request)

    [arguments] = [t for t in section_texts(blocks_of(slack)) if t.startswith("*Arguments*")]
    assert len(arguments) <= SECTION_TEXT_LIMIT
    assert arguments.endswith(
        f"_Cut to fit: <http://127.0.0.1:8000/approvals/{request.pk}/|see the full request>_"
    )
    assert "&amp;&amp;" in arguments
    assert "&" not in re.sub("&(amp|lt|gt);", "", arguments), "no entity is cut in half"
    assert "\n…\n```" in arguments and arguments.count("…") == 1


def test_arguments_cannot_close_the_code_block_or_mention_anyone(
    slack: FakeSlack, config: ChannelConfig, request_: ConfirmationRequest
) -> None:
    request = with_args(request_, {"memo": "``` <!channel> *pay now* <https://evil.test|click>"})

    SlackChannel(config).send_interactive_card(request)

    [arguments] = [t for t in section_texts(blocks_of(slack)) if t.startswith("*Arguments*")]
    body = arguments.removeprefix("*Arguments*\n```\n").removesuffix("\n```")
    assert "``" not in body, "no run of backticks can end the code block"
    assert "<" not in body and ">" not in body, "no mention or link is smuggled in"
    assert body.replace("\u200b", "").replace("&lt;", "<").replace("&gt;", ">") == json.dumps(
        request.tool_args, indent=2, sort_keys=True
    ), "the approver still reads the exact arguments"


def test_a_card_already_posted_is_not_posted_twice(
    slack: FakeSlack, config: ChannelConfig, request_: ConfirmationRequest
) -> None:
    channel = SlackChannel(config)
    request_.external_message_id = channel.send_interactive_card(request_)

    assert channel.send_interactive_card(request_) == request_.external_message_id
    assert len(slack.calls("chat.postMessage")) == 1


def test_updating_the_card_replaces_the_buttons_with_who_decided_and_when(
    personas, slack: FakeSlack, config: ChannelConfig, request_: ConfirmationRequest
) -> None:
    personas.approver.first_name, personas.approver.last_name = "April", "Chen"
    personas.approver.save()
    channel = SlackChannel(config)
    ref = channel.send_interactive_card(request_)
    ConfirmationRequest.objects.filter(pk=request_.pk).update(external_message_id=ref)
    confirmation_decide(request_id=request_.pk, user=personas.approver, approve=True, reason="budget ok")
    request_.refresh_from_db()

    channel.update_card(request_)

    [update] = slack.calls("chat.update")
    assert f"{update.body['channel']}:{update.body['ts']}" == ref
    when = request_.responded_at.strftime("%Y-%m-%d %H:%M UTC")
    assert update.body["text"] == f"Approved by April Chen at {when} — budget ok"
    blocks = update.body["blocks"]
    assert all(b["type"] != "actions" for b in blocks), "the buttons are gone"
    assert f":white_check_mark: *Approved by April Chen at {when} — budget ok*" in section_texts(blocks)
    assert slack.messages[tuple(ref.split(":"))]["blocks"] == blocks


@pytest.mark.parametrize(
    ("ref", "parsed"),
    [
        ("C0APPROVALS:1700000001.000001", ("C0APPROVALS", "1700000001.000001")),
        ("", None),
        ("inbox:9f0c5c1e-3b4e-4c49-9a4e-2f1f7d1c2a10", None),
        ("om_3f2a1b", None),
        ("C0APPROVALS:", None),
    ],
)
def test_only_references_to_slack_messages_are_taken_for_posted_cards(ref: str, parsed: Any) -> None:
    assert parse_message_ref(ref) == parsed


def test_updating_a_card_that_was_never_posted_is_a_permanent_error(
    config: ChannelConfig, request_: ConfirmationRequest
) -> None:
    with pytest.raises(DeliveryError, match="no Slack message") as error:
        SlackChannel(config).update_card(request_)
    assert not error.value.retryable


def test_the_test_card_is_a_harmless_message_without_buttons(slack: FakeSlack, config: ChannelConfig) -> None:
    ref = SlackChannel(config).send_test_card()

    [call] = slack.calls("chat.postMessage")
    assert "test message" in call.body["text"]
    assert [b["type"] for b in call.body["blocks"]] == ["section"]
    assert ref.startswith(f"{CHANNEL}:")


# --- configuration and failures -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("secrets", "settings_json", "problem"),
    [
        (None, {"channel": CHANNEL}, "bot_token"),
        ({"bot_token": "", "signing_secret": SIGNING_SECRET}, {"channel": CHANNEL}, "bot_token"),
        ({"bot_token": BOT_TOKEN}, {}, "channel"),
        (
            {"bot_token": BOT_TOKEN},
            {"channel": CHANNEL, "api_url": "http://slack.example.test/api/"},
            "https",
        ),
        ({"bot_token": BOT_TOKEN}, {"channel": CHANNEL, "api_url": 42}, "api_url"),
        ({"bot_token": BOT_TOKEN}, {"channel": CHANNEL, "timeout": 0}, "timeout"),
        ({"bot_token": BOT_TOKEN}, {"channel": CHANNEL, "timeout": "5"}, "timeout"),
    ],
)
def test_an_incomplete_configuration_is_a_permanent_error_naming_what_is_wrong(
    personas, slack: FakeSlack, secrets: Any, settings_json: dict[str, Any], problem: str
) -> None:
    config = slack.channel_config(personas.org, secrets=secrets, settings_json=settings_json)

    with pytest.raises(DeliveryError, match=problem) as error:
        SlackChannel(config).send_test_card()

    assert not error.value.retryable
    assert "misconfigured" in str(error.value) and BOT_TOKEN not in str(error.value)
    assert slack.requests == []


@pytest.mark.parametrize(
    ("failure", "retryable", "message"),
    [
        (HTTP_500, True, "(HTTP 500)"),
        (HANG, True, "did not answer chat.postMessage within 0.5 s"),
        (ratelimited(retry_after=7), True, "rate-limited chat.postMessage (ratelimited, retry after 7 s)"),
        (api_error("internal_error"), True, "internal_error"),
        (api_error("invalid_auth"), False, "invalid_auth"),
        (api_error("channel_not_found"), False, "channel_not_found"),
        (api_error("not_in_channel"), False, "not_in_channel"),
        (api_error("is_archived"), False, "is_archived"),
    ],
)
def test_slack_failures_are_delivery_errors_retryable_only_when_trying_again_may_help(
    slack: FakeSlack,
    config: ChannelConfig,
    request_: ConfirmationRequest,
    failure: Any,
    retryable: bool,
    message: str,
) -> None:
    slack.fail_next(failure)

    with pytest.raises(DeliveryError) as error:
        SlackChannel(config).send_interactive_card(request_)

    assert error.value.retryable is retryable
    assert message in str(error.value)
    assert len(slack.calls("chat.postMessage")) == 1, "the SDK does not retry behind the task's back"


def test_an_unreachable_slack_is_a_retryable_error(personas, request_: ConfirmationRequest) -> None:
    with socket.socket() as sock:  # a port that nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = ChannelConfig.objects.create(
        organization=personas.org,
        kind="slack",
        name="Gone",
        secrets={"bot_token": BOT_TOKEN, "signing_secret": SIGNING_SECRET},
        settings_json={"channel": CHANNEL, "api_url": f"http://127.0.0.1:{port}/api/", "timeout": 0.5},
    )

    with pytest.raises(DeliveryError, match="could not reach Slack") as error:
        SlackChannel(config).send_interactive_card(request_)
    assert error.value.retryable


def test_a_wrong_bot_token_is_refused_by_slack_and_not_retried(
    personas, slack: FakeSlack, request_: ConfirmationRequest
) -> None:
    config = slack.channel_config(
        personas.org, secrets={"bot_token": "xoxb-revoked", "signing_secret": SIGNING_SECRET}
    )
    with pytest.raises(DeliveryError, match="invalid_auth") as error:
        SlackChannel(config).send_interactive_card(request_)
    assert not error.value.retryable and "xoxb-revoked" not in str(error.value)


# --- the fake is a faithful peer -----------------------------------------------------------------


def test_the_sdks_own_web_client_works_against_the_fake(slack: FakeSlack) -> None:
    client = WebClient(token=BOT_TOKEN, base_url=slack.api_url, timeout=2)
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "hello"}}]

    posted = client.chat_postMessage(channel=CHANNEL, text="hello", blocks=blocks)
    # api_call with params sends a form-encoded body, as older code and some SDK methods do.
    updated = client.api_call(
        "chat.update", params={"channel": CHANNEL, "ts": posted["ts"], "text": "bye", "blocks": "[]"}
    )

    assert posted["ok"] and posted["channel"] == CHANNEL and updated["text"] == "bye"
    post, update = slack.requests
    assert post.content_type == "application/json" and post.body["blocks"] == blocks
    assert update.content_type == "application/x-www-form-urlencoded" and update.body["blocks"] == []
    assert slack.messages[(CHANNEL, posted["ts"])]["text"] == "bye"
    with pytest.raises(SlackApiError) as error:
        WebClient(token="xoxb-wrong", base_url=slack.api_url).chat_postMessage(channel=CHANNEL, text="x")
    assert error.value.response["error"] == "invalid_auth"
    with pytest.raises(SlackApiError) as error:
        client.chat_postMessage(channel="C0NOWHERE", text="x")
    assert error.value.response["error"] == "channel_not_found"
    with pytest.raises(SlackApiError) as error:
        client.chat_update(channel=CHANNEL, ts="1.000000", text="x")
    assert error.value.response["error"] == "message_not_found"
