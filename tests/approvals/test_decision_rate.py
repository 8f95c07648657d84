"""Decisions are rate-limited per user, one count shared by the REST API and the web inbox: past
the rate both answer 429 with a clear message and Retry-After, and nothing is decided."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from rest_framework.test import APIClient

from approvals.apis import DecisionThrottle
from approvals.models import ConfirmationRequest, ConfirmationStatus
from fimone import rates
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool, set_policy, suspended_run

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = int(settings.DECISION_RATE.split("/")[0])


def api_as(user: Any) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def pending_request(personas: Any) -> ConfirmationRequest:
    set_policy(personas)
    return suspended_run(personas, Harness(pay_tool()))[1]


def use_up_the_rate(client: APIClient) -> None:
    """``LIMIT`` decisions (on requests that do not exist: they count all the same)."""
    for _ in range(LIMIT):
        response = client.post(f"/api/approvals/{uuid.uuid4()}/decision/", {"decision": "approve"})
        assert response.status_code == 404


def test_it_refuses_api_decisions_over_the_rate_and_decides_nothing(personas, resumes) -> None:
    request = pending_request(personas)
    client = api_as(personas.approver)
    use_up_the_rate(client)

    response = client.post(f"/api/approvals/{request.pk}/decision/", {"decision": "approve"})

    assert response.status_code == 429
    assert response.json()["detail"].startswith(f"Too many decisions: the limit is {LIMIT} per minute.")
    assert 1 <= int(response["Retry-After"]) <= 60
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING


def test_it_refuses_inbox_decisions_past_the_rate_shared_with_the_api(personas, resumes) -> None:
    request = pending_request(personas)
    use_up_the_rate(api_as(personas.approver))
    inbox = Client()
    inbox.force_login(personas.approver)

    response = inbox.post(f"/approvals/{request.pk}/decide/", {"decision": "approve"})

    assert response.status_code == 429
    page = response.content.decode()
    assert "Too many decisions: the limit is" in page and "Nothing was decided" in page
    assert 1 <= int(response["Retry-After"]) <= 60
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING


def test_it_counts_decisions_per_user(personas, resumes) -> None:
    request = pending_request(personas)
    use_up_the_rate(api_as(personas.approver))
    assert api_as(personas.stranger).post(f"/api/approvals/{uuid.uuid4()}/decision/", {}).status_code == 400

    inbox = Client()
    inbox.force_login(personas.admin)  # an organisation admin may decide too, with a count of her own
    response = inbox.post(f"/approvals/{request.pk}/decide/", {"decision": "reject", "reason": "no"})

    assert response.status_code == 302
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.REJECTED and request.responded_by == personas.admin


def test_it_decides_from_the_inbox_under_the_rate(personas, resumes) -> None:
    request = pending_request(personas)
    inbox = Client()
    inbox.force_login(personas.approver)

    response = inbox.post(f"/approvals/{request.pk}/decide/", {"decision": "approve"})

    assert response.status_code == 302
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.APPROVED


def test_after_the_retry_after_it_answered_a_refused_user_may_decide_again(
    personas, resumes, settings, rate_clock
) -> None:
    """Two decisions a second (a sliding second): the third is refused with ``Retry-After``, and
    once that has passed a decision goes through; the refused ones did not push it back."""
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "decision": "2/s"},
    }
    client = api_as(personas.approver)

    def decide() -> Any:
        return client.post(f"/api/approvals/{uuid.uuid4()}/decision/", {"decision": "approve"})

    assert [decide().status_code for _ in range(2)] == [404, 404]
    refused = [decide() for _ in range(2)]
    assert [response.status_code for response in refused] == [429, 429]
    assert refused[0].json()["detail"].startswith("Too many decisions: the limit is 2 per second.")
    wait = int(refused[-1]["Retry-After"])
    assert wait == 1
    rate_clock.pass_(wait)

    assert decide().status_code == 404


def test_a_count_on_the_event_loop_shares_the_users_count(personas) -> None:
    """A card click decided on the server's event loop counts against the same rate as the
    user's requests (with Redis through a client of the loop's own, without it in memory)."""

    async def on_a_loop(user_id: int) -> Any:
        try:
            return await DecisionThrottle().refusal_for_user_async(user_id)
        finally:
            await rates.close_async()

    use_up_the_rate(api_as(personas.approver))

    refused = asyncio.run(on_a_loop(personas.approver.pk))

    assert refused.message == f"Too many decisions: the limit is {LIMIT} per minute."
    assert 1 <= refused.wait <= 60
    assert asyncio.run(on_a_loop(personas.admin.pk)) is None, "another user has a count of their own"
