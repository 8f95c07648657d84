"""Feishu callbacks are verified before they are parsed, and judged as lark-oapi's own dispatcher
judges them (docs/protocols.md): the SDK is the independent peer that says a fixture is genuine."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import time
from typing import Any

import lark_oapi
import pytest
from Crypto.Cipher import AES
from django.http import HttpResponse
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark_oapi.core.model import RawRequest
from lark_oapi.core.utils import AESCipher
from lark_oapi.event.callback.model.p2_card_action_trigger import (
    P2CardActionTrigger,
    P2CardActionTriggerResponse,
)

from approvals.models import ChannelConfig, ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from channels_im.models import ImIdentity
from tests.agents.engine_kit import Harness
from tests.approvals.kit import Resumes, pay_tool, set_policy, suspended_run
from tests.channels_im.feishu_fake import AppKeys, click_event, configure_channel, signed_body, url_check

pytestmark = pytest.mark.django_db

APRIL = "ou_april0000000000000000000000001"


@pytest.fixture
def keys() -> AppKeys:
    return AppKeys.generate()


@pytest.fixture
def channel(personas: Any, keys: AppKeys) -> ChannelConfig:
    ImIdentity.objects.create(
        organization=personas.org, user=personas.approver, provider="feishu", external_id=APRIL
    )
    return configure_channel(personas.org, keys=keys)


@pytest.fixture
def pending(personas: Any, channel: ChannelConfig, resumes: Resumes) -> ConfirmationRequest:
    """A parked run's request, sent to ``channel`` (its card delivery is not exercised here)."""
    set_policy(personas)
    _, request = suspended_run(personas, Harness(pay_tool()))
    assert request.channel_config_id == channel.pk
    return request


def post(client: Client, config: ChannelConfig, body: bytes, headers: dict[str, str]) -> HttpResponse:
    url = reverse("im-callback", args=[config.callback_key])
    return client.post(url, data=body, content_type="application/json", headers=headers)


def sdk_judges(keys: AppKeys, body: bytes, headers: dict[str, str]) -> tuple[int, list[P2CardActionTrigger]]:
    """Feed the exact bytes to lark-oapi's dispatcher: its HTTP status and the clicks it let through."""
    clicks: list[P2CardActionTrigger] = []

    def on_click(event: P2CardActionTrigger) -> P2CardActionTriggerResponse:
        clicks.append(event)
        return P2CardActionTriggerResponse({"toast": {"type": "success", "content": "ok"}})

    handler = (
        lark_oapi.EventDispatcherHandler.builder(
            keys.encrypt_key, keys.verification_token, level=lark_oapi.LogLevel.CRITICAL
        )
        .register_p2_card_action_trigger(on_click)
        .build()
    )
    raw = RawRequest()
    raw.uri, raw.headers, raw.body = "/im/callback/", dict(headers), body
    return handler.do(raw).status_code, clicks


def click(keys: AppKeys, request_id: Any, decision: str = "approve", **fields: Any) -> dict[str, Any]:
    return click_event(
        keys, request_id=str(request_id), decision=decision, open_id=fields.pop("open_id", APRIL), **fields
    )


def status_of(request: ConfirmationRequest) -> str:
    request.refresh_from_db()
    return request.status


# --- the SDK as oracle ---------------------------------------------------------------------------


def test_a_click_we_sign_and_encrypt_is_accepted_by_the_sdks_own_dispatcher(keys: AppKeys) -> None:
    event = click_event(
        keys, request_id="7f0c5b8e-0000-4000-8000-000000000001", decision="reject", open_id=APRIL
    )
    body, headers = signed_body(event, encrypt_key=keys.encrypt_key)

    assert json.loads(AESCipher(keys.encrypt_key).decrypt_str(json.loads(body)["encrypt"])) == event
    status, clicks = sdk_judges(keys, body, headers)
    assert status == 200
    [seen] = clicks
    assert seen.event.operator.open_id == APRIL
    assert seen.event.action.value == {
        "request_id": "7f0c5b8e-0000-4000-8000-000000000001",
        "decision": "reject",
    }
    assert seen.header.event_id == event["header"]["event_id"]


