"""After a verdict or a vote committed: waking the inline waiter, resuming the parked run, and
telling the approvers' inboxes, the channel app (which updates the cards) and the run's stream.

Every function here runs after commit and is idempotent or fire and forget: a lost push costs a
stale page, never a wrong decision. In production the whole follow-up of a verdict is one Celery
task (``approvals.tasks``), which sits above these services because it runs them; it installs its
sender here when imported (:func:`install_settled_sender`), so nothing here imports upwards.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from celery import current_app
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from agents import executors
from agents.consumers import run_group
from agents.events import APPROVAL_VOTED
from agents.models import Run, RunEvent, RunStatus
from approvals.live import OPENED, SETTLED, VOTED, inbox_changed
from approvals.models import ConfirmationRequest, ConfirmationStatus
from approvals.selectors import stage_vote_summary, vote_summary
from approvals.signals import confirmation_opened, confirmation_settled, confirmation_voted
from approvals.waking import wake
from fimone.outbox import outbox_enqueue

log = logging.getLogger(__name__)

#: The name of the Celery task that follows a verdict up (``approvals.tasks`` registers it under
#: this name). Outbox rows (:mod:`fimone.outbox`) carry it, and a row written before a deploy is
#: relayed after it: the name must not change.
SETTLED_TASK = "approvals.tasks.confirmation_settled_task"

SettledSender = Callable[[str, int, str, str], Any]
"""``send(request_id, run_id, channel, status)`` hands a verdict's follow-up to a Celery worker."""

_installed: dict[str, SettledSender] = {}


def install_settled_sender(send: SettledSender) -> None:
    """Install how a verdict's follow-up reaches a worker (``approvals.tasks`` does, when
    imported; ``ApprovalsConfig.ready`` imports it). Installing again replaces it."""
    _installed["send"] = send


def _send_settled(*args: Any) -> None:
    try:
        send = _installed["send"]
    except KeyError:
        raise RuntimeError(
            "no sender of a verdict's follow-up installed: approvals.tasks installs it when "
            "imported (ApprovalsConfig.ready imports it)"
        ) from None
    send(*args)


def settled_follow_up(request: ConfirmationRequest) -> tuple[str, list[Any]] | None:
    """The one Celery task that follows a verdict up when runs and card deliveries both go through
    Celery (production), as (task name, arguments); ``None`` when the deciding process does it
    itself (the embedded mode, or a web-inbox request)."""
    all_celery = settings.RUN_EXECUTOR == "celery" and settings.CHANNEL_DELIVERY == "celery"
    if not all_celery or request.channel == "web":
        return None
    # Waiters and inboxes are told from the worker too: runs wait on workers here, and each push
    # from the deciding server cost it a hop to its event loop and a Redis round trip.
    return SETTLED_TASK, [
        str(request.pk),
        request.run_id,
        request.channel,
        str(request.status),
    ]


def outbox_follow_up(request: ConfirmationRequest) -> tuple[str, list[Any]] | None:
    """:func:`settled_follow_up`, if it goes to a broker: a Celery that runs tasks in process
    (``task_always_eager``) has no broker to relay to, and runs it on commit instead."""
    return None if current_app.conf.task_always_eager else settled_follow_up(request)


def verdict_follow_up(request: ConfirmationRequest) -> None:
    """Have a verdict followed up once its transaction commits. Where the follow-up goes to a
    broker (:func:`outbox_follow_up`) and the database has a relay (PostgreSQL, ``outbox_relay``),
    it is written to the outbox in the verdict's own transaction, as the click decided on the
    event loop writes it: a process that dies between the commit and the send loses nothing.
    Elsewhere :func:`after_verdict` runs on commit. Precondition: inside the verdict's transaction."""
    follow_up = outbox_follow_up(request) if connection.vendor == "postgresql" else None
    if follow_up is None:
        transaction.on_commit(lambda: after_verdict(request))
    else:
        task, args = follow_up
        outbox_enqueue(task=task, args=args)


