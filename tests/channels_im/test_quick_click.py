"""The common card click decided in two statements (approvals/decision_sql.py, PostgreSQL): it
writes exactly what the long path writes, and every click it does not take (a refusal, a late
click, a quorum, an escalation, an edit, another channel or organisation, a chain with no head
yet) falls through to ``confirmation_decide`` with nothing written on the way."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, connections
from django.test import Client
from django.test.utils import CaptureQueriesContext

from agents.models import RunStatus
from approvals.models import (
    ChannelConfig,
    ConfirmationEvent,
    ConfirmationRequest,
    ConfirmationStatus,
    ConfirmationVote,
)
from approvals.services import confirmation_decide, confirmation_decide_click
from fimone.audit_chain import ChainHeadMissing, chain_verify
from fimone.models import ChainHead
from tests.agents.engine_kit import Harness
from tests.approvals.audit_kit import behind_the_triggers, table
from tests.approvals.kit import PAY_ARGS, Resumes
from tests.channels_im.click_kit import (
    APRIL,
    nothing_written,
    park,
    post_click,
    written,
)

Kind = ConfirmationEvent.Kind

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def recorded_resumes(resumes: Resumes) -> Resumes:
    """Verdicts ask for resumes; the tests record them rather than run them."""
    return resumes


def quick(
    request: ConfirmationRequest, user: Any, channel: ChannelConfig, *, approve: bool = True, **kw: Any
):
    return confirmation_decide_click(
        request_id=request.pk,
        organization_id=kw.pop("organization_id", channel.organization_id),
        user=user,
        approve=approve,
        reason=kw.pop("reason", ""),
        via_channel_id=channel.pk,
        external_id=kw.pop("external_id", APRIL),
    )


# --- the quick path ------------------------------------------------------------------------------


def test_a_verified_click_is_decided_in_four_statements_and_the_run_completes(
    client: Client, personas: Any, resumes: Resumes, channel: ChannelConfig, harness: Harness
) -> None:
    request = park(personas, harness)

    with CaptureQueriesContext(connection) as queries:
        response = post_click(client, channel, request, decision="approve")

    assert response.status_code == 200
    assert response.json()["toast"] == {"type": "success", "content": "The request was approved."}
    # The channel by its key, the clicker's identity, the facts, then the verdict: nothing else
    # reaches the database before the verdict is written (what follows it is the follow-ups,
    # which production runs on a worker).
    statements = [q["sql"].lstrip() for q in queries.captured_queries]
    [verdict] = [i for i, sql in enumerate(statements) if sql.upper().startswith("WITH UPD AS (UPDATE")]
    assert verdict == 3, statements[:verdict]
    assert written(request)["request"][:3] == (ConfirmationStatus.APPROVED, personas.approver.pk, APRIL)
    assert written(request)["kinds"] == [Kind.CREATED, Kind.DELIVERED, Kind.DECIDED]
    assert resumes.run_ids == [request.run_id]
    assert harness.resume(request.run) == RunStatus.COMPLETED
    assert harness.tools["oa__purchase_pay"].calls == [PAY_ARGS]
    assert chain_verify(ConfirmationEvent, personas.org.pk).broken is None


def prepared_statements() -> set[str]:
    """The statements this connection has prepared (PostgreSQL's own view of them)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return {row[0].lstrip()[:19].upper() for row in cursor.fetchall()}


@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "not-prepared"])
def test_the_two_statements_are_planned_once_per_connection_unless_told_not_to(
    personas: Any, channel: ChannelConfig, harness: Harness, settings: Any, prepared: bool
) -> None:
    settings.DATABASE_PREPARED_STATEMENTS = prepared
    connection.close()
    connection.close_pool()  # new sessions: none prepared by earlier tests
    first, second = park(personas, harness), park(personas, harness)

    assert quick(first, personas.approver, channel) is not None
    assert quick(second, personas.approver, channel, approve=False) is not None

    assert written(first)["request"][0] == ConfirmationStatus.APPROVED
    assert written(second)["request"][0] == ConfirmationStatus.REJECTED
    kept = prepared_statements()
    assert ({'SELECT R."ID", R."O', "WITH UPD AS (UPDATE"} <= kept) is prepared, kept


@pytest.mark.parametrize("approve", [True, False], ids=["approval", "rejection"])
def test_the_quick_path_writes_what_the_long_path_writes(
    personas: Any, resumes: Resumes, channel: ChannelConfig, harness: Harness, approve: bool
) -> None:
    by_the_quick_path = park(personas, harness)
    by_the_long_path = park(personas, harness)

    outcome = quick(by_the_quick_path, personas.approver, channel, approve=approve, reason="  looks right ")
    long = confirmation_decide(
        request_id=by_the_long_path.pk,
        user=personas.approver,
        approve=approve,
        reason="  looks right ",
        via_channel_id=channel.pk,
        external_id=APRIL,
    )

    assert outcome is not None and outcome.accepted
    assert (outcome.status, outcome.message) == (long.status, long.message)
    assert written(by_the_quick_path) == written(by_the_long_path)
    assert written(by_the_quick_path)["decided"][0]["details"]["reason"] == "looks right"
    assert sorted(resumes.run_ids) == sorted([by_the_quick_path.run_id, by_the_long_path.run_id])
    assert chain_verify(ConfirmationEvent, personas.org.pk).broken is None


