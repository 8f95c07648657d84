"""Batch decisions: an approver filters the inbox (agent, tool, requester, amount range), selects
several requests and approves or rejects them at once with one reason — in the inbox and through
the API — and each request is decided by the same service as alone: eligibility, the hash of the
arguments shown, the quorum, one verdict, the audit. Races with another approver included."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from django.conf import settings

from approvals.models import ConfirmationEvent, ConfirmationRequest, ConfirmationStatus, ConfirmationVote
from approvals.services import BatchItem, confirmation_decide, confirmation_decide_batch
from approvals.services import batches as batch_module
from tests.admin_kit import api_logged_in, logged_in
from tests.approvals.kit import recorded_request
from tests.personas import make_agent, make_user

# Verdicts act after commit (wake, resume, card update): let transactions really commit.
pytestmark = pytest.mark.django_db(transaction=True)

INBOX = "/approvals/"
BATCH = "/approvals/batch/"
API = "/api/approvals/decisions/"
LIMIT = int(settings.DECISION_RATE.split("/")[0])


def picked(*requests: ConfirmationRequest) -> list[str]:
    """The batch form's values: each request with the hash of the arguments the card showed."""
    return [f"{r.pk}:{r.args_sha256}" for r in requests]


@pytest.fixture
def desk(personas, resumes) -> dict[str, Any]:
    """Five pending requests april may decide: three payments of the ledger agent asked by alice
    (800, 40,000 and 60,000), one of the travel agent asked by bob (a booking), and one payment
    that only adam may decide."""
    p = personas
    bob = make_user("bob", p.org)
    ledger = make_agent(p.org, p.operator, name="Ledger bot")
    travel = make_agent(p.org, p.operator, name="Travel desk")
    small, medium, large = (
        recorded_request(p, agent=ledger, tool_args={"purchase_id": f"PO-{n}", "amount": n})
        for n in (800, 40_000, 60_000)
    )
    booking = recorded_request(
        p, agent=travel, requester=bob, tool_name="travel__book", tool_args={"trip": "Lyon", "nights": 2}
    )
    adams = recorded_request(
        p, agent=ledger, approvers=[p.admin], tool_args={"purchase_id": "PO-9", "amount": 5}
    )
    return {
        "p": p,
        "bob": bob,
        "ledger": ledger,
        "travel": travel,
        "small": small,
        "medium": medium,
        "large": large,
        "booking": booking,
        "adams": adams,
    }


def statuses(*requests: ConfirmationRequest) -> list[str]:
    return [ConfirmationRequest.objects.get(pk=r.pk).status for r in requests]


# --- filtering the inbox ---------------------------------------------------------------------------


def shown(response: Any) -> set[str]:
    page = response.content.decode()
    return {key for key in ("PO-800", "PO-40000", "PO-60000", "Lyon") if key in page}


def test_the_inbox_filters_by_agent_tool_requester_and_amount_range(desk) -> None:
    p = desk["p"]
    client = logged_in(p.approver)

    assert shown(client.get(INBOX)) == {"PO-800", "PO-40000", "PO-60000", "Lyon"}
    assert shown(client.get(INBOX, {"agent": desk["travel"].pk})) == {"Lyon"}
    assert shown(client.get(INBOX, {"tool": "oa__purchase_pay"})) == {"PO-800", "PO-40000", "PO-60000"}
    assert shown(client.get(INBOX, {"requester": desk["bob"].pk})) == {"Lyon"}
    # An amount range keeps the calls with an amount inside it (a booking has none).
    assert shown(client.get(INBOX, {"amount_min": "1000", "amount_max": "50000"})) == {"PO-40000"}
    assert shown(client.get(INBOX, {"amount_min": "50000"})) == {"PO-60000"}
    page = client.get(INBOX, {"amount_min": "50000"}).content.decode()
    assert "1 of the 4 requests waiting for your decision match the filters" in page


def test_a_filter_that_matches_nothing_says_so_and_links_back(desk) -> None:
    response = logged_in(desk["p"].approver).get(INBOX, {"agent": 999_999})
    assert response.status_code == 200
    assert "No request matches these filters." in response.content.decode()


def test_bad_filters_are_a_400_on_the_inbox_with_every_request_still_shown(desk) -> None:
    client = logged_in(desk["p"].approver)
    response = client.get(INBOX, {"amount_min": "lots"})
    assert response.status_code == 400
    assert "Enter a number." in response.content.decode()
    assert shown(response) == {"PO-800", "PO-40000", "PO-60000", "Lyon"}
    reversed_range = client.get(INBOX, {"amount_min": "10", "amount_max": "5"})
    assert reversed_range.status_code == 400
    assert "The upper bound is below the lower one." in reversed_range.content.decode()


