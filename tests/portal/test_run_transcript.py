"""Approvers and auditors see the run behind a request: a read-only transcript with the chat
page's renderer, and its live stream — for the request's approvers, its requester and the
organisation's auditors and admins; a 404 page for anyone else."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client

from agents.models import Run
from agents.services import run_start
from approvals.models import ConfirmationRequest
from fimone.asgi import application
from tenancy.models import Membership
from tests.agents.engine_kit import Harness
from tests.agents.test_stream import session_cookie
from tests.approvals.kit import pay_tool, set_policy, suspended_run
from tests.personas import make_agent, make_user

pytestmark = pytest.mark.django_db(transaction=True)

ALLOWED = ["approver", "admin", "member", "auditor"]
"""april and adam (org approvers), alice (who asked), aude (auditor); not oscar, the agent's owner,
who is no approver (docs/design.md §1.13)."""


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def parked(personas, resumes) -> tuple[Run, ConfirmationRequest]:
    set_policy(personas)
    return suspended_run(personas, Harness(pay_tool()))


def turns_of(page: str) -> list[dict]:
    found = re.search(r'<script id="turns-data" type="application/json">(.*?)</script>', page, re.S)
    assert found, "the page embeds the run's events"
    return json.loads(found.group(1))


@pytest.mark.parametrize("who", ALLOWED)
def test_the_run_behind_a_request_is_readable_by_its_approvers_requester_and_auditors(
    personas, parked, who
) -> None:
    run, request = parked

    response = signed_in(getattr(personas, who)).get(f"/runs/{run.pk}/")

    assert response.status_code == 200
    page = response.content.decode()
    [turn] = turns_of(page)
    assert turn["id"] == run.pk
    assert "approval.pending" in [e["type"] for e in turn["events"]]
    assert f"/approvals/{request.pk}/" in page, "the transcript links its request"
    assert 'id="composer"' not in page, "read-only: nobody writes to someone else's run from here"


def test_it_refuses_the_run_to_a_colleague_another_organisation_and_unknown_ids(personas, parked) -> None:
    run, _ = parked
    colleague = make_user("bob", personas.org)

    for user in (colleague, personas.stranger):
        response = signed_in(user).get(f"/runs/{run.pk}/")
        assert response.status_code == 404, user.username
        assert "Page not found" in response.content.decode()
        assert "oa__purchase_pay" not in response.content.decode()
    assert signed_in(personas.approver).get(f"/runs/{run.pk + 1000}/").status_code == 404


def test_it_refuses_the_run_to_an_approver_who_left_the_organisation(personas, parked) -> None:
    run, _ = parked
    Membership.objects.filter(user=personas.approver, organization=personas.org).delete()

    assert signed_in(personas.approver).get(f"/runs/{run.pk}/").status_code == 404


def test_it_refuses_a_run_without_a_request_to_everyone_but_its_owner(personas, resumes) -> None:
    run = run_start(agent=make_agent(personas.org, personas.operator), user=personas.member, input="hi")

    assert signed_in(personas.member).get(f"/runs/{run.pk}/").status_code == 200
    for user in (personas.auditor, personas.approver, personas.admin):
        assert signed_in(user).get(f"/runs/{run.pk}/").status_code == 404, user.username


def test_it_offers_decision_controls_only_to_who_may_decide(personas, parked) -> None:
    run, request = parked

    def decidable(user: Any) -> list[str]:
        return turns_of(signed_in(user).get(f"/runs/{run.pk}/").content.decode())[0]["decidable"]

    assert decidable(personas.approver) == [str(request.pk)]
    assert decidable(personas.auditor) == []
    assert decidable(personas.member) == [], "self-approval is off: the requester may not decide"
    state = signed_in(personas.auditor).get(f"/requests/{request.pk}/").json()
    assert state["may_decide"] is False


def test_an_approver_may_read_the_runs_formatted_text_and_a_stranger_may_not(personas, parked) -> None:
    run, _ = parked
    seq = run.events.filter(type="approval.pending").values_list("seq", flat=True).first()

    # The run is readable (the event simply has no model text), where a stranger learns nothing.
    assert signed_in(personas.approver).get(f"/runs/{run.pk}/events/{seq}/html/").json() == {
        "error": "No formatted text for this event."
    }
    assert signed_in(personas.stranger).get(f"/runs/{run.pk}/events/{seq}/html/").json() == {
        "error": "No such run."
    }


def test_the_inbox_the_request_page_and_the_history_link_to_the_transcript(personas, parked) -> None:
    run, request = parked
    link = f'href="/runs/{run.pk}/"'

    assert link in signed_in(personas.approver).get("/approvals/").content.decode()
    assert link in signed_in(personas.approver).get(f"/approvals/{request.pk}/").content.decode()
    assert link in signed_in(personas.auditor).get("/approvals/history/").content.decode()


# --- the run stream --------------------------------------------------------------------------------


def connect_code(run: Run, user: Any) -> int | None:
    """The close code of ``user``'s stream socket on ``run`` (``None`` when it was accepted)."""
    cookie = session_cookie(user)

    async def scenario() -> int | None:
        ws = WebsocketCommunicator(
            application,
            f"/ws/runs/{run.pk}/?after=0",
            headers=[(b"origin", b"http://127.0.0.1:8000"), (b"cookie", cookie.encode())],
        )
        connected, code = await ws.connect()
        if connected:
            first = await ws.receive_json_from()
            assert first["run_id"] == run.pk and first["seq"] == 1, "the replay starts at the first event"
            await ws.disconnect()
            return None
        return code

    return async_to_sync(scenario)()


@pytest.mark.parametrize("who", ALLOWED)
def test_the_request_people_may_watch_the_run_stream(personas, parked, who) -> None:
    run, _ = parked

    assert connect_code(run, getattr(personas, who)) is None


def test_it_refuses_the_run_stream_to_a_colleague_and_another_organisation(personas, parked) -> None:
    run, _ = parked
    colleague = make_user("bob", personas.org)

    assert connect_code(run, colleague) == 4404
    assert connect_code(run, personas.stranger) == 4404
