"""Celery tasks: take ids, call the runner. Enqueued with ``transaction.on_commit``."""

from __future__ import annotations

import asyncio

from celery import shared_task


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_execute_task(run_id: int) -> str | None:
    from agents.engine.runner import run_execute

    return asyncio.run(run_execute(run_id))


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_resume_task(run_id: int, reason: str) -> str | None:
    from agents.engine.runner import run_resume

    return asyncio.run(run_resume(run_id, reason=reason))


@shared_task(ignore_result=True)
def runs_reclaim_expired_task() -> int:
    """Beat: resume runs whose worker stopped heart-beating (its lease expired)."""
    from agents.services import runs_reclaim_expired

    return runs_reclaim_expired()