def _variant(name: str, keys: AppKeys, request_id: Any) -> tuple[bytes, dict[str, str]]:
    if name == "valid":
        return signed_body(click(keys, request_id), encrypt_key=keys.encrypt_key)
    if name == "wrong signature":
        body, headers = signed_body(click(keys, request_id), encrypt_key=keys.encrypt_key)
        return body, {**headers, "X-Lark-Signature": hashlib.sha256(b"forged" + body).hexdigest()}
    if name == "wrong token":
        return signed_body(click(keys, request_id, token="not-the-token"), encrypt_key=keys.encrypt_key)
    if name == "tampered body":
        body, headers = signed_body(click(keys, request_id), encrypt_key=keys.encrypt_key)
        raw = bytearray(base64.b64decode(json.loads(body)["encrypt"]))
        raw[40] ^= 0x01  # one bit of the second ciphertext block; the signature stays the old one
        return json.dumps({"encrypt": base64.b64encode(bytes(raw)).decode()}).encode(), headers
    if name == "wrong key":
        return signed_body(click(keys, request_id), encrypt_key="someone-elses-encrypt-key")
    raise AssertionError(name)


@pytest.mark.parametrize("variant", ["valid", "wrong signature", "wrong token", "tampered body", "wrong key"])
def test_our_endpoint_and_the_sdk_accept_and_refuse_the_same_callbacks(
    client: Client, keys: AppKeys, channel: ChannelConfig, pending: ConfirmationRequest, variant: str
) -> None:
    body, headers = _variant(variant, keys, pending.pk)

    sdk_status, sdk_clicks = sdk_judges(keys, body, headers)
    response = post(client, channel, body, headers)

    sdk_accepts = sdk_status == 200 and len(sdk_clicks) == 1
    we_accept = response.status_code == 200 and status_of(pending) == ConfirmationStatus.APPROVED
    assert sdk_accepts == we_accept == (variant == "valid")
    if variant != "valid":
        assert response.status_code == 401, response.content
        assert status_of(pending) == ConfirmationStatus.PENDING
        assert not pending.events.filter(kind=ConfirmationEvent.Kind.CLICK_REFUSED).exists()


# Well outside the 300 s window (a busy machine takes seconds between signing and checking): a
# test never sits on the window's edge.
@pytest.mark.parametrize("offset", [-400, -3600, 400, 86400])
def test_a_stale_or_future_timestamp_is_refused_although_the_sdk_does_not_check_it(
    client: Client, keys: AppKeys, channel: ChannelConfig, pending: ConfirmationRequest, offset: int
) -> None:
    body, headers = signed_body(
        click(keys, pending.pk), encrypt_key=keys.encrypt_key, timestamp=int(time.time()) + offset
    )

    sdk_status, sdk_clicks = sdk_judges(keys, body, headers)
    response = post(client, channel, body, headers)

    assert sdk_status == 200 and len(sdk_clicks) == 1, "the SDK has no timestamp window"
    assert response.status_code == 401
    assert "stale" in response.json()["error"]
    assert status_of(pending) == ConfirmationStatus.PENDING


def test_a_timestamp_inside_the_window_is_accepted(
    client: Client, keys: AppKeys, channel: ChannelConfig, pending: ConfirmationRequest
) -> None:
    body, headers = signed_body(
        click(keys, pending.pk), encrypt_key=keys.encrypt_key, timestamp=int(time.time()) - 150
    )

    assert post(client, channel, body, headers).status_code == 200
    assert status_of(pending) == ConfirmationStatus.APPROVED