def after_verdict(request: ConfirmationRequest) -> None:
    """Wake the waiter, resume the run if it is parked, tell the channel app (which updates the
    card) and the approvers' inboxes. Call on commit."""
    follow_up = settled_follow_up(request)
    if follow_up is not None:
        _send_settled(*follow_up[1])
        return
    wake(request.pk)
    inbox_changed(request_id=request.pk, change=SETTLED)
    executors.dispatch_resume(request.run_id, reason=f"approval request {request.status}")
    announce_settled(request_id=request.pk, channel=request.channel, status=str(request.status))


def after_vote(*, request_id: uuid.UUID, channel: str) -> None:
    """A vote that did not settle the request: the approvers' inboxes, the channel app (which
    shows the new tally on the cards already sent) and the run's stream are told. Call on commit.

    Only :func:`~approvals.services.deciding.confirmation_decide` records such a vote: the
    two-statement click (:func:`~approvals.services.card_clicks.confirmation_decide_click_async`) takes
    only clicks whose vote settles the request."""
    inbox_changed(request_id=request_id, change=VOTED)
    confirmation_voted.send(sender=ConfirmationRequest, request_id=request_id, channel=channel)
    push_voted(request_id=request_id)


def after_stage_opened(*, request_id: uuid.UUID, channel: str) -> None:
    """A stage of the request was approved and the next one opened: its people's inboxes are told,
    a new card goes out (as for a request just opened) and the run's stream shows the votes.
    Call on commit."""
    inbox_changed(request_id=request_id, change=OPENED)
    confirmation_opened.send(sender=ConfirmationRequest, request_id=request_id, channel=channel)
    push_voted(request_id=request_id)


#: How many runs up a delegation or DAG chain a vote is shown (the parents show the child's request).
VOTE_PUSH_DEPTH = 8


def push_voted(*, request_id: uuid.UUID | str) -> None:
    """Push ``approval.voted`` (:data:`agents.events.APPROVAL_VOTED`: the votes so far, the
    approvals and the approvals required) to the stream of the request's run, and of the runs
    above it, which show their children's requests (with ``child_run_id``). Not stored: like a
    streamed delta it carries the seq of the run's last stored event, so a page that missed it
    reads the votes when it reloads. Call after the vote committed. Fire and forget: a lost push
    costs a stale tally on a page, never a wrong decision."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        request = ConfirmationRequest.objects.filter(pk=request_id).first()
        if request is None:
            return
        summary = stage_vote_summary(request=request) if request.stage_plan else vote_summary(request=request)
        payload: dict[str, Any] = {
            "request_id": str(request.pk),
            "tool_call_id": request.tool_call_id,
            **summary,
        }
        stamp = timezone.now().isoformat()
        run_id: int | None = request.run_id
        for _ in range(VOTE_PUSH_DEPTH):
            if run_id is None:
                break
            seq = RunEvent.objects.filter(run_id=run_id).aggregate(last=Max("seq"))["last"] or 0
            shown = payload if run_id == request.run_id else {**payload, "child_run_id": request.run_id}
            event = {
                "run_id": run_id,
                "seq": seq,
                "type": APPROVAL_VOTED,
                "payload": shown,
                "created_at": stamp,
            }
            async_to_sync(layer.group_send)(run_group(run_id), {"type": "run.event", "event": event})
            run_id = Run.objects.filter(pk=run_id).values_list("parent_run_id", flat=True).first()
    except Exception:  # never fail a vote over a page refresh
        log.warning("could not push the votes of request %s to its run", request_id, exc_info=True)


def announce_settled(*, request_id: uuid.UUID | str, channel: str, status: str) -> None:
    """Send :data:`approvals.signals.confirmation_settled` (after commit)."""
    confirmation_settled.send(
        sender=ConfirmationRequest, request_id=request_id, channel=channel, status=status
    )


def runs_resume_orphaned() -> int:
    """Safety net for lost wake-ups: resume parked runs none of whose requests is still pending.
    One query when there are none."""
    run_ids = list(
        Run.objects.filter(status=RunStatus.AWAITING_APPROVAL, confirmation_requests__isnull=False)
        .exclude(confirmation_requests__status=ConfirmationStatus.PENDING)
        .values_list("pk", flat=True)
        .distinct()[:200]
    )
    for run_id in run_ids:
        executors.dispatch_resume(run_id, reason="its approval was settled")
    return len(run_ids)
