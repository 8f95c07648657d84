"""How a verdict on a channel's request is followed up (approvals.services.settling.
verdict_follow_up): in production on PostgreSQL, whoever decides it (an approver in the inbox or
a card, the sweep that expires it), through the outbox in the verdict's own transaction, so a
crash between the commit and the send loses nothing; with no broker, in process once it commits."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from approvals.models import ConfirmationRequest, ConfirmationStatus
from approvals.services import confirmation_decide, confirmation_expire_due
from approvals.tasks import confirmation_settled_task
from tests.agents.engine_kit import Harness
from tests.approvals.kit import Resumes
from tests.channels_im.click_kit import APRIL, park
from tests.channels_im.loop_kit import Production, broker_messages, the_outbox

pytestmark = pytest.mark.django_db(transaction=True)


def settled(request: ConfirmationRequest, status: str) -> tuple[str, list[Any]]:
    return confirmation_settled_task.name, [str(request.pk), request.run_id, "feishu", status]


@pytest.mark.postgres
@pytest.mark.redis
def test_in_production_an_approvers_verdict_is_followed_up_through_the_outbox(
    personas: Any, parked: ConfirmationRequest, production: Production, resumes: Resumes
) -> None:
    outcome = confirmation_decide(request_id=parked.pk, user=personas.approver, approve=True)

    assert outcome.accepted
    assert the_outbox() == [settled(parked, "approved")]
    assert broker_messages(production.queue) == 0, "the relay sends it, not the deciding process"
    assert resumes.run_ids == [], "the worker that receives it resumes the run"


@pytest.mark.postgres
@pytest.mark.redis
def test_in_production_an_expiry_is_followed_up_through_the_outbox(parked: ConfirmationRequest) -> None:
    ConfirmationRequest.objects.filter(pk=parked.pk).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)
    )

    assert confirmation_expire_due() == 1

    assert the_outbox() == [settled(parked, "expired")]


def test_without_a_broker_the_verdict_is_followed_up_in_process_once_it_commits(
    personas: Any, channel: Any, harness: Harness, resumes: Resumes
) -> None:
    request = park(personas, harness)

    confirmation_decide(request_id=request.pk, user=personas.approver, approve=False, external_id=APRIL)

    request.refresh_from_db()
    assert request.status == ConfirmationStatus.REJECTED
    assert the_outbox() == []
    assert resumes.run_ids == [request.run_id]
