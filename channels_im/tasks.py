"""Outbound delivery: Celery tasks with bounded exponential-backoff retries. Every attempt's
outcome is logged on the request."""

from __future__ import annotations

import logging

from celery import shared_task

log = logging.getLogger(__name__)

MAX_RETRIES = 5


@shared_task(bind=True, max_retries=MAX_RETRIES, acks_late=True, ignore_result=True)
def card_deliver(self, request_id: str) -> None:
    from channels_im.services import card_deliver_attempt

    retry_in = card_deliver_attempt(
        request_id=request_id, attempt=self.request.retries + 1, final=self.request.retries >= MAX_RETRIES
    )
    if retry_in is not None:
        raise self.retry(countdown=retry_in)


@shared_task(bind=True, max_retries=MAX_RETRIES, acks_late=True, ignore_result=True)
def card_update(self, request_id: str) -> None:
    from channels_im.services import card_update_attempt

    retry_in = card_update_attempt(
        request_id=request_id, attempt=self.request.retries + 1, final=self.request.retries >= MAX_RETRIES
    )
    if retry_in is not None:
        raise self.retry(countdown=retry_in)
