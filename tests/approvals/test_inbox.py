"""The web inbox: who sees which request, how arguments are shown, and deciding from the page."""

from __future__ import annotations

import datetime as dt
import html
import json
import re
import uuid
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from agents.engine.store import args_sha256
from agents.models import Run
from approvals.models import ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from approvals.services import confirmation_decide, confirmation_request_open
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool, set_policy, suspended_run
from tests.personas import PASSWORD, make_agent, make_user, scripted

Kind = ConfirmationEvent.Kind

# Verdicts act after commit (wake, resume, card update): let transactions really commit.
pytestmark = pytest.mark.django_db(transaction=True)

INBOX = "/approvals/"
HISTORY = "/approvals/history/"
HOSTILE_ARGS = {"purchase_id": "<script>alert(1)</script>", "amount": 12.5, "note": "</pre><b>ok</b>"}


def signed_in(user: Any, **client_options: Any) -> Client:
    client = Client(**client_options)
    client.force_login(user)
    return client


def decide_url(request: ConfirmationRequest) -> str:
    return f"/approvals/{request.pk}/decide/"


def detail_url(request: ConfirmationRequest) -> str:
    return f"/approvals/{request.pk}/"


def expire(request: ConfirmationRequest) -> None:
    # Move the deadline into the past rather than wait out the policy's minimum timeout.
    ConfirmationRequest.objects.filter(pk=request.pk).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)
    )


def hostile_run(personas: Any) -> tuple[Run, ConfirmationRequest]:
    """A parked run whose tool call carries markup in its arguments, as a prompt injection might."""
    config = scripted(
        {"tool_calls": [{"name": "oa__purchase_pay", "arguments": HOSTILE_ARGS}]},
        {"content": "Outcome: {last}"},
    )
    agent = make_agent(personas.org, personas.operator, model_config_json=config)
    return suspended_run(personas, Harness(pay_tool()), agent=agent)


def arguments_shown(page: str) -> list[str]:
    """The text of every arguments block of ``page``, as a reader sees it."""
    return [html.unescape(block) for block in re.findall(r'<pre class="args"[^>]*>(.*?)</pre>', page, re.S)]


def pending_request(personas: Any) -> ConfirmationRequest:
    set_policy(personas)
    return suspended_run(personas, Harness(pay_tool()))[1]


# --- the inbox -----------------------------------------------------------------------------------


def test_an_anonymous_visitor_is_sent_to_sign_in(db) -> None:
    response = Client().get(INBOX)

    assert response.status_code == 302
    assert response["Location"] == "/approvals/login/?next=/approvals/"


def test_an_approver_signs_in_on_the_sign_in_page_and_lands_in_the_inbox(personas) -> None:
    client = Client()
    response = client.post(
        "/approvals/login/?next=/approvals/",
        {"username": "april", "password": PASSWORD, "next": "/approvals/"},
    )

    assert response.status_code == 302 and response["Location"] == INBOX
    assert client.get(INBOX).status_code == 200


def test_the_inbox_lists_a_pending_request_with_everything_an_approver_needs(personas, resumes) -> None:
    request = pending_request(personas)

    response = signed_in(personas.approver).get(INBOX)

    assert response.status_code == 200
    page = response.content.decode()
    assert "oa__purchase_pay" in page and "Procurement assistant" in page
    assert "Requested by <b>alice</b>" in page
    assert arguments_shown(page) == ['{\n  "amount": 1250.5,\n  "purchase_id": "PO-1001"\n}']
    assert f'data-countdown datetime="{request.expires_at.isoformat()}"' in page
    assert f'href="{detail_url(request)}"' in page
    assert f'action="{decide_url(request)}"' in page
    assert 'value="approve"' in page and 'value="reject"' in page


def test_the_inbox_shows_nothing_to_the_requester_a_stranger_or_an_auditor(personas, resumes) -> None:
    pending_request(personas)

    for user in (personas.member, personas.stranger, personas.auditor):
        page = signed_in(user).get(INBOX).content.decode()
        assert "oa__purchase_pay" not in page, user.username
        assert "Nothing waits for you." in page


def test_an_expired_request_is_gone_from_the_inbox(personas, resumes) -> None:
    request = pending_request(personas)
    expire(request)

    page = signed_in(personas.approver).get(INBOX).content.decode()

    assert "oa__purchase_pay" not in page


