"""Celery tasks: take ids, call the runner. Enqueued with ``transaction.on_commit``.

``AgentsConfig.ready`` installs its senders in ``agents.executors``, so code below the runner can
hand runs to a worker without importing upwards.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from celery import shared_task

from agents import executors
from agents.engine.runner import run_execute, run_resume
from agents.services import runs_reclaim_expired


def _drive(factory: Callable[[], Coroutine[Any, Any, str | None]]) -> str | None:
    """Drive a run on the worker process's long-lived event loop (the embedded executor's own),
    the task waiting for it: what the loop keeps (its database pool, see
    ``agents.engine.loop_writes``) serves every run the process drives, instead of each run
    opening a connection of its own on a loop made for it."""
    return executors.embedded.submit(factory).result()


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_execute_task(run_id: int) -> str | None:
    return _drive(lambda: run_execute(run_id))


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_resume_task(run_id: int, reason: str) -> str | None:
    return _drive(lambda: run_resume(run_id, reason=reason))


@shared_task(ignore_result=True)
def runs_reclaim_expired_task() -> int:
    """Beat: resume runs whose worker stopped heart-beating (its lease expired)."""
    return runs_reclaim_expired()
