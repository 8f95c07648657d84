"""Celery beat: the expiry sweep (schedule created by migration ``0003_beat_schedule``)."""

from __future__ import annotations

from celery import shared_task


@shared_task(ignore_result=True)
def confirmations_sweep_task() -> dict[str, int]:
    from approvals.sweeper import sweep_once

    return sweep_once()
