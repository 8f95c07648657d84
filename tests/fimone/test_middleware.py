"""Over ASGI, as Daphne serves them: sessions, CSRF and flash messages still work while the stock
middleware run in place on the event loop (fimone/middleware.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from approvals.models import ConfirmationRequest, ConfirmationStatus
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool, set_policy, suspended_run
from tests.fimone.asgi_kit import InPlaceAsyncClient as AsyncClient
from tests.personas import PASSWORD

# The handler's ORM calls run in other threads: they must see committed rows.
pytestmark = pytest.mark.django_db(transaction=True)

INBOX = "/approvals/"
LOGIN = "/approvals/login/"


@pytest.fixture
def pending(personas: Any, resumes: Any) -> ConfirmationRequest:
    set_policy(personas)
    return suspended_run(personas, Harness(pay_tool()))[1]


def csrf_token(page: str) -> str:
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert match, "the page carries no CSRF token"
    return match.group(1)


async def sign_in(client: AsyncClient, username: str) -> None:
    page = (await client.get(LOGIN)).content.decode()
    response = await client.post(
        LOGIN, {"username": username, "password": PASSWORD, "csrfmiddlewaretoken": csrf_token(page)}
    )
    assert response.status_code == 302 and response["Location"] == INBOX


async def test_an_approver_signs_in_over_asgi_and_her_session_carries_her_to_the_inbox(personas) -> None:
    client = AsyncClient(enforce_csrf_checks=True)

    await sign_in(client, "april")
    response = await client.get(INBOX)

    assert response.status_code == 200
    assert "april" in response.content.decode()
    assert client.cookies["sessionid"]["httponly"]


async def test_a_sign_in_without_its_csrf_token_is_refused_over_asgi(personas) -> None:
    client = AsyncClient(enforce_csrf_checks=True)

    response = await client.post(LOGIN, {"username": "april", "password": PASSWORD})

    assert response.status_code == 403
    assert (await client.get(INBOX)).status_code == 302  # still signed out


async def test_a_decision_over_asgi_needs_its_token_and_its_outcome_survives_the_redirect(
    personas, pending
) -> None:
    client = AsyncClient(enforce_csrf_checks=True)
    await sign_in(client, "april")
    decide = f"/approvals/{pending.pk}/decide/"

    forged = await client.post(decide, {"decision": "reject", "reason": "no"})
    assert forged.status_code == 403
    assert (await ConfirmationRequest.objects.aget(pk=pending.pk)).status == ConfirmationStatus.PENDING

    token = csrf_token((await client.get(INBOX)).content.decode())
    decided = await client.post(decide, {"decision": "reject", "reason": "no", "csrfmiddlewaretoken": token})
    assert decided.status_code == 302 and decided["Location"] == INBOX

    page = (await client.get(INBOX)).content.decode()
    assert "Rejected: Purchase pay" in page
    assert "Rejected: Purchase pay" not in (await client.get(INBOX)).content.decode()  # shown once
    assert (await ConfirmationRequest.objects.aget(pk=pending.pk)).status == ConfirmationStatus.REJECTED


async def test_signing_out_over_asgi_ends_the_session(personas) -> None:
    client = AsyncClient(enforce_csrf_checks=True)
    await sign_in(client, "april")
    token = csrf_token((await client.get(INBOX)).content.decode())

    response = await client.post("/approvals/logout/", {"csrfmiddlewaretoken": token})

    assert response.status_code == 302
    assert (await client.get(INBOX))["Location"].startswith(LOGIN)