@pytest.mark.parametrize(
    ("encrypted", "signed"), [(True, True), (True, False), (False, True), (False, False)]
)
def test_the_url_check_is_answered_with_its_challenge_like_the_sdk_does(
    client: Client, keys: AppKeys, channel: ChannelConfig, encrypted: bool, signed: bool
) -> None:
    body, headers = signed_body(
        url_check(keys, challenge="ch-42"), encrypt_key=keys.encrypt_key, encrypted=encrypted, signed=signed
    )

    response = post(client, channel, body, headers)

    assert response.status_code == 200 and response.json() == {"challenge": "ch-42"}
    sdk_status, _ = sdk_judges(keys, body, headers)
    assert sdk_status == 200


@pytest.mark.parametrize("encrypted", [True, False])
def test_a_url_check_with_the_wrong_token_is_refused_by_both(
    client: Client, keys: AppKeys, channel: ChannelConfig, encrypted: bool
) -> None:
    body, headers = signed_body(
        url_check(keys, token="not-the-token"), encrypt_key=keys.encrypt_key, encrypted=encrypted
    )

    assert post(client, channel, body, headers).status_code == 401
    assert sdk_judges(keys, body, headers)[0] != 200


# --- what we check beyond the SDK ----------------------------------------------------------------


def test_an_unsigned_click_is_refused_even_with_the_right_token(
    client: Client, keys: AppKeys, channel: ChannelConfig, pending: ConfirmationRequest
) -> None:
    body, headers = signed_body(click(keys, pending.pk), encrypt_key=keys.encrypt_key, signed=False)

    response = post(client, channel, body, headers)

    assert response.status_code == 401 and "unsigned" in response.json()["error"]
    assert status_of(pending) == ConfirmationStatus.PENDING


def _unpadded_ciphertext(encrypt_key: str) -> str:
    iv = os.urandom(16)
    cipher = AES.new(hashlib.sha256(encrypt_key.encode()).digest(), AES.MODE_CBC, iv)
    return base64.b64encode(iv + cipher.encrypt(b'{"a": 1}' + b"\x00" * 24)).decode()


def test_unsigned_bodies_are_refused_alike_so_their_padding_reveals_nothing(
    client: Client, keys: AppKeys, channel: ChannelConfig
) -> None:
    bodies = [
        json.dumps({"encrypt": _unpadded_ciphertext(keys.encrypt_key)}).encode(),
        json.dumps({"encrypt": "not base64!"}).encode(),
        signed_body({"schema": "2.0"}, encrypt_key=keys.encrypt_key, signed=False)[0],
        b"not json",
    ]

    answers = {(r.status_code, r.content) for r in (post(client, channel, body, {}) for body in bodies)}

    assert len(answers) == 1
    [(status, _)] = answers
    assert status == 401


@pytest.mark.parametrize(
    ("ciphertext", "why"),
    [
        ("not base64!", "not base64"),
        (base64.b64encode(b"short").decode(), "AES blocks"),
        (None, "padding"),
        ("", "AES blocks"),
    ],
)
def test_a_signed_body_that_cannot_be_decrypted_is_a_400(
    client: Client, keys: AppKeys, channel: ChannelConfig, ciphertext: str | None, why: str
) -> None:
    envelope = {"encrypt": _unpadded_ciphertext(keys.encrypt_key) if ciphertext is None else ciphertext}
    body, headers = signed_body(json.dumps(envelope).encode(), encrypt_key=keys.encrypt_key, encrypted=False)

    response = post(client, channel, body, headers)

    assert response.status_code == 400
    assert "undecryptable" in response.json()["error"] and why in response.json()["error"]


def test_a_signed_body_decrypting_to_something_other_than_json_is_a_400(
    client: Client, keys: AppKeys, channel: ChannelConfig
) -> None:
    body, headers = signed_body(b"\xff\xfe not json", encrypt_key=keys.encrypt_key)

    response = post(client, channel, body, headers)

    assert response.status_code == 400 and "not a JSON object" in response.json()["error"]


