"""Celery tasks of approvals: a verdict's follow-ups, and the expiry sweep (beat; schedule created
by migration ``0003_beat_schedule``)."""

from __future__ import annotations

from celery import shared_task


@shared_task(ignore_result=True)
def confirmations_sweep_task() -> dict[str, int]:
    from approvals.sweeper import sweep_once

    return sweep_once()


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def confirmation_settled_task(request_id: str, run_id: int, channel: str, status: str) -> None:
    """A verdict's follow-ups, sent by the deciding process as ONE message (publishing costs the
    web process more than deciding does): inline waiters are woken, and the run's resume, the
    approvers' inboxes and the card update (by the channel app, told through
    ``confirmation_settled``) are dispatched from here. All are idempotent, so a redelivered
    message does no harm."""
    from agents import executors
    from approvals.live import SETTLED, inbox_changed
    from approvals.services import announce_settled
    from approvals.waking import wake

    wake(request_id)
    executors.dispatch_resume(run_id, reason=f"approval request {status}")
    inbox_changed(request_id=request_id, change=SETTLED)
    announce_settled(request_id=request_id, channel=channel, status=status)
