"""Slack clicks are verified before they are parsed (docs/design.md §1.7).

Requests are signed by slack_sdk's own ``SignatureVerifier`` and posted to the real callback
endpoint; for every variant the SDK's ``is_valid_request`` (on a clock we set) must agree with us.
Whatever is refused changes nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from django.http import HttpResponse
from django.test import Client
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from slack_sdk.signature import Clock, SignatureVerifier

from approvals.models import ChannelConfig, ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from channels_im.models import ImIdentity
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool, set_policy, suspended_run
from tests.channels_im.slack_fake import (
    SIGNING_SECRET,
    FakeSlack,
    click_body,
    click_payload,
    signed_headers,
)

APRIL = "U0APRIL"
Kind = ConfirmationEvent.Kind


@dataclass
class World:
    config: ChannelConfig
    request: ConfirmationRequest

    def post(self, body: bytes, headers: dict[str, str]) -> HttpResponse:
        return Client().post(
            f"/im/callback/{self.config.callback_key}/",
            data=body,
            content_type="application/x-www-form-urlencoded",
            headers=headers,
        )

    def click(self, **payload: Any) -> bytes:
        payload.setdefault("request_id", str(self.request.pk))
        payload.setdefault("user_id", APRIL)
        return click_body(**payload)

    def assert_unchanged(self) -> None:
        self.request.refresh_from_db()
        assert self.request.status == ConfirmationStatus.PENDING and self.request.responded_by_id is None
        assert not self.request.events.filter(kind=Kind.DECIDED).exists()


@pytest.fixture
def world(personas, resumes) -> Iterator[World]:
    """A pending request sent to a Slack channel, and April mapped to her Slack user id."""
    with FakeSlack() as slack:
        config = slack.channel_config(personas.org, is_default=True)
        set_policy(personas)
        _, request = suspended_run(personas, Harness(pay_tool()))
        ImIdentity.objects.create(
            organization=personas.org, user=personas.approver, provider="slack", external_id=APRIL
        )
        yield World(config, request)


class FixedClock(Clock):
    def __init__(self, now: float) -> None:
        self._now = now

    def now(self) -> float:
        return self._now


Variant = Callable[[World, int], tuple[bytes, dict[str, str]]]


def _signed(ts_offset: int) -> Variant:
    def build(world: World, now: int) -> tuple[bytes, dict[str, str]]:
        body = world.click()
        return body, signed_headers(body, timestamp=now + ts_offset)

    return build


def _altered_body(world: World, now: int) -> tuple[bytes, dict[str, str]]:
    signed = world.click(action_id="reject", action_ts="1700000000.000001")
    sent = world.click(action_id="approve", action_ts="1700000000.000001")
    return sent, signed_headers(signed, timestamp=now)


def _wrong_secret(world: World, now: int) -> tuple[bytes, dict[str, str]]:
    body = world.click()
    return body, signed_headers(body, secret="not-the-signing-secret", timestamp=now)


def _without(header: str) -> Variant:
    def build(world: World, now: int) -> tuple[bytes, dict[str, str]]:
        body = world.click()
        headers = signed_headers(body, timestamp=now)
        del headers[header]
        return body, headers

    return build


def _signed_for_another_time(world: World, now: int) -> tuple[bytes, dict[str, str]]:
    body = world.click()
    headers = signed_headers(body, timestamp=now - 10)
    return body, {**headers, "X-Slack-Request-Timestamp": str(now)}


def _bare_hex_signature(world: World, now: int) -> tuple[bytes, dict[str, str]]:
    body = world.click()
    headers = signed_headers(body, timestamp=now)
    return body, {**headers, "X-Slack-Signature": headers["X-Slack-Signature"].removeprefix("v0=")}


@pytest.mark.parametrize(
    ("build", "accepted", "reason"),
    [
        pytest.param(_signed(0), True, "", id="signed-now"),
        pytest.param(_signed(-200), True, "", id="signed-200s-ago"),
        pytest.param(_signed(+200), True, "", id="signed-200s-ahead"),
        pytest.param(_signed(-400), False, "stale request", id="stale"),
        pytest.param(_signed(+400), False, "in the future", id="future"),
        pytest.param(_altered_body, False, "invalid X-Slack-Signature", id="altered-body"),
        pytest.param(_wrong_secret, False, "invalid X-Slack-Signature", id="wrong-secret"),
        pytest.param(_signed_for_another_time, False, "invalid X-Slack-Signature", id="other-timestamp"),
        pytest.param(_bare_hex_signature, False, "invalid X-Slack-Signature", id="no-v0-prefix"),
        pytest.param(_without("X-Slack-Signature"), False, "missing", id="no-signature"),
        pytest.param(_without("X-Slack-Request-Timestamp"), False, "missing", id="no-timestamp"),
    ],
)
def test_we_accept_exactly_the_requests_slack_sdk_considers_valid(
    world: World, build: Variant, accepted: bool, reason: str
) -> None:
    now = int(time.time())
    body, headers = build(world, now)

    response = world.post(body, headers)
    sdk_says_valid = SignatureVerifier(SIGNING_SECRET, clock=FixedClock(now)).is_valid_request(body, headers)

    assert sdk_says_valid is accepted
    if accepted:
        assert response.status_code == 200 and response.json()["replace_original"] is True
        world.request.refresh_from_db()
        assert world.request.status == ConfirmationStatus.APPROVED
        assert world.request.responded_by_external_id == APRIL
    else:
        assert response.status_code == 401
        assert reason in response.json()["error"]
        world.assert_unchanged()


@pytest.mark.parametrize("timestamp", ["", "12.5", "1e9", "-5", " 1700000000", "0x10", "١٢٣"])
def test_a_timestamp_that_is_not_a_plain_integer_is_refused(world: World, timestamp: str) -> None:
    body = world.click()
    headers = {**signed_headers(body), "X-Slack-Request-Timestamp": timestamp}

    response = world.post(body, headers)

    assert response.status_code == 401
    world.assert_unchanged()


def test_a_channel_without_a_signing_secret_verifies_nothing(world: World) -> None:
    world.config.secrets = {"bot_token": "xoxb-x"}
    world.config.save()
    body = world.click()

    response = world.post(body, signed_headers(body))

    assert response.status_code == 401 and "signing secret" in response.json()["error"]
    world.assert_unchanged()


def _form(payload: Any) -> bytes:
    return urlencode({"payload": json.dumps(payload)}, quote_via=quote).encode()


def _click_with(world: World, **changes: Any) -> dict[str, Any]:
    """World's click payload with ``changes`` (``a__0__b`` reaches into nested parts; ``None``
    removes the key)."""
    payload = click_payload(request_id=str(world.request.pk), user_id=APRIL)
    for path, value in changes.items():
        target: Any = payload
        *parents, leaf = path.split("__")
        for parent in parents:
            target = target[int(parent)] if isinstance(target, list) else target[parent]
        if value is None:
            del target[leaf]
        else:
            target[leaf] = value
    return payload


@pytest.mark.parametrize(
    ("make_body", "reason"),
    [
        pytest.param(lambda w: b'{"type": "block_actions"}', "payload", id="json-not-form"),
        pytest.param(lambda w: b"payload=not-json", "payload", id="payload-not-json"),
        pytest.param(lambda w: b"other=1", "payload", id="no-payload-field"),
        pytest.param(lambda w: b"payload=%ff%fe", "payload", id="not-utf8"),
        pytest.param(lambda w: _form([1, 2]), "JSON object", id="payload-not-object"),
        pytest.param(lambda w: _form(_click_with(w, type="view_submission")), "unsupported", id="other-type"),
        pytest.param(lambda w: _form(_click_with(w, user=None)), "user.id", id="no-user"),
        pytest.param(
            lambda w: _form(_click_with(w, user={"id": "U0\x00APRIL"})), "user.id", id="nul-in-user-id"
        ),
        pytest.param(lambda w: _form(_click_with(w, actions=[])), "no actions", id="no-actions"),
        pytest.param(
            lambda w: _form(_click_with(w, actions__0__action_id="delete")), "unknown action", id="bad-action"
        ),
        pytest.param(
            lambda w: _form(_click_with(w, actions__0__value="PO-1001")), "request id", id="bad-value"
        ),
        pytest.param(
            lambda w: _form(_click_with(w, actions__0__action_ts=None)), "action_ts", id="no-action-ts"
        ),
    ],
)
def test_a_signed_but_malformed_callback_is_refused_with_a_clear_reason(
    world: World, make_body: Callable[[World], bytes], reason: str
) -> None:
    body = make_body(world)

    response = world.post(body, signed_headers(body))

    assert response.status_code == 400
    assert reason in response.json()["error"]
    world.assert_unchanged()


def test_a_verified_click_on_an_unknown_request_finds_nothing(world: World) -> None:
    body = world.click(request_id="00000000-0000-4000-8000-000000000000")

    response = world.post(body, signed_headers(body))

    assert response.status_code == 404
    world.assert_unchanged()


# --- fuzzing -------------------------------------------------------------------------------------

SIGN = "<sign correctly>"

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=16),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=16,
)


def _mostly(valid: st.SearchStrategy[Any], other: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` three times in four: a click with one part wrong reaches the deepest checks."""
    return st.sampled_from([True, True, True, False]).flatmap(lambda keep: valid if keep else other)