def test_the_inbox_lists_the_soonest_deadline_first(personas, resumes) -> None:
    later = pending_request(personas)
    sooner = hostile_run(personas)[1]
    ConfirmationRequest.objects.filter(pk=sooner.pk).update(
        expires_at=later.expires_at - dt.timedelta(minutes=1)
    )

    page = signed_in(personas.approver).get(INBOX).content.decode()

    assert page.index(f"request-{sooner.pk}") < page.index(f"request-{later.pk}")


def test_the_arguments_are_pretty_printed_and_never_rendered_as_markup(personas, resumes) -> None:
    set_policy(personas)
    hostile_run(personas)

    page = signed_in(personas.approver).get(INBOX).content.decode()

    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;/pre&gt;&lt;b&gt;ok&lt;/b&gt;" in page
    assert arguments_shown(page) == [json.dumps(HOSTILE_ARGS, indent=2, sort_keys=True)]


# --- deciding from the page ----------------------------------------------------------------------


def test_approving_from_the_inbox_approves_resumes_the_run_and_says_so(personas, resumes) -> None:
    request = pending_request(personas)

    response = signed_in(personas.approver).post(
        decide_url(request), {"decision": "approve", "reason": ""}, follow=True
    )

    assert response.redirect_chain == [(INBOX, 302)]
    assert "Approved: Purchase pay" in response.content.decode()
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.APPROVED and request.responded_by == personas.approver
    assert resumes.run_ids == [request.run_id]
    assert request.events.filter(kind=Kind.DECIDED, actor=personas.approver).exists()


def test_rejecting_with_a_reason_stores_the_reason(personas, resumes) -> None:
    request = pending_request(personas)

    response = signed_in(personas.approver).post(
        decide_url(request), {"decision": "reject", "reason": "  budget frozen  "}, follow=True
    )

    assert "Rejected: Purchase pay" in response.content.decode()
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.REJECTED and request.reason == "budget frozen"
    assert resumes.run_ids == [request.run_id]


def test_a_post_without_a_csrf_token_is_refused_and_changes_nothing(personas, resumes) -> None:
    request = pending_request(personas)
    client = signed_in(personas.approver, enforce_csrf_checks=True)

    response = client.post(decide_url(request), {"decision": "approve"})

    assert response.status_code == 403
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING and resumes.run_ids == []
    assert not request.events.filter(kind__in=[Kind.DECIDED, Kind.CLICK_REFUSED]).exists()


def test_the_inbox_form_carries_the_csrf_token_a_post_needs(personas, resumes) -> None:
    request = pending_request(personas)
    client = signed_in(personas.approver, enforce_csrf_checks=True)
    page = client.get(INBOX).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)

    response = client.post(decide_url(request), {"decision": "approve", "csrfmiddlewaretoken": token})

    assert response.status_code == 302
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.APPROVED


def test_it_refuses_a_click_from_a_non_approver_and_logs_it(personas, resumes) -> None:
    request = pending_request(personas)

    response = signed_in(personas.auditor).post(decide_url(request), {"decision": "approve"}, follow=True)

    assert "You cannot decide this request: not an approver of this request." in response.content.decode()
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING and resumes.run_ids == []
    refused = request.events.get(kind=Kind.CLICK_REFUSED)
    assert refused.actor == personas.auditor and refused.details["via"] == "web"


def test_a_late_click_is_told_the_request_was_already_decided(personas, resumes) -> None:
    request = pending_request(personas)
    confirmation_decide(request_id=request.pk, user=personas.admin, approve=True)

    response = signed_in(personas.approver).post(decide_url(request), {"decision": "reject"}, follow=True)

    assert "This request was already approved." in response.content.decode()
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.APPROVED and request.responded_by == personas.admin


@pytest.mark.parametrize("data", [{"decision": "maybe"}, {}, {"decision": "approve", "reason": "x" * 2001}])
def test_a_malformed_decision_is_a_400_page_and_changes_nothing(personas, resumes, data) -> None:
    request = pending_request(personas)

    response = signed_in(personas.approver).post(decide_url(request), data)

    assert response.status_code == 400
    assert "nothing was changed" in response.content.decode()
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING


def test_deciding_an_unknown_or_malformed_request_id_is_a_404(personas) -> None:
    client = signed_in(personas.approver)

    assert client.post(f"/approvals/{uuid.uuid4()}/decide/", {"decision": "approve"}).status_code == 404
    assert client.post("/approvals/not-a-uuid/decide/", {"decision": "approve"}).status_code == 404


def test_the_decide_address_only_accepts_post(personas, resumes) -> None:
    request = pending_request(personas)

    assert signed_in(personas.approver).get(decide_url(request)).status_code == 405


