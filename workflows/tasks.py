"""Celery tasks of workflows: they take ids and call a service."""

from __future__ import annotations

from celery import shared_task

from workflows.services import workflow_run_advance


@shared_task(
    acks_late=True, ignore_result=True, autoretry_for=(Exception,), retry_backoff=True, max_retries=5
)
def workflow_run_advance_task(workflow_run_id: int) -> str:
    return workflow_run_advance(workflow_run_id=workflow_run_id).status
