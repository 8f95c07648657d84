"""Every request body parsed as JSON answers a clear 4xx for hostile JSON, never a 500, and changes
nothing: the REST API (DRF's parser), JSON held in values (the inbox's edited arguments, an eval's
expected JSON, a model's output compared as JSON), the IM callback URL (Slack and Feishu), the demo
payments service, and the shared parser itself."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from agents.models import Run
from approvals.models import ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from channels_im.models import ImIdentity
from demo_payments.models import Purchase
from demo_payments.services import purchase_seed_demo
from fimone.parsers import MAX_JSON_DEPTH, InvalidJSON, check_depth, loads
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool, set_policy, suspended_run
from tests.channels_im import feishu_fake
from tests.channels_im.slack_fake import FakeSlack, signed_headers
from tests.personas import make_agent

DEPTH = 100_000
DEEP_ARRAY = "[" * DEPTH + "]" * DEPTH
DEEP_OBJECT = '{"a":' * DEPTH + "1" + "}" * DEPTH
UNBALANCED = "[" * DEPTH
JUST_TOO_DEEP = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)  # json itself parses this
HOSTILE_BODIES = {
    "deep-array": DEEP_ARRAY,
    "deep-object": DEEP_OBJECT,
    "unbalanced": UNBALANCED,
    "over-the-limit": JUST_TOO_DEEP,
}


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


# --- the parser ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", HOSTILE_BODIES.values(), ids=HOSTILE_BODIES.keys())
def test_it_refuses_deeply_nested_json_with_a_value_error_not_a_recursion_error(text: str) -> None:
    with pytest.raises(InvalidJSON, match=f"nested more than {MAX_JSON_DEPTH} levels deep"):
        loads(text)


def test_it_parses_json_up_to_the_depth_limit() -> None:
    assert loads(json.dumps(nested(MAX_JSON_DEPTH - 1))) == nested(MAX_JSON_DEPTH - 1)
    assert loads(b'{"amount": 12.5}') == {"amount": 12.5}


def test_it_refuses_what_is_not_json_without_quoting_it() -> None:
    with pytest.raises(InvalidJSON) as refused:
        loads('{"secret": "sk-do-not-echo"')
    assert "sk-do-not-echo" not in str(refused.value)
    with pytest.raises(InvalidJSON, match="UnicodeDecodeError"):
        loads(b"\xff\xfe\xfa")


def test_its_depth_check_counts_objects_and_arrays_and_stops_at_the_limit() -> None:
    check_depth({"a": [{"b": [1]}]}, limit=4)
    with pytest.raises(InvalidJSON):
        check_depth({"a": [{"b": [1]}]}, limit=3)
    check_depth(nested(10_000), limit=20_000)  # iterative: no RecursionError of its own


# --- the REST API --------------------------------------------------------------------------------


def api_as(user: Any) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


@pytest.mark.django_db
@pytest.mark.parametrize("body", HOSTILE_BODIES.values(), ids=HOSTILE_BODIES.keys())
def test_starting_a_run_with_a_deeply_nested_body_answers_400_and_starts_nothing(
    personas, monkeypatch: pytest.MonkeyPatch, body: str
) -> None:
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    agent = make_agent(personas.org, personas.operator)

    response = api_as(personas.member).post(
        f"/api/agents/{agent.pk}/runs/", data=body, content_type="application/json"
    )

    assert response.status_code == 400
    assert response.json()["detail"] == f"JSON parse error - nested more than {MAX_JSON_DEPTH} levels deep"
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_an_ordinary_run_start_still_parses(personas, monkeypatch) -> None:
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    agent = make_agent(personas.org, personas.operator)

    response = api_as(personas.member).post(
        f"/api/agents/{agent.pk}/runs/", data={"input": "hello"}, format="json"
    )

    assert response.status_code == 201, response.content
    assert Run.objects.get().input == "hello"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("body", [DEEP_ARRAY, DEEP_OBJECT], ids=["deep-array", "deep-object"])
def test_deciding_with_a_deeply_nested_body_answers_400_and_decides_nothing(
    personas, resumes, body: str
) -> None:
    set_policy(personas)
    _, request = suspended_run(personas, Harness(pay_tool()))

    for user in (personas.approver, personas.stranger):
        response = api_as(user).post(
            f"/api/approvals/{request.pk}/decision/", data=body, content_type="application/json"
        )
        assert response.status_code == 400, user.username
        assert "nested more than" in response.json()["detail"]

    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING and request.responded_by_id is None
    assert not request.events.filter(kind=ConfirmationEvent.Kind.DECIDED).exists()
    assert resumes.run_ids == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "body",
    ["[" * 20_000 + "]" * 20_000, JUST_TOO_DEEP],  # the field holds 100,000 characters at most
    ids=["deep-array", "over-the-limit"],
)
def test_deciding_in_the_inbox_with_deeply_nested_edited_arguments_decides_nothing(
    personas, resumes, body: str
) -> None:
    set_policy(personas, allow_edit_on_approve=True)
    _, request = suspended_run(personas, Harness(pay_tool()))
    inbox = Client()
    inbox.force_login(personas.approver)

    page = inbox.post(
        f"/approvals/{request.pk}/decide/", {"decision": "approve", "arguments": body}, follow=True
    )

    assert page.status_code == 200
    assert f"The arguments cannot be read: nested more than {MAX_JSON_DEPTH} levels deep." in page.text
    assert_undecided(request)
    assert resumes.run_ids == []


# --- JSON inside values ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_eval_set_whose_expected_json_nests_too_deep_answers_400_and_creates_nothing(personas) -> None:
    from evals.models import EvalSet

    cases = [{"input": "hi", "expectation": "json_equals", "expected": "[" * 5000 + "]" * 5000}]

    response = api_as(personas.operator).post(
        "/api/eval-sets/", {"organization": personas.org.pk, "name": "G", "cases": cases}, format="json"
    )

    assert response.status_code == 400
    assert f"case 1: not valid JSON: nested more than {MAX_JSON_DEPTH} levels deep" in response.text
    assert not EvalSet.objects.exists()


def test_a_model_output_nested_too_deep_fails_a_json_check_and_is_compared_as_text() -> None:
    from evals.grading import grade
    from workflows.graph import condition_holds

    deep = "[" * 5000 + "]" * 5000

    assert grade("json_equals", "[]", deep) == (False, "the output is not JSON")
    assert condition_holds({"operator": "equals", "value": "[]"}, deep) is False
    assert condition_holds({"operator": "equals", "value": deep}, deep) is True


# --- IM callbacks --------------------------------------------------------------------------------


def assert_undecided(request: ConfirmationRequest) -> None:
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING and request.responded_by_id is None
    assert not request.events.filter(kind=ConfirmationEvent.Kind.DECIDED).exists()


@pytest.mark.django_db
def test_a_signed_slack_callback_with_a_deeply_nested_payload_is_refused_as_malformed(
    personas, resumes
) -> None:
    with FakeSlack() as slack:
        config = slack.channel_config(personas.org, is_default=True)
        set_policy(personas)
        _, request = suspended_run(personas, Harness(pay_tool()))
        ImIdentity.objects.create(
            organization=personas.org, user=personas.approver, provider="slack", external_id="U0APRIL"
        )
        url = f"/im/callback/{config.callback_key}/"
        body = urlencode({"payload": DEEP_ARRAY}, quote_via=quote).encode()
        form = "application/x-www-form-urlencoded"

        signed = Client().post(url, data=body, content_type=form, headers=signed_headers(body))
        unsigned = Client().post(url, data=body, content_type=form)

    assert signed.status_code == 400
    assert signed.json()["error"] == 'expected a form field "payload" holding JSON'
    assert unsigned.status_code == 401
    assert_undecided(request)


@pytest.mark.django_db
def test_a_signed_feishu_callback_with_a_deeply_nested_body_is_refused(personas, resumes) -> None:
    keys = feishu_fake.AppKeys.generate()
    config = feishu_fake.configure_channel(personas.org, keys=keys)
    set_policy(personas)
    _, request = suspended_run(personas, Harness(pay_tool()))
    url = reverse("im-callback", args=[config.callback_key])

    def post(payload: bytes, *, encrypted: bool) -> Any:
        body, headers = feishu_fake.signed_body(payload, encrypt_key=keys.encrypt_key, encrypted=encrypted)
        return Client().post(url, data=body, content_type="application/json", headers=headers)

    # 100,000 levels are over the callback size limit; 20,000 fit, encrypted, and still recurse.
    assert post(DEEP_ARRAY.encode(), encrypted=False).status_code == 413
    assert post(("[" * 20_000 + "]" * 20_000).encode(), encrypted=True).status_code == 400
    assert post(('{"a":' * 10_000 + "1" + "}" * 10_000).encode(), encrypted=False).status_code == 400
    assert post(JUST_TOO_DEEP.encode(), encrypted=True).status_code == 400
    assert_undecided(request)


# --- the demo payments service -------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("body", HOSTILE_BODIES.values(), ids=HOSTILE_BODIES.keys())
def test_paying_with_a_deeply_nested_body_answers_400_and_pays_nothing(body: str) -> None:
    purchase_seed_demo()

    response = Client().post(
        "/demo/api/purchases/PO-1001/pay",
        data=body,
        content_type="application/json",
        headers={"X-Demo-Token": settings.DEMO_PAYMENTS_TOKEN},
    )

    assert response.status_code == 400
    assert response.json() == {
        "error": "bad_request",
        "detail": f"the body must be JSON: nested more than {MAX_JSON_DEPTH} levels deep",
    }
    assert Purchase.objects.get(pk="PO-1001").status == Purchase.Status.PENDING