# Clicks by users nobody mapped (April's id is never drawn), on our request or on others.
_clicks = st.fixed_dictionaries(
    {
        "type": _mostly(st.just("block_actions"), st.text(max_size=12)),
        "user": _mostly(
            st.fixed_dictionaries(
                {"id": _mostly(st.from_regex(r"[UW][A-Z0-9]{2,10}", fullmatch=True), st.text(max_size=12))}
            ),
            _json,
        ).filter(lambda user: not isinstance(user, dict) or user.get("id") != APRIL),
        "actions": st.lists(
            _mostly(
                st.fixed_dictionaries(
                    {
                        "action_id": _mostly(st.sampled_from(["approve", "reject"]), st.text(max_size=8)),
                        "value": _mostly(st.just("<request id>"), st.uuids().map(str) | st.text(max_size=40)),
                        "action_ts": _mostly(st.floats(0, 2e9).map("{:.6f}".format), st.text(max_size=20)),
                    }
                ),
                _json,
            ),
            min_size=1,
            max_size=2,
        ),
    }
)
_bodies = st.one_of(
    _clicks.map(_form),
    _clicks.map(_form),
    _json.map(_form),
    st.binary(max_size=600),
    st.text(max_size=300).map(str.encode),
)
_timestamps = st.none() | st.integers(min_value=-1000, max_value=1000) | st.text(max_size=14)
"""Seconds from now (an int), or any text, or no header."""
_signatures = st.none() | st.just(SIGN) | st.text(max_size=80) | st.just("v0=" + "0" * 64)


