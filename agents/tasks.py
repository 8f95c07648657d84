"""Celery tasks: take ids, call the runner. Enqueued with ``transaction.on_commit``.

Importing this module installs its senders in ``agents.executors`` (``AgentsConfig.ready`` does),
so code below the runner can hand runs to a worker without importing upwards.
"""

from __future__ import annotations

import asyncio

from celery import shared_task

from agents import executors
from agents.engine.runner import run_execute, run_resume
from agents.services import runs_reclaim_expired


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_execute_task(run_id: int) -> str | None:
    return asyncio.run(run_execute(run_id))


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_resume_task(run_id: int, reason: str) -> str | None:
    return asyncio.run(run_resume(run_id, reason=reason))


@shared_task(ignore_result=True)
def runs_reclaim_expired_task() -> int:
    """Beat: resume runs whose worker stopped heart-beating (its lease expired)."""
    return runs_reclaim_expired()


executors.install_queue(
    execute=lambda run_id: run_execute_task.delay(run_id),
    resume=lambda run_id, reason: run_resume_task.delay(run_id, reason),
)
