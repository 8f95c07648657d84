"""What an open inbox says in place of a card that left it (approvals.views.cards.left_notice):
who withdrew it or decided it, that it expired, or that it no longer waits for this approver; the
call named by its title and what it is about ("Pay a purchase (PO-1001)")."""

from __future__ import annotations

from typing import Any

import pytest

from approvals.presentation import subject_of, summary_of
from approvals.views.cards import left_notice
from fimone.humanize import clipped
from tests.approvals.kit import recorded_request

pytestmark = pytest.mark.django_db


def test_a_call_withdrawn_by_its_requester_names_them(personas: Any) -> None:
    request = recorded_request(
        personas, status="cancelled", reason="the run was cancelled: cancelled by the user"
    )

    assert left_notice(request, viewer=personas.approver) == "alice withdrew Purchase pay (PO-1001)."


def test_a_run_stopped_by_an_operator_says_who_stopped_it(personas: Any) -> None:
    request = recorded_request(
        personas, status="cancelled", reason="the run was cancelled: cancelled by oscar"
    )

    assert (
        left_notice(request, viewer=personas.approver)
        == "oscar stopped the run behind Purchase pay (PO-1001)."
    )


def test_a_call_withdrawn_for_another_reason_says_it_in_words(personas: Any) -> None:
    request = recorded_request(
        personas, status="cancelled", reason="the run was cancelled: its agent was archived"
    )

    assert left_notice(request, viewer=personas.approver) == (
        "Purchase pay (PO-1001) was withdrawn. The run was cancelled because its agent was archived."
    )


def test_an_expiry_and_a_decision_by_someone_else_or_oneself(personas: Any) -> None:
    expired = recorded_request(personas, status="expired")
    approved = recorded_request(personas, status="approved", decided_by=personas.admin)

    assert (
        left_notice(expired, viewer=personas.approver)
        == "Purchase pay (PO-1001) expired: nobody decided in time."
    )
    assert left_notice(approved, viewer=personas.approver) == "adam approved Purchase pay (PO-1001)."
    assert left_notice(approved, viewer=personas.admin) == "You approved Purchase pay (PO-1001)."


def test_a_request_still_pending_no_longer_waits_for_this_approver(personas: Any) -> None:
    request = recorded_request(personas)

    assert left_notice(request, viewer=personas.approver) == "Purchase pay (PO-1001) no longer waits for you."


def test_what_a_call_is_about_is_its_first_id_else_its_amount() -> None:
    assert subject_of({"note": "x", "purchase_id": "PO-1002", "amount": 10}) == "PO-1002"
    assert subject_of({"orderId": 42}) == "42"
    assert subject_of({"amount": 1200, "currency": "USD"}) == "1,200.00 USD"
    assert subject_of({"purchase_id": "x" * 41, "amount": 5}) == "5.00", "an id too long to read is left out"
    assert subject_of({"purchase_id": "<script>alert(1)</script>", "amount": 5}) == "5.00", "not an id"
    assert subject_of({"paid": True}) == "" and subject_of(["not", "an", "object"]) == ""


def test_a_records_row_says_what_the_call_is_about_in_one_line() -> None:
    context = [
        {"label": "Vendor", "value": "Lumen Office Supplies"},
        {"label": "Description", "value": "200 reams of A4 paper and 12 toner cartridges, delivered"},
        {"label": "Amount", "value": "1,200.00 USD"},
        {"label": "Purchase ID", "value": "PO-1001", "argument": "purchase_id"},
    ]

    summary = summary_of({"purchase_id": "PO-1001", "amount": 1200}, context)

    assert summary == "PO-1001 · Lumen Office Supplies · 1,200.00 USD", "long values and repeats left out"
    assert summary_of({"amount": 99, "currency": "EUR"}, []) == "99.00 EUR"
    assert summary_of({"note": "x" * 80}, None) == ""


def test_a_title_is_cut_at_a_word_never_inside_one() -> None:
    assert (
        clipped("please pay the pending purchase from Lumen Office Supplies", 30) == "please pay the pending…"
    )
    assert clipped("  short \n title ", 30) == "short title"
    assert clipped("x" * 40, 10) == "xxxxxxxxx…", "one word longer than the limit is cut"