# --- what it leaves to the long path -------------------------------------------------------------


def test_a_click_by_someone_who_may_not_decide_is_left_to_the_long_path_which_logs_it(
    personas: Any, channel: ChannelConfig, harness: Harness
) -> None:
    request = park(personas, harness)

    assert quick(request, personas.auditor, channel) is None
    assert quick(request, personas.member, channel) is None, "the requester may not approve their own call"
    assert quick(request, personas.stranger, channel) is None, "another organisation's user"
    assert nothing_written(request)


def test_a_late_click_is_left_to_the_long_path(
    personas: Any, channel: ChannelConfig, harness: Harness
) -> None:
    request = park(personas, harness)
    assert quick(request, personas.approver, channel, approve=False) is not None

    assert quick(request, personas.approver, channel, approve=True) is None
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.REJECTED
    assert request.events.filter(kind=Kind.DECIDED).count() == 1
    assert ConfirmationVote.objects.filter(request=request).count() == 1


def test_an_expired_request_is_not_decided_even_before_the_sweeper_saw_it(
    personas: Any, channel: ChannelConfig, harness: Harness
) -> None:
    request = park(personas, harness)
    ConfirmationRequest.objects.filter(pk=request.pk).update(expires_at=request.created_at)

    assert quick(request, personas.approver, channel) is None
    assert nothing_written(request)


@pytest.mark.parametrize(
    "change",
    [
        {"approvals_required": 2},
        {"any_rejection_rejects": False},
        {"escalation_level": 1},
        {"channel_config": None},
    ],
    ids=["a quorum", "a majority", "an escalated request", "a request of another channel"],
)
def test_requests_beyond_the_common_case_are_left_to_the_long_path(
    personas: Any, channel: ChannelConfig, harness: Harness, change: dict[str, Any]
) -> None:
    request = park(personas, harness)
    ConfirmationRequest.objects.filter(pk=request.pk).update(**change)

    assert quick(request, personas.approver, channel) is None
    assert nothing_written(request)


def test_a_request_edited_between_the_read_and_the_write_is_not_approved_unseen(
    personas: Any, channel: ChannelConfig, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The facts said "not edited"; an edit lands before the verdict's statement: the statement's
    own guard refuses the approval and nothing is written."""
    from approvals import decision_sql

    request = park(personas, harness)
    read = decision_sql.click_facts

    def read_then_edit(**kw: Any) -> Any:
        facts = read(**kw)
        ConfirmationRequest.objects.filter(pk=request.pk).update(edited_by=personas.approver)
        return facts

    monkeypatch.setattr(decision_sql, "click_facts", read_then_edit)

    assert quick(request, personas.approver, channel) is None
    assert nothing_written(request)


def test_another_organisations_request_id_is_not_found_by_the_quick_path(
    personas: Any, channel: ChannelConfig, harness: Harness
) -> None:
    request = park(personas, harness)

    assert quick(request, personas.approver, channel, organization_id=personas.other_org.pk) is None
    assert nothing_written(request)


def test_an_organisation_whose_chain_lost_its_head_is_decided_by_neither_path_and_nothing_is_written(
    personas: Any, channel: ChannelConfig, harness: Harness
) -> None:
    """A head made up again at the remaining last link would hide rows cut from the end with it
    (docs/design.md §1.15): nothing is appended until an operator restores it."""
    request = park(personas, harness)
    with behind_the_triggers() as cursor:
        cursor.execute(f"DELETE FROM {table(ChainHead)} WHERE partition = %s", [personas.org.pk])  # noqa: S608

    assert quick(request, personas.approver, channel) is None
    assert nothing_written(request), "the verdict's update rolled back with the event it could not chain"
    with pytest.raises(ChainHeadMissing):
        confirmation_decide(
            request_id=request.pk,
            user=personas.approver,
            approve=True,
            via_channel_id=channel.pk,
            external_id=APRIL,
        )
    assert nothing_written(request)
    assert "head row is missing" in chain_verify(ConfirmationEvent, personas.org.pk).broken.problem


# --- contention ----------------------------------------------------------------------------------


def test_two_clicks_at_once_leave_one_verdict_one_vote_and_an_unbroken_chain(
    personas: Any, channel: ChannelConfig, harness: Harness
) -> None:
    requests = [park(personas, harness) for _ in range(8)]
    outcomes: list[Any] = []
    barrier = threading.Barrier(2)

    def clicker(approve: bool) -> None:
        try:
            for request in requests:
                barrier.wait(timeout=30)
                outcomes.append(quick(request, personas.approver, channel, approve=approve))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=clicker, args=(approve,)) for approve in (True, False)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sum(1 for outcome in outcomes if outcome is not None) == len(requests)
    for request in requests:
        request.refresh_from_db()
        assert request.status in (ConfirmationStatus.APPROVED, ConfirmationStatus.REJECTED)
        assert request.events.filter(kind=Kind.DECIDED).count() == 1
        [vote] = ConfirmationVote.objects.filter(request=request)
        assert vote.approve == (request.status == ConfirmationStatus.APPROVED)
    assert chain_verify(ConfirmationEvent, personas.org.pk).broken is None
