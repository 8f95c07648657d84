"""Celery tasks of approvals: a verdict's follow-ups, and the expiry sweep (beat; schedule created
by migration ``0003_beat_schedule``).

The top of the app's Celery side: the services below hand a verdict's follow-up to a worker
through the sender this module installs when imported (``ApprovalsConfig.ready`` imports it), so
they never import it.
"""

from __future__ import annotations

from celery import shared_task

from agents import executors
from approvals.live import SETTLED, inbox_changed
from approvals.services.settling import SETTLED_TASK, announce_settled
from approvals.sweeper import sweep_once
from approvals.waking import wake


@shared_task(ignore_result=True)
def confirmations_sweep_task() -> dict[str, int]:
    return sweep_once()


@shared_task(name=SETTLED_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def confirmation_settled_task(request_id: str, run_id: int, channel: str, status: str) -> None:
    """A verdict's follow-ups, sent by the deciding process as ONE message (publishing costs the
    web process more than deciding does): inline waiters are woken, and the run's resume, the
    approvers' inboxes and the card update (by the channel app, told through
    ``confirmation_settled``) are dispatched from here. All are idempotent, so a redelivered
    message does no harm."""
    wake(request_id)
    executors.dispatch_resume(run_id, reason=f"approval request {status}")
    inbox_changed(request_id=request_id, change=SETTLED)
    announce_settled(request_id=request_id, channel=channel, status=status)
