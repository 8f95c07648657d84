"""The common card click decided in two statements on the server's event loop
(approvals/decision_sql.py, PostgreSQL): it writes exactly what the long path
(``confirmation_decide``) writes, with its follow-up in the outbox, and every click it does not
take (a refusal, a late click, a quorum, an escalation, an edit, another channel or
organisation, a chain with no head yet) is left to the long path with nothing written on the
way."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from approvals.models import (
    ChannelConfig,
    ConfirmationEvent,
    ConfirmationRequest,
    ConfirmationStatus,
    ConfirmationVote,
)
from approvals.services import confirmation_decide
from approvals.tasks import confirmation_settled_task
from fimone import adb
from fimone.audit_chain import ChainHeadMissing, chain_verify
from fimone.models import ChainHead
from tests.agents.engine_kit import Harness
from tests.approvals.audit_kit import behind_the_triggers, row_id, table, verify
from tests.approvals.kit import Resumes
from tests.channels_im.click_kit import APRIL, nothing_written, park, written
from tests.channels_im.loop_kit import Production, click_on, decide_on_the_loop, the_outbox

Kind = ConfirmationEvent.Kind

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def recorded_resumes(resumes: Resumes) -> Resumes:
    """Verdicts ask for resumes; the tests record them rather than run them."""
    return resumes


def parked(
    personas: Any, harness: Harness, production: Production, count: int = 1
) -> list[ConfirmationRequest]:
    """``count`` runs parked on their payment's request, then production's world (a broker)."""
    requests = [park(personas, harness) for _ in range(count)]
    production.on()
    return requests


# --- the quick path ------------------------------------------------------------------------------


@pytest.mark.parametrize("approve", [True, False], ids=["approval", "rejection"])
def test_the_quick_path_writes_what_the_long_path_writes_follow_up_included(
    personas: Any, channel: ChannelConfig, harness: Harness, production: Production, approve: bool
) -> None:
    by_the_quick_path, by_the_long_path = parked(personas, harness, production, count=2)

    outcome = decide_on_the_loop(
        by_the_quick_path, personas.approver, channel, approve=approve, reason="  looks right "
    )
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
    status = "approved" if approve else "rejected"
    assert the_outbox() == [
        (confirmation_settled_task.name, [str(request.pk), request.run_id, "feishu", status])
        for request in (by_the_quick_path, by_the_long_path)
    ], "both paths follow the verdict up through the outbox, in the verdict's own transaction"
    assert chain_verify(ConfirmationEvent, personas.org.pk).broken is None


@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "not-prepared"])
def test_the_two_statements_are_planned_once_per_connection_unless_told_not_to(
    personas: Any,
    channel: ChannelConfig,
    harness: Harness,
    production: Production,
    settings: Any,
    prepared: bool,
) -> None:
    settings.DATABASE_PREPARED_STATEMENTS = prepared
    first, second = parked(personas, harness, production, count=2)

    async def two_clicks_on_one_connection() -> set[str]:
        connection = await adb.connect()
        try:
            for request, approve in ((first, True), (second, False)):
                await click_on(connection, request, personas.approver, channel, approve=approve)
            cursor = await connection.execute("SELECT statement FROM pg_prepared_statements")
            return {row[0].lstrip()[:19].upper() for row in await cursor.fetchall()}
        finally:
            await connection.close()

    kept = async_to_sync(two_clicks_on_one_connection)()

    assert written(first)["request"][0] == ConfirmationStatus.APPROVED
    assert written(second)["request"][0] == ConfirmationStatus.REJECTED
    assert ("WITH UPD AS (UPDATE" in kept) is prepared, kept


def test_its_one_statement_records_the_verdict_it_writes_which_audit_verify_then_checks(
    personas: Any, channel: ChannelConfig, harness: Harness, production: Production
) -> None:
    """The ``decided`` link is hashed in the same statement, with the key, and records the verdict
    as every other path does: a verdict rewritten afterwards is named."""
    (request,) = parked(personas, harness, production)

    outcome = decide_on_the_loop(request, personas.approver, channel, approve=False, reason="not this month")

    assert outcome is not None and outcome.accepted, "decided by the one statement"
    request.refresh_from_db()
    assert request.events.get(kind=Kind.DECIDED).details["verdict"] == request.verdict_record()
    ok, out = verify()
    assert ok, out

    with behind_the_triggers() as cursor:
        cursor.execute(
            f"UPDATE {table(ConfirmationRequest)} SET status = 'approved' WHERE id = %s",  # noqa: S608
            [row_id(request)],
        )

    ok, out = verify()
    assert not ok and f"request {request.pk}: its verdict differs" in out


# --- what it leaves to the long path -------------------------------------------------------------


def test_a_click_by_someone_who_may_not_decide_is_left_to_the_long_path_which_logs_it(
    personas: Any, channel: ChannelConfig, harness: Harness, production: Production
) -> None:
    (request,) = parked(personas, harness, production)

    assert decide_on_the_loop(request, personas.auditor, channel) is None
    assert decide_on_the_loop(request, personas.member, channel) is None, "the requester may not approve"
    assert decide_on_the_loop(request, personas.stranger, channel) is None, "another organisation's user"
    assert nothing_written(request)
    assert the_outbox() == []


def test_a_late_click_is_left_to_the_long_path(
    personas: Any, channel: ChannelConfig, harness: Harness, production: Production
) -> None:
    (request,) = parked(personas, harness, production)
    assert decide_on_the_loop(request, personas.approver, channel, approve=False) is not None

    assert decide_on_the_loop(request, personas.approver, channel, approve=True) is None
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.REJECTED
    assert request.events.filter(kind=Kind.DECIDED).count() == 1
    assert ConfirmationVote.objects.filter(request=request).count() == 1
    assert len(the_outbox()) == 1


def test_an_expired_request_is_not_decided_even_before_the_sweeper_saw_it(
    personas: Any, channel: ChannelConfig, harness: Harness, production: Production
) -> None:
    (request,) = parked(personas, harness, production)
    ConfirmationRequest.objects.filter(pk=request.pk).update(expires_at=request.created_at)

    assert decide_on_the_loop(request, personas.approver, channel) is None
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
    personas: Any, channel: ChannelConfig, harness: Harness, production: Production, change: dict[str, Any]
) -> None:
    (request,) = parked(personas, harness, production)
    ConfirmationRequest.objects.filter(pk=request.pk).update(**change)

    assert decide_on_the_loop(request, personas.approver, channel) is None
    assert nothing_written(request)


def test_a_request_edited_between_the_read_and_the_write_is_not_approved_unseen(
    personas: Any, channel: ChannelConfig, harness: Harness, production: Production
) -> None:
    """The facts said "not edited"; an edit lands before the verdict's statement: the statement's
    own guard refuses the approval and nothing is written."""
    (request,) = parked(personas, harness, production)

    def edit() -> None:
        ConfirmationRequest.objects.filter(pk=request.pk).update(edited_by=personas.approver)

    assert decide_on_the_loop(request, personas.approver, channel, between=edit) is None
    assert nothing_written(request)
    assert the_outbox() == []


def test_another_organisations_request_id_is_not_found_by_the_quick_path(
    personas: Any, channel: ChannelConfig, harness: Harness, production: Production
) -> None:
    (request,) = parked(personas, harness, production)

    assert (
        decide_on_the_loop(request, personas.approver, channel, organization_id=personas.other_org.pk) is None
    )
    assert nothing_written(request)


def test_an_organisation_whose_chain_lost_its_head_is_decided_by_neither_path_and_nothing_is_written(
    personas: Any, channel: ChannelConfig, harness: Harness, production: Production
) -> None:
    """A head made up again at the remaining last link would hide rows cut from the end with it
    (docs/design.md §1.15): nothing is appended until an operator restores it."""
    (request,) = parked(personas, harness, production)
    with behind_the_triggers() as cursor:
        cursor.execute(f"DELETE FROM {table(ChainHead)} WHERE partition = %s", [personas.org.pk])  # noqa: S608

    assert decide_on_the_loop(request, personas.approver, channel) is None
    assert nothing_written(request), "the verdict's update rolled back with the event it could not chain"
    assert the_outbox() == [], "nor its follow-up"
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
    personas: Any, channel: ChannelConfig, harness: Harness, production: Production
) -> None:
    requests = parked(personas, harness, production, count=8)

    async def clicker(approve: bool) -> list[Any]:
        connection = await adb.connect()
        try:
            outcomes = []
            for request in requests:
                outcomes.append(
                    await click_on(connection, request, personas.approver, channel, approve=approve)
                )
                await asyncio.sleep(0)  # the other clicker's statement in between
            return outcomes
        finally:
            await connection.close()

    async def both() -> list[Any]:
        approvals, rejections = await asyncio.gather(clicker(True), clicker(False))
        return approvals + rejections

    outcomes = async_to_sync(both)()

    assert sum(1 for outcome in outcomes if outcome is not None) == len(requests)
    for request in requests:
        request.refresh_from_db()
        assert request.status in (ConfirmationStatus.APPROVED, ConfirmationStatus.REJECTED)
        assert request.events.filter(kind=Kind.DECIDED).count() == 1
        [vote] = ConfirmationVote.objects.filter(request=request)
        assert vote.approve == (request.status == ConfirmationStatus.APPROVED)
    assert len(the_outbox()) == len(requests)
    assert chain_verify(ConfirmationEvent, personas.org.pk).broken is None