# --- the detail page -----------------------------------------------------------------------------


def test_the_detail_page_shows_the_request_its_event_log_and_its_run(personas, resumes) -> None:
    request = pending_request(personas)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=False, reason="<i>no</i>")

    response = signed_in(personas.approver).get(detail_url(request))

    assert response.status_code == 200
    page = response.content.decode()
    assert "oa__purchase_pay" in page and "Rejected" in page and "&lt;i&gt;no&lt;/i&gt;" in page
    assert "awaiting approval" in page.lower(), "the run's status"
    for kind in ("Created", "Delivered", "Decided"):
        assert f'<td class="kind">{kind}</td>' in page
    assert 'name="decision"' not in page, "a decided request offers no buttons"


@pytest.mark.parametrize("who", ["approver", "admin", "member", "auditor"])
def test_the_detail_page_is_open_to_approvers_the_requester_and_auditors(personas, resumes, who) -> None:
    request = pending_request(personas)

    assert signed_in(getattr(personas, who)).get(detail_url(request)).status_code == 200


def test_the_detail_page_is_a_404_for_everyone_else(personas, resumes) -> None:
    request = pending_request(personas)
    colleague = make_user("bob", personas.org)

    for user in (personas.stranger, colleague):
        assert signed_in(user).get(detail_url(request)).status_code == 404, user.username
    assert signed_in(personas.approver).get(f"/approvals/{uuid.uuid4()}/").status_code == 404


def test_the_detail_page_offers_the_buttons_only_to_who_may_decide(personas, resumes) -> None:
    request = pending_request(personas)

    assert 'name="decision"' in signed_in(personas.approver).get(detail_url(request)).content.decode()
    assert 'name="decision"' not in signed_in(personas.member).get(detail_url(request)).content.decode()


# --- the history ---------------------------------------------------------------------------------


def test_the_history_shows_an_auditor_the_organisations_requests_filtered_by_status(
    personas, resumes
) -> None:
    decided = pending_request(personas)
    confirmation_decide(request_id=decided.pk, user=personas.approver, approve=False, reason="budget frozen")
    hostile_run(personas)
    client = signed_in(personas.auditor)

    everything = client.get(HISTORY).content.decode()
    rejected = client.get(HISTORY, {"status": "rejected"}).content.decode()

    assert everything.count('<span class="badge badge-') == 2
    assert "budget frozen" in everything and "&lt;script&gt;" not in everything
    assert rejected.count('<span class="badge badge-rejected">') == 1
    assert '<span class="badge badge-pending">' not in rejected
    assert 'href="/approvals/history/"' in everything, "auditors see the History link"


def test_the_history_is_newest_first_and_paginated_by_25(personas, resumes) -> None:
    run = pending_request(personas).run
    for i in range(25):
        confirmation_request_open(
            run=run,
            tool_call_id=f"call-{i}",
            tool_name=f"tool_{i}",
            tool_args={},
            args_sha256=args_sha256({}),
        )
    client = signed_in(personas.admin)

    first = client.get(HISTORY).content.decode()
    second = client.get(HISTORY, {"page": 2}).content.decode()

    # Each request a row (its tool's internal name kept out of sight, in ``data-tool``).
    assert first.count('<tr data-tool="') == 25 and "Page 1 of 2" in first, "25 requests a page"
    assert first.index("tool_24") < first.index("tool_23")
    assert 'data-tool="oa__purchase_pay"' in second and 'data-tool="tool_0"' in first


def test_the_history_is_forbidden_to_a_plain_member_and_hidden_from_their_menu(personas) -> None:
    client = signed_in(personas.member)

    response = client.get(HISTORY)
    assert response.status_code == 403 and "Only auditors, operators and admins" in response.content.decode()
    assert 'href="/approvals/history/"' not in client.get(INBOX).content.decode()


def test_the_history_shows_a_superuser_every_organisation(personas, superuser, resumes) -> None:
    pending_request(personas)

    page = signed_in(superuser).get(HISTORY).content.decode()

    assert "oa__purchase_pay" in page


def test_an_unknown_status_filter_is_a_400_page(personas) -> None:
    assert signed_in(personas.auditor).get(HISTORY, {"status": "bogus"}).status_code == 400


def test_the_menu_shows_the_admin_link_only_to_staff(personas) -> None:
    assert 'href="/admin/"' in signed_in(personas.operator).get(INBOX).content.decode()
    assert 'href="/admin/"' not in signed_in(personas.approver).get(INBOX).content.decode()
