"""The chat pages start runs and decide under the same per-user rates as the REST API: past
``RUN_START_RATE`` or ``DECISION_RATE`` they answer 429 with a clear message and ``Retry-After``,
and nothing is started or decided."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from agents.models import Run, RunStatus
from approvals.models import ConfirmationEvent, ConfirmationStatus
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool, set_policy, suspended_run
from tests.personas import make_agent

JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture(autouse=True)
def _no_dispatch(monkeypatch):
    """Runs started by the pages are created, not executed."""
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)


@pytest.fixture
def rates(settings) -> None:
    """Two run starts and two decisions a minute per user."""
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"run_start": "2/min", "decision": "2/min"},
    }


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def api_as(user: Any) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def assert_retry_after(response: Any) -> None:
    assert 1 <= int(response["Retry-After"]) <= 60


@pytest.mark.django_db
def test_it_refuses_a_new_conversation_past_the_run_start_rate_shared_with_the_api(personas, rates) -> None:
    agent = make_agent(personas.org, personas.operator)
    api = api_as(personas.member)
    for n in range(2):
        assert (
            api.post(f"/api/agents/{agent.pk}/runs/", {"input": f"hi {n}"}, format="json").status_code == 201
        )

    response = signed_in(personas.member).post(f"/agents/{agent.pk}/", {"message": "one too many"})

    assert response.status_code == 429
    assert_retry_after(response)
    assert "Not sent: Too many runs started: the limit is 2 per minute." in response.text
    assert "Nothing was started" in response.text and "one too many" in response.text  # kept in the form
    assert Run.objects.count() == 2


@pytest.mark.django_db
def test_it_refuses_a_next_message_past_the_run_start_rate_and_counts_per_user(personas, rates) -> None:
    agent = make_agent(personas.org, personas.operator)
    member = signed_in(personas.member)
    for n in range(2):
        assert member.post(f"/agents/{agent.pk}/", {"message": f"hi {n}"}).status_code == 302
    conversation = Run.objects.order_by("pk").first().conversation
    Run.objects.update(status=RunStatus.COMPLETED)

    response = member.post(f"/conversations/{conversation.pk}/", {"message": "and then?"})

    assert response.status_code == 429
    assert_retry_after(response)
    assert "Too many runs started: the limit is 2 per minute." in response.text
    assert "Your message was not sent" in response.text
    assert conversation.runs.count() == 1
    # What they wrote is kept in a form that sends it to the same conversation again.
    assert f'action="/conversations/{conversation.pk}/"' in response.text
    assert (
        '<textarea id="message" name="message"' in response.text and ">and then?</textarea>" in response.text
    )
    other = signed_in(personas.approver).post(f"/agents/{agent.pk}/", {"message": "mine"})
    assert other.status_code == 302, "another user has a count of their own"


@pytest.mark.django_db(transaction=True)
def test_it_refuses_chat_page_decisions_past_the_rate_shared_with_the_api_and_decides_nothing(
    personas, resumes, rates
) -> None:
    set_policy(personas)
    _run, request = suspended_run(personas, Harness(pay_tool()))
    api = api_as(personas.approver)
    for _ in range(2):  # decisions on requests that do not exist count all the same
        missing = "00000000-0000-0000-0000-000000000000"
        assert api.post(f"/api/approvals/{missing}/decision/", {"decision": "approve"}).status_code == 404
    page = signed_in(personas.approver)

    scripted = page.post(f"/requests/{request.pk}/decide/", {"decision": "approve"}, **JSON)
    plain = page.post(f"/requests/{request.pk}/decide/", {"decision": "approve"})

    assert scripted.status_code == 429
    assert_retry_after(scripted)
    answer = scripted.json()
    assert answer["accepted"] is False and answer["status"] == "throttled"
    assert answer["message"].startswith("Too many decisions: the limit is 2 per minute. Nothing was decided;")
    assert plain.status_code == 429 and "Too many decisions" in plain.text
    assert_retry_after(plain)
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING
    assert not request.events.filter(kind=ConfirmationEvent.Kind.DECIDED).exists()
    assert resumes.run_ids == []