def _mutate(event: dict[str, Any], mutation: str) -> dict[str, Any]:
    if mutation == "unknown decision":
        event["event"]["action"]["value"]["decision"] = "maybe"
    elif mutation == "decision is an object":  # found by the fuzz test below: it once raised
        event["event"]["action"]["value"]["decision"] = {"approve": True}
    elif mutation == "no open_id":
        del event["event"]["operator"]["open_id"]
    elif mutation == "value is a string":
        event["event"]["action"]["value"] = json.dumps(event["event"]["action"]["value"])
    elif mutation == "request id is not a uuid":
        event["event"]["action"]["value"]["request_id"] = "42; DROP TABLE"
    elif mutation == "schema 1.0":
        event["schema"] = "1.0"
    elif mutation == "another event type":
        event["header"]["event_type"] = "im.message.receive_v1"
    elif mutation == "no event_id":
        event["header"]["event_id"] = ""
    return event


@pytest.mark.parametrize(
    ("mutation", "reason"),
    [
        ("unknown decision", "unknown decision 'maybe'"),
        ("decision is an object", "unknown decision \"{'approve': True}\""),
        ("no open_id", "no operator open_id"),
        ("value is a string", "names no approval request"),
        ("request id is not a uuid", "names no approval request"),
        ("schema 1.0", "schema 2.0"),
        ("another event type", "unsupported event type 'im.message.receive_v1'"),
        ("no event_id", "no event_id"),
    ],
)
def test_an_authentic_but_malformed_click_is_a_400_with_a_clear_reason_and_changes_nothing(
    client: Client,
    keys: AppKeys,
    channel: ChannelConfig,
    pending: ConfirmationRequest,
    mutation: str,
    reason: str,
) -> None:
    body, headers = signed_body(_mutate(click(keys, pending.pk), mutation), encrypt_key=keys.encrypt_key)

    response = post(client, channel, body, headers)

    assert response.status_code == 400 and reason in response.json()["error"]
    assert status_of(pending) == ConfirmationStatus.PENDING
    assert not pending.events.filter(kind=ConfirmationEvent.Kind.DECIDED).exists()


def test_a_malformed_click_naming_a_request_is_logged_on_it(
    client: Client, keys: AppKeys, channel: ChannelConfig, pending: ConfirmationRequest
) -> None:
    body, headers = signed_body(click(keys, pending.pk, decision="maybe"), encrypt_key=keys.encrypt_key)

    post(client, channel, body, headers)

    [refused] = pending.events.filter(kind=ConfirmationEvent.Kind.CLICK_REFUSED)
    assert refused.actor_external_id == APRIL and "unknown decision" in refused.details["reason"]


def test_a_click_for_another_feishu_app_is_refused(
    client: Client, keys: AppKeys, channel: ChannelConfig, pending: ConfirmationRequest
) -> None:
    event = click(keys, pending.pk)
    event["header"]["app_id"] = "cli_someone_else"
    body, headers = signed_body(event, encrypt_key=keys.encrypt_key)

    response = post(client, channel, body, headers)

    assert response.status_code == 401 and "another Feishu app" in response.json()["error"]
    assert status_of(pending) == ConfirmationStatus.PENDING


def test_a_channel_without_an_encrypt_key_refuses_every_click(
    client: Client, keys: AppKeys, channel: ChannelConfig, pending: ConfirmationRequest
) -> None:
    channel.secrets = {**channel.secrets, "encrypt_key": ""}
    channel.save()
    body, headers = signed_body(click(keys, pending.pk), encrypt_key=keys.encrypt_key, encrypted=False)

    response = post(client, channel, body, headers)

    assert response.status_code == 403 and "encrypt_key" in response.json()["error"]
    assert status_of(pending) == ConfirmationStatus.PENDING


def test_an_oversized_body_is_refused_unread(client: Client, keys: AppKeys, channel: ChannelConfig) -> None:
    body, headers = signed_body(b"x" * 100_000, encrypt_key=keys.encrypt_key, encrypted=False)

    assert post(client, channel, body, headers).status_code == 413


# --- fuzzing -------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=16,
)
header_text = st.text(max_size=80)


