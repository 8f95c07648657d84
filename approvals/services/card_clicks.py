"""A chat card's click decided on the server's event loop in two statements when it is the common
case (:mod:`approvals.decision_sql`): the first vote of a request one approval settles, sent to
the clicked channel, by a clicker who may decide, in production mode (:func:`clicks_on_the_loop`).
The rules are :mod:`approvals.services.deciding`'s (the same refusals, events and follow-ups,
:func:`~approvals.standing.describe_refusal` on the same standing); every other click, and every
click answered in a thread, is decided by :func:`~approvals.services.deciding.confirmation_decide`.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import psycopg
from celery import current_app
from django.conf import settings
from django.utils import timezone

from approvals import decision_sql
from approvals.models import ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from approvals.selectors import Tally
from approvals.services.deciding import DecisionOutcome, clean_text, decided_details
from approvals.services.event_log import Kind
from approvals.services.settling import outbox_follow_up
from approvals.standing import describe_refusal

log = logging.getLogger(__name__)


async def confirmation_decide_click_async(
    db: psycopg.AsyncConnection,
    *,
    facts: decision_sql.ClickFacts | None,
    user: Any,
    approve: bool,
    reason: str,
    via_channel_id: int,
    external_id: str,
) -> DecisionOutcome | None:
    """A verified card click through channel ``via_channel_id``, decided on the server's event loop,
    on ``db`` (:mod:`fimone.adb`), from ``facts`` the caller read with ``user``'s standing
    (``None``: no such request in the channel's organisation), when it is the common case: the
    first vote of a request one approval settles and any rejection rejects, neither escalated,
    staged nor edited, sent to this channel, by a clicker
    :func:`~approvals.standing.describe_refusal` lets decide. The same rows and events as
    :func:`~approvals.services.deciding.confirmation_decide`, whose conditional update it shares;
    the follow-up is written by the same statement, to the outbox (:mod:`fimone.outbox`), so the
    caller checks :func:`clicks_on_the_loop` first.

    ``None`` for every other click (no such request, a refusal, a late click, a quorum, an
    escalation, an edit since the read): the caller hands it to ``confirmation_decide``, which
    answers and logs it."""
    verdict = _click_verdict(
        facts=facts,
        user=user,
        approve=approve,
        reason=reason,
        via_channel_id=via_channel_id,
        external_id=external_id,
    )
    if verdict is None:
        return None
    if verdict.follow_up is None:  # pragma: no cover - clicks_on_the_loop() rules this out
        raise RuntimeError("a click decided on the event loop needs its follow-up in the outbox")
    try:
        won = await decision_sql.verdict_write_async(db, verdict)
    except psycopg.IntegrityError as exc:
        log.info("the quick decision of %s failed (%s); deciding it the long way", verdict.request.pk, exc)
        won = False
    return _click_outcome(verdict, won=won)


def clicks_on_the_loop() -> bool:
    """Whether card clicks may be decided on the server's event loop: ``QUICK_CLICKS`` on,
    PostgreSQL, and verdicts followed up through a Celery broker (so through the outbox)."""
    return (
        settings.QUICK_CLICKS
        and decision_sql.available()
        and settings.RUN_EXECUTOR == "celery"
        and settings.CHANNEL_DELIVERY == "celery"
        and not current_app.conf.task_always_eager
    )


def _click_verdict(
    *,
    facts: decision_sql.ClickFacts | None,
    user: Any,
    approve: bool,
    reason: str,
    via_channel_id: int,
    external_id: str,
) -> decision_sql.Verdict | None:
    """What a verified click decides, if it is the common click (:func:`confirmation_decide_click_async`)
    and ``user`` may decide it; else ``None`` (also for no facts: no such request). Writes
    nothing."""
    if facts is None:
        return None
    request = facts.request
    common = (
        request.status == ConfirmationStatus.PENDING
        and request.approvals_required == 1
        and request.any_rejection_rejects
        and request.escalation_level == 0
        and not request.stage_plan
        and request.edited_by_id is None
        and request.channel_config_id == via_channel_id
    )
    standing = facts.standing
    common = common and standing.delegate_of is None and not standing.withdrawn
    if not common or describe_refusal(request=request, user=user, standing=standing) is not None:
        return None
    verdict = ConfirmationStatus.APPROVED if approve else ConfirmationStatus.REJECTED
    clean_reason = clean_text(reason)
    now = timezone.now()
    tally = Tally(approvals=int(approve), rejections=int(not approve), required=1, eligible=1)
    decided = _as_decided(
        request, verdict=verdict, user=user, external_id=external_id, reason=clean_reason, now=now
    )
    event = ConfirmationEvent(
        organization_id=request.organization_id,
        request_id=request.pk,
        kind=Kind.DECIDED,
        actor_id=user.pk,
        actor_external_id=external_id,
        details={
            **decided_details(verdict=verdict, reason=clean_reason, via=via_channel_id, tally=tally),
            "verdict": decided.verdict_record(),
        },
        created_at=now,
    )
    return decision_sql.Verdict(
        request=request,
        verdict=verdict,
        user_id=user.pk,
        external_id=external_id,
        reason=clean_reason,
        now=now,
        event=event,
        follow_up=outbox_follow_up(decided),
    )


def _click_outcome(verdict: decision_sql.Verdict, *, won: bool) -> DecisionOutcome | None:
    """The outcome of a written verdict; ``None`` when it was not written (settled, expired,
    escalated or edited since it was read), the request in memory as it was."""
    if not won:
        _pending_again(verdict.request)
        return None
    request = verdict.request
    return DecisionOutcome(True, str(request.status), f"The request was {request.status}.", request)


def _as_decided(
    request: ConfirmationRequest, *, verdict: str, user: Any, external_id: str, reason: str, now: dt.datetime
) -> ConfirmationRequest:
    """``request`` (in memory) as the verdict leaves the row."""
    request.status, request.responded_at, request.reason = verdict, now, reason
    request.responded_by, request.responded_by_external_id = user, external_id
    return request


def _pending_again(request: ConfirmationRequest) -> None:
    """Undo :func:`_as_decided` in memory: the verdict was not written."""
    request.status, request.responded_at, request.reason = ConfirmationStatus.PENDING, None, ""
    request.responded_by, request.responded_by_external_id = None, ""