def test_the_live_inbox_keeps_the_pages_filters(desk) -> None:
    client = logged_in(desk["p"].approver)
    answer = client.get("/approvals/live/", {"cards": "1", "agent": desk["travel"].pk}).json()
    assert answer["pending"] == 4  # the nav's count is of everything waiting
    assert [c["id"] for c in answer["cards"]] == [str(desk["booking"].pk)]


# --- deciding several at once -----------------------------------------------------------------------


def test_an_approver_approves_the_selected_requests_with_one_reason(desk, resumes) -> None:
    p = desk["p"]
    response = logged_in(p.approver).post(
        BATCH,
        {"request": picked(desk["small"], desk["medium"]), "decision": "approve", "reason": "month-end run"},
    )

    assert response.status_code == 200
    page = response.content.decode()
    assert "Approve 2 requests: each one's outcome" in page
    assert page.count('class="done"') == 2
    assert statuses(desk["small"], desk["medium"], desk["large"]) == ["approved", "approved", "pending"]
    for request in (desk["small"], desk["medium"]):
        vote = ConfirmationVote.objects.get(request=request)
        assert (vote.user_id, vote.approve, vote.reason) == (p.approver.pk, True, "month-end run")
        # The audit of each reads as a single decision's would.
        assert (
            ConfirmationEvent.objects.filter(request=request, kind="decided", actor=p.approver).count() == 1
        )
    assert sorted(resumes.run_ids) == sorted([desk["small"].run_id, desk["medium"].run_id])  # both runs go on


def test_each_request_of_a_batch_is_answered_as_alone(desk) -> None:
    """One the approver may not decide, one decided already, one whose arguments changed since
    the page showed them: each refused or late as alone, while the rest are decided."""
    p = desk["p"]
    confirmation_decide(request_id=desk["large"].pk, user=p.approver, approve=False, reason="too much")
    ConfirmationRequest.objects.filter(pk=desk["medium"].pk).update(args_sha256="0" * 64)
    lines = confirmation_decide_batch(
        items=[
            BatchItem(desk["small"].pk, desk["small"].args_sha256),
            BatchItem(desk["adams"].pk, desk["adams"].args_sha256),  # asked of adam only
            BatchItem(desk["large"].pk, desk["large"].args_sha256),  # rejected a moment ago
            BatchItem(desk["medium"].pk, desk["medium"].args_sha256),  # changed since shown
            BatchItem(desk["small"].pk, desk["small"].args_sha256),  # listed twice: decided once
        ],
        user=p.approver,
        approve=True,
    )

    assert [line.request_id for line in lines] == [
        desk["small"].pk,
        desk["adams"].pk,
        desk["large"].pk,
        desk["medium"].pk,
    ]
    small, adams, large, medium = (line.outcome for line in lines)
    assert small.accepted and small.status == "approved"
    assert adams.refused
    assert not large.accepted and large.status == "rejected"
    assert medium.status == "args_changed"
    assert statuses(desk["small"], desk["adams"], desk["large"], desk["medium"]) == [
        "approved",
        "pending",
        "rejected",
        "pending",
    ]


def test_a_batch_the_rate_cannot_hold_decides_nothing(desk) -> None:
    p = desk["p"]
    client = api_logged_in(p.approver)
    for _ in range(LIMIT - 2):  # leaves room for two decisions
        assert (
            client.post(f"/api/approvals/{uuid.uuid4()}/decision/", {"decision": "approve"}).status_code
            == 404
        )

    three = [{"id": str(r.pk)} for r in (desk["small"], desk["medium"], desk["large"])]
    refused = client.post(API, {"decision": "approve", "requests": three}, format="json")
    assert refused.status_code == 429
    assert "Nothing of the 3 was decided." in refused.json()["detail"]
    assert int(refused["Retry-After"]) >= 1
    assert statuses(desk["small"], desk["medium"], desk["large"]) == ["pending", "pending", "pending"]
    inbox = logged_in(p.approver).post(
        BATCH, {"request": picked(desk["small"], desk["medium"], desk["large"]), "decision": "reject"}
    )
    assert inbox.status_code == 429
    assert statuses(desk["small"], desk["medium"], desk["large"]) == ["pending", "pending", "pending"]


def test_an_empty_or_unreadable_selection_decides_nothing(desk) -> None:
    client = logged_in(desk["p"].approver)
    empty = client.post(BATCH, {"decision": "approve", "filters": "agent=1"})
    assert empty.status_code == 302 and empty["Location"] == "/approvals/?agent=1"
    # The way back keeps only the inbox's filters: nothing else the form carried reaches the URL.
    forged = client.post(
        BATCH, {"decision": "approve", "filters": "tool=a%0d%0aX-Evil:%201&next=//evil.example"}
    )
    assert forged.status_code == 302 and forged["Location"] == "/approvals/?tool=a%0D%0AX-Evil%3A+1"
    assert client.post(BATCH, {"decision": "approve", "request": ["not-a-uuid:x"]}).status_code == 400
    assert client.post(BATCH, {"decision": "maybe", "request": picked(desk["small"])}).status_code == 400
    assert statuses(desk["small"]) == ["pending"]