@st.composite
def clicks(draw: st.DrawFn, keys: AppKeys, *, plausible: bool) -> dict[str, Any]:
    """A click-shaped payload: ``plausible`` ones carry the right schema, token and event type, so
    that what follows the authentication is what gets fuzzed."""
    if plausible:
        schema, token, event_type, app_id = "2.0", keys.verification_token, "card.action.trigger", keys.app_id
        event_id: Any = draw(st.uuids()).hex
    else:
        schema = draw(st.sampled_from(["2.0", "1.0", 2]))
        token = draw(st.sampled_from([keys.verification_token, "wrong-token", ""]))
        event_type = draw(st.sampled_from(["card.action.trigger", "url_verification"]) | st.text())
        app_id = draw(st.sampled_from([keys.app_id, None]) | st.text(max_size=5))
        event_id = draw(st.text(max_size=30) | st.integers())
    value = st.fixed_dictionaries(
        {
            "request_id": st.uuids().map(str) | json_values,
            "decision": st.sampled_from(["approve", "reject"]) | json_values,
        }
    )
    event = st.fixed_dictionaries(
        {
            "operator": st.fixed_dictionaries({"open_id": st.text(min_size=1, max_size=40) | json_values}),
            "action": st.fixed_dictionaries({"value": value | json_values, "form_value": json_values}),
        }
    )
    return {
        "schema": schema,
        "header": {
            "event_id": event_id,
            "token": token,
            "event_type": event_type,
            "app_id": app_id,
        },
        "event": draw(event | json_values),
    }


@st.composite
def callbacks(draw: st.DrawFn, keys: AppKeys) -> tuple[bytes, dict[str, str]]:
    """Hostile callbacks: random bytes and headers, plausible shapes with random values, and bodies
    correctly signed with the channel's key (so the layers after the signature are reached too)."""
    shape = draw(
        st.sampled_from(
            ["bytes", "json", "envelope", "url check", "click", "plausible click", "plausible click"]
        )
    )
    if shape == "bytes":
        payload: Any = draw(st.binary(max_size=300))
    elif shape == "json":
        payload = draw(json_values)
    elif shape == "envelope":
        payload = {"encrypt": draw(st.text(max_size=120) | json_values)}
    elif shape == "url check":
        token = draw(st.sampled_from([keys.verification_token, "wrong-token"]))
        payload = {"type": "url_verification", "token": token, "challenge": draw(json_values)}
    else:
        payload = draw(clicks(keys, plausible=shape == "plausible click"))
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    how = draw(st.sampled_from(["raw", "signed", "encrypted and signed", "encrypted and signed"]))
    if how == "raw":
        optional = {
            "X-Lark-Signature": header_text | st.text("0123456789abcdef", min_size=64, max_size=64),
            "X-Lark-Request-Timestamp": header_text | st.integers(-(10**12), 10**13).map(str),
            "X-Lark-Request-Nonce": header_text,
        }
        return raw, draw(st.fixed_dictionaries({}, optional=optional))
    timestamp = int(time.time()) + draw(st.sampled_from([0, 0, 0, -1000, 1000]))
    return signed_body(raw, encrypt_key=keys.encrypt_key, encrypted=how != "signed", timestamp=timestamp)


def test_random_callbacks_never_cause_a_5xx_nor_change_anything(
    client: Client,
    keys: AppKeys,
    channel: ChannelConfig,
    pending: ConfirmationRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    events_before = pending.events.count()

    @settings(
        max_examples=200,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(callback=callbacks(keys))
    def post_it(callback: tuple[bytes, dict[str, str]]) -> None:
        body, headers = callback
        response = post(client, channel, body, headers)  # the test client re-raises any exception
        assert response.status_code < 500
        assert response.status_code in (200, 400, 401, 404, 413), response.content
        assert "toast" in response.json() or "error" in response.json() or "challenge" in response.json()

    with caplog.at_level(logging.ERROR):
        post_it()

    assert status_of(pending) == ConfirmationStatus.PENDING
    assert pending.events.count() == events_before
    # Hostile input is handled by the checks themselves, never by a catch-all after a crash.
    assert not [r for r in caplog.records if r.name.startswith("channels_im") and r.levelno >= logging.ERROR]
