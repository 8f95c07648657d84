"""When Redis does not answer, a request that needs it answers 503 with ``Retry-After`` — JSON for
the API, the portal's page for people — never a 500 or a traceback, and starts nothing."""

from __future__ import annotations

import pytest
import redis
from django.test import Client
from rest_framework.test import APIClient

from agents.models import Run
from tests.personas import make_agent


@pytest.fixture(autouse=True)
def redis_down(monkeypatch, settings):
    """Every count of a rate fails as a Redis that does not answer makes it fail."""
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"run_start": "100/min", "decision": "100/min"},
    }
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)

    def refuse(*args, **kwargs):
        raise redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr("fimone.rates.hit_all_or_none", refuse)


@pytest.mark.django_db
def test_the_api_answers_503_with_retry_after_and_starts_nothing(personas) -> None:
    agent = make_agent(personas.org, personas.operator)
    api = APIClient()
    api.force_login(personas.member)

    response = api.post(f"/api/agents/{agent.pk}/runs/", {"input": "hi"}, format="json")

    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json() == {
        "detail": "A service this request needs did not answer. Try again in a few seconds."
    }
    assert "127.0.0.1" not in response.content.decode()  # the error's text stays in the log
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_a_chat_page_answers_with_a_page_that_says_to_try_again(personas) -> None:
    agent = make_agent(personas.org, personas.operator)
    member = Client(raise_request_exception=False)
    member.force_login(personas.member)

    response = member.post(f"/agents/{agent.pk}/", {"message": "hello"})

    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "Briefly unavailable" in response.text
    assert "Try again in a few seconds." in response.text
    assert "Traceback" not in response.text and "ConnectionError" not in response.text
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_the_pages_own_script_gets_a_message_it_can_show(personas) -> None:
    agent = make_agent(personas.org, personas.operator)
    member = Client(raise_request_exception=False)
    member.force_login(personas.member)

    response = member.post(f"/agents/{agent.pk}/", {"message": "hello"}, HTTP_ACCEPT="application/json")

    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json() == {
        "ok": False,
        "accepted": False,
        "message": "A service this needs did not answer. Try again in a few seconds.",
    }
    assert Run.objects.count() == 0
