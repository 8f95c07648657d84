"""WeCom callbacks are verified before they are parsed (docs/design.md §1.7): forged, stale, replayed,
wrong-corp and wrong-app callbacks change nothing; wechatpy (the independent peer) decrypts what
we accept and refuses what we refuse; a clicker nobody is linked to gets the one-time link in a
private message, never in the answer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.http import HttpResponse
from django.test import Client
from wechatpy.enterprise.crypto import WeChatCrypto

from approvals.models import ChannelConfig, ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from channels_im.models import ImIdentity, ImLinkOffer
from channels_im.wecom.config import WecomConfigError, wecom_settings
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool, set_policy, suspended_run
from tests.channels_im.wecom_fake import (
    CORP_ID,
    ENCODING_AES_KEY,
    TOKEN,
    FakeWecom,
    click_xml,
    signed_callback,
    url_check,
)

pytestmark = pytest.mark.django_db

APRIL = "april.chen"
Kind = ConfirmationEvent.Kind


@pytest.fixture
def wecom() -> Iterator[FakeWecom]:
    with FakeWecom() as fake:
        yield fake


@pytest.fixture
def channel(personas: Any, wecom: FakeWecom) -> ChannelConfig:
    ImIdentity.objects.create(
        organization=personas.org, user=personas.approver, provider="wecom", external_id=APRIL
    )
    return wecom.channel_config(personas.org, is_default=True)


@pytest.fixture
def pending(personas: Any, channel: ChannelConfig, resumes: Any) -> ConfirmationRequest:
    set_policy(personas)
    _, request = suspended_run(personas, Harness(pay_tool()))
    assert request.channel_config_id == channel.pk
    return request


def post(config: ChannelConfig, query: str, body: bytes) -> HttpResponse:
    return Client().post(f"/im/callback/{config.callback_key}/?{query}", data=body, content_type="text/xml")


def click(request: ConfirmationRequest, **kwargs: Any) -> tuple[str, bytes]:
    signing = {k: kwargs.pop(k) for k in ("token", "encoding_aes_key", "corp_id", "timestamp") if k in kwargs}
    if "corp_id" in signing:
        kwargs.setdefault("corp_id", signing["corp_id"])
    kwargs.setdefault("user_id", APRIL)
    return signed_callback(click_xml(request_id=str(request.pk), **kwargs), **signing)


def status(request: ConfirmationRequest) -> str:
    request.refresh_from_db()
    return request.status


# --- the URL check ---------------------------------------------------------------------------------


def test_the_url_check_is_answered_with_the_decrypted_echostr(channel: ChannelConfig) -> None:
    response = Client().get(f"/im/callback/{channel.callback_key}/?{url_check('5927638025631958842')}")

    assert response.status_code == 200 and response.content == b"5927638025631958842"


@pytest.mark.parametrize(
    "signing",
    [{"token": "SomeoneElsesToken"}, {"corp_id": "ww0ther0corp"}, {"encoding_aes_key": "Q" * 43}],
    ids=["other-token", "other-corp", "other-key"],
)
def test_it_refuses_a_url_check_not_made_for_this_channel(channel: ChannelConfig, signing: dict) -> None:
    response = Client().get(f"/im/callback/{channel.callback_key}/?{url_check('42', **signing)}")

    assert response.status_code in (400, 401) and b"42" not in response.content


def test_a_feishu_or_slack_callback_url_still_takes_no_get(personas: Any) -> None:
    config = ChannelConfig.objects.create(organization=personas.org, kind="slack", name="s", secrets={})

    assert Client().get(f"/im/callback/{config.callback_key}/").status_code == 405


# --- clicks --------------------------------------------------------------------------------------


def test_a_verified_click_by_a_linked_approver_decides_the_request(
    pending: ConfirmationRequest, personas
) -> None:
    response = post(pending.channel_config, *click(pending))

    assert response.status_code == 200 and response.content == b""
    assert status(pending) == ConfirmationStatus.APPROVED and pending.responded_by == personas.approver
    assert pending.responded_by_external_id == APRIL


def test_it_refuses_a_forged_signature(pending: ConfirmationRequest) -> None:
    response = post(pending.channel_config, *click(pending, token="AForgersGuessAtTheToken"))

    assert response.status_code == 401 and "msg_signature" in response.json()["error"]
    assert status(pending) == ConfirmationStatus.PENDING


@pytest.mark.parametrize("skew", [-400, -3600, 400])  # well outside the 300 s window, never on its edge
def test_it_refuses_a_stale_or_future_callback(pending: ConfirmationRequest, skew: int) -> None:
    import time

    response = post(pending.channel_config, *click(pending, timestamp=int(time.time()) + skew))

    assert response.status_code == 401 and "stale callback" in response.json()["error"]
    assert status(pending) == ConfirmationStatus.PENDING


def test_it_refuses_a_callback_encrypted_for_another_corp(pending: ConfirmationRequest) -> None:
    response = post(pending.channel_config, *click(pending, corp_id="ww0ther0corp"))

    assert response.status_code == 401 and "another WeCom corp" in response.json()["error"]
    assert status(pending) == ConfirmationStatus.PENDING


def test_it_refuses_a_callback_for_another_app_of_the_same_corp(pending: ConfirmationRequest) -> None:
    response = post(pending.channel_config, *click(pending, agent_id=1000099))

    assert response.status_code == 401 and "AgentID" in response.json()["error"]
    assert status(pending) == ConfirmationStatus.PENDING


def test_a_replayed_click_changes_nothing_and_is_logged(
    pending: ConfirmationRequest, wecom: FakeWecom
) -> None:
    query, body = click(pending, decision="reject")
    assert post(pending.channel_config, query, body).status_code == 200
    assert status(pending) == ConfirmationStatus.REJECTED

    again = post(pending.channel_config, query, body)

    assert again.status_code == 200 and again.content == b""
    refused = pending.events.get(kind=Kind.CLICK_REFUSED)
    assert "already received" in refused.details["reason"] and refused.actor_external_id == APRIL
    assert wecom.notices == [], "a replay is not answered with a notice"


def test_it_refuses_a_button_moved_onto_another_requests_card(pending: ConfirmationRequest) -> None:
    response = post(pending.channel_config, *click(pending, task_id="fimone-" + "0" * 32))

    assert response.status_code == 400 and status(pending) == ConfirmationStatus.PENDING


@pytest.mark.parametrize(
    "plaintext",
    [
        '<?xml version="1.0"?><!DOCTYPE xml [<!ENTITY a "aaaa">]><xml><ToUserName>&a;</ToUserName></xml>',
        "not xml at all",
        "<notxml/>",
        f"<xml><ToUserName>{CORP_ID}</ToUserName><AgentID>1000002</AgentID><MsgType>event</MsgType>"
        "<Event>enter_agent</Event></xml>",
    ],
    ids=["dtd-entities", "not-xml", "other-root", "other-event"],
)
def test_it_refuses_an_authenticated_callback_that_is_not_an_approval_click(
    pending: ConfirmationRequest, plaintext: str
) -> None:
    response = post(pending.channel_config, *signed_callback(plaintext))

    assert response.status_code == 400 and status(pending) == ConfirmationStatus.PENDING


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"<xml><Encrypt><![CDATA[AAAA]]></Encrypt><Encrypt><![CDATA[AAAA]]></Encrypt></xml>",
        b"\xff\xfe garbage",
        b"<xml><Encrypt><![CDATA[" + b"A" * 70000 + b"]]></Encrypt></xml>",
    ],
    ids=["empty", "two-encrypt", "binary", "oversized"],
)
def test_it_refuses_hostile_bodies_without_a_500(channel: ChannelConfig, body: bytes) -> None:
    response = post(channel, "msg_signature=x&timestamp=1&nonce=2", body)

    assert response.status_code in (401, 413) and "error" in response.json()


@pytest.mark.parametrize(
    "variant",
    ["genuine", "other-token", "other-corp", "other-key", "forged-signature", "replaced-nonce"],
)
def test_it_and_wechatpy_agree_on_each_callback(pending: ConfirmationRequest, variant: str) -> None:
    signing = {
        "other-token": {"token": "AnotherToken1"},
        "other-corp": {"corp_id": "ww0ther0corp"},
        "other-key": {"encoding_aes_key": "Q" * 43},
    }.get(variant, {})
    query, body = click(pending, **signing)
    if variant == "forged-signature":
        query = query.replace("msg_signature=", "msg_signature=0")
    if variant == "replaced-nonce":
        query = query.replace("nonce=", "nonce=9")
    from urllib.parse import parse_qs

    params = {k: v[0] for k, v in parse_qs(query).items()}
    try:
        WeChatCrypto(TOKEN, ENCODING_AES_KEY, CORP_ID).decrypt_message(
            body.decode(), params["msg_signature"], params["timestamp"], params["nonce"]
        )
        peer_accepts = True
    except Exception:
        peer_accepts = False

    response = post(pending.channel_config, query, body)

    assert (response.status_code == 200) == peer_accepts == (variant == "genuine")
    assert (status(pending) == ConfirmationStatus.APPROVED) == peer_accepts


# --- who clicked ---------------------------------------------------------------------------------


def test_an_unlinked_clicker_gets_the_link_in_a_private_message_only(
    pending: ConfirmationRequest, wecom: FakeWecom
) -> None:
    response = post(pending.channel_config, *click(pending, user_id="newcomer"))

    assert response.status_code == 200 and response.content == b"", "the answer carries no link"
    assert status(pending) == ConfirmationStatus.PENDING
    [notice] = wecom.notices
    assert notice["touser"] == "newcomer" and "/im/link/" in notice["text"]["content"]
    offer = ImLinkOffer.objects.get(external_id="newcomer")
    assert offer.provider == "wecom" and offer.channel_config == pending.channel_config
    assert pending.events.get(kind=Kind.CLICK_REFUSED).actor_external_id == "newcomer"


def test_a_wecom_identity_of_another_organisation_does_not_count(
    pending: ConfirmationRequest, personas: Any, wecom: FakeWecom
) -> None:
    ImIdentity.objects.create(
        organization=personas.other_org, user=personas.stranger, provider="wecom", external_id="sam"
    )

    post(pending.channel_config, *click(pending, user_id="sam"))

    assert status(pending) == ConfirmationStatus.PENDING
    [notice] = wecom.notices
    assert notice["touser"] == "sam" and "not linked" in notice["text"]["content"]


def test_a_click_through_another_organisations_channel_changes_nothing(
    pending: ConfirmationRequest, personas: Any, wecom: FakeWecom
) -> None:
    theirs = wecom.channel_config(personas.other_org, name="Globex on WeCom")
    ImIdentity.objects.create(
        organization=personas.other_org, user=personas.stranger, provider="wecom", external_id=APRIL
    )

    response = post(theirs, *click(pending))

    assert response.status_code == 200 and status(pending) == ConfirmationStatus.PENDING
    assert "no such approval request" in wecom.notices[-1]["text"]["content"]


# --- configuration -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("secrets", "options", "problem"),
    [
        ({"token": TOKEN, "encoding_aes_key": ENCODING_AES_KEY}, {}, "secrets.secret"),
        ({}, {"corp_id": CORP_ID}, "settings_json.agent_id"),
        ({"encoding_aes_key": ENCODING_AES_KEY[:-1]}, {}, "43 letters and digits"),
        ({"encoding_aes_key": ENCODING_AES_KEY + "x"}, {}, "43 letters and digits"),
        ({"token": "has spaces in it"}, {}, "1 to 32 letters and digits"),
        ({}, {"agent_id": "one"}, "AgentId"),
        ({}, {"agent_id": True}, "AgentId"),
        ({}, {"corp_id": "ww<script>"}, "CorpID"),
        ({}, {"touser": "", "toparty": "", "totag": ""}, "who receives"),
        ({}, {"touser": "a|b c"}, "invalid id"),
        ({}, {"api_base": "http://qyapi.weixin.qq.com"}, "https origin"),
        ({}, {"api_base": "https://user:pw@qyapi.weixin.qq.com"}, "https origin"),
        ({}, {"timeout": 0}, "timeout"),
    ],
)
def test_it_refuses_an_incomplete_or_invalid_configuration(
    channel: ChannelConfig, secrets: dict, options: dict, problem: str
) -> None:
    base_secrets = dict(channel.secrets)
    if problem == "secrets.secret":
        base_secrets.pop("secret")
    channel.secrets = {**base_secrets, **secrets}
    channel.settings_json = {**channel.settings_json, **options}
    if problem == "settings_json.agent_id":
        channel.settings_json.pop("agent_id")

    with pytest.raises(WecomConfigError, match=problem.replace(".", r"\.")) as refused:
        wecom_settings(channel)
    assert "fake-wecom-app-secret" not in str(refused.value)


def test_the_admin_form_refuses_a_wecom_channel_with_a_short_encoding_aes_key(channel: ChannelConfig) -> None:
    from django.core.exceptions import ValidationError

    channel.secrets = {**channel.secrets, "encoding_aes_key": "tooshort"}
    with pytest.raises(ValidationError, match="EncodingAESKey"):
        channel.full_clean()


# --- the admin -----------------------------------------------------------------------------------


def _wecom_form(personas: Any, secrets: dict, settings: dict) -> dict[str, Any]:
    import json

    return {
        "organization": personas.org.pk,
        "kind": "wecom",
        "name": "WeCom approvals",
        "active": "on",
        "secrets": json.dumps(secrets),
        "settings_json": json.dumps(settings),
    }


def test_the_admin_refuses_a_wecom_channel_whose_encoding_aes_key_is_not_43_characters(
    superuser, personas, wecom: FakeWecom
) -> None:
    from tests.admin_kit import logged_in, page_text, url

    secrets = {"secret": "s3cr3t-never-shown", "token": TOKEN, "encoding_aes_key": ENCODING_AES_KEY[:40]}
    settings = {"corp_id": CORP_ID, "agent_id": 1000002, "touser": "april"}
    client = logged_in(superuser)

    response = client.post(url(ChannelConfig, "add"), _wecom_form(personas, secrets, settings))

    assert response.status_code == 200
    assert "EncodingAESKey" in " ".join(response.context["adminform"].form.non_field_errors())
    assert "s3cr3t-never-shown" not in page_text(response)
    assert not ChannelConfig.objects.filter(kind="wecom").exists()
    assert "encoding_aes_key" in page_text(client.get(url(ChannelConfig, "add"))), "the help text shows it"


def test_the_admin_test_card_action_sends_a_wecom_card(
    superuser, channel: ChannelConfig, wecom: FakeWecom
) -> None:
    from tests.admin_kit import logged_in, url

    logged_in(superuser).post(
        url(ChannelConfig, "changelist"),
        {"action": "send_test_card", "_selected_action": [channel.pk]},
        follow=True,
    )

    [send] = wecom.calls("/cgi-bin/message/send")
    assert send.body["template_card"]["card_type"] == "text_notice" and send.body["touser"] == "april|adam"