def _sign(body: bytes, timestamp: str) -> str:
    try:
        return signed_headers(body, timestamp=timestamp)["X-Slack-Signature"]
    except UnicodeDecodeError:
        # slack_sdk signs text only; Slack signs the raw bytes, so do that for binary bodies.
        base = f"v0:{timestamp}:".encode() + body
        return "v0=" + hmac.new(SIGNING_SECRET.encode(), base, hashlib.sha256).hexdigest()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=_bodies,
    signed_now=_mostly(st.just(True), st.just(False)),
    timestamp=_timestamps,
    signature=_signatures,
)
def test_random_bodies_and_headers_never_answer_5xx_or_change_anything(
    world: World, resumes, body: bytes, signed_now: bool, timestamp: int | str | None, signature: str | None
) -> None:
    # Three examples in four are signed correctly, now, so that most get past the signature check
    # and exercise the parser and the decision path behind it; the rest carry drawn headers.
    body = body.replace(b"%3Crequest%20id%3E", str(world.request.pk).encode())
    now = int(time.time())
    if signed_now:
        timestamp, signature = str(now), SIGN
    elif isinstance(timestamp, int):
        timestamp = str(now + timestamp)
    headers: dict[str, str] = {}
    if timestamp is not None:
        headers["X-Slack-Request-Timestamp"] = timestamp
    if signature == SIGN:
        signature = _sign(body, timestamp or str(now))
    if signature is not None:
        headers["X-Slack-Signature"] = signature

    response = world.post(body, headers)

    # --hypothesis-show-statistics lists which answers (so which code paths) the examples reached.
    event(f"HTTP {response.status_code}: {response.json().get('error', 'answered on the card')[:40]}")
    assert response.status_code < 500
    world.assert_unchanged()
    assert resumes.run_ids == []