def test_a_stranger_batch_learns_nothing_and_decides_nothing(desk) -> None:
    p = desk["p"]
    response = api_logged_in(p.stranger).post(
        API, {"decision": "approve", "requests": [{"id": str(desk["small"].pk)}]}, format="json"
    )
    assert response.status_code == 200
    [line] = response.json()["results"]
    assert (line["id"], line["accepted"], line["status"]) == (str(desk["small"].pk), False, "not_found")
    assert statuses(desk["small"]) == ["pending"]
    assert not ConfirmationEvent.objects.filter(request=desk["small"], actor=p.stranger).exists()


def test_the_api_answers_each_outcome_in_order(desk) -> None:
    p = desk["p"]
    body = {
        "decision": "reject",
        "reason": "duplicate",
        "requests": [{"id": str(desk["booking"].pk)}, {"id": str(desk["adams"].pk)}],
    }
    response = api_logged_in(p.approver).post(API, body, format="json")
    assert response.status_code == 200
    results = response.json()["results"]
    assert [(r["id"], r["accepted"], r["status"]) for r in results] == [
        (str(desk["booking"].pk), True, "rejected"),
        (str(desk["adams"].pk), False, "refused"),
    ]
    too_many = {"decision": "approve", "requests": [{"id": str(uuid.uuid4())} for _ in range(101)]}
    assert api_logged_in(p.approver).post(API, too_many, format="json").status_code == 400
    assert (
        api_logged_in(p.approver)
        .post(API, {"decision": "approve", "requests": []}, format="json")
        .status_code
        == 400
    )


# --- races ----------------------------------------------------------------------------------------


def test_a_request_another_approver_decides_during_the_batch_keeps_one_verdict(desk, monkeypatch) -> None:
    """adam decides the medium payment just as april's batch reaches it: april's line for it says
    it was decided already; the others are hers."""
    p = desk["p"]
    desk["medium"].approvers.add(p.admin)
    real = batch_module.confirmation_decide

    def adam_first(**kwargs: Any) -> Any:
        if kwargs["request_id"] == desk["medium"].pk:
            assert real(request_id=desk["medium"].pk, user=p.admin, approve=False, reason="mine").accepted
        return real(**kwargs)

    monkeypatch.setattr(batch_module, "confirmation_decide", adam_first)
    lines = confirmation_decide_batch(
        items=[BatchItem(r.pk, r.args_sha256) for r in (desk["small"], desk["medium"], desk["large"])],
        user=p.approver,
        approve=True,
    )
    small, medium, large = (line.outcome for line in lines)
    assert small.accepted and large.accepted
    assert not medium.accepted and medium.status == "rejected"
    assert statuses(desk["small"], desk["medium"], desk["large"]) == ["approved", "rejected", "approved"]
    assert ConfirmationVote.objects.filter(request=desk["medium"]).count() == 1


def test_a_batch_and_a_single_decision_at_the_same_moment_settle_each_request_once(desk) -> None:
    p = desk["p"]
    targets = [desk["small"], desk["medium"], desk["large"]]
    for request in targets:
        request.approvers.add(p.admin)
    start = threading.Barrier(2)
    outcomes: dict[str, Any] = {}

    def batch() -> None:
        start.wait()
        outcomes["batch"] = confirmation_decide_batch(
            items=[BatchItem(r.pk, r.args_sha256) for r in targets], user=p.approver, approve=True
        )

    def single() -> None:
        start.wait()
        outcomes["single"] = confirmation_decide(request_id=desk["medium"].pk, user=p.admin, approve=False)

    threads = [threading.Thread(target=batch), threading.Thread(target=single)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    medium_line = next(line for line in outcomes["batch"] if line.request_id == desk["medium"].pk)
    # Exactly one of the two set the medium payment's verdict; the other was told it was late.
    assert medium_line.outcome.accepted != outcomes["single"].accepted
    final = ConfirmationRequest.objects.get(pk=desk["medium"].pk).status
    assert final == ("approved" if medium_line.outcome.accepted else "rejected")
    assert ConfirmationEvent.objects.filter(request=desk["medium"], kind="decided").count() == 1
    assert statuses(desk["small"], desk["large"]) == ["approved", "approved"]
    assert ConfirmationStatus.PENDING not in statuses(*targets)
