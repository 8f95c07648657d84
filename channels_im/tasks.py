"""Outbound delivery: Celery tasks with bounded exponential-backoff retries. Every attempt's
outcome is logged on the request.

A retry is returned (``throw=False``), not raised: in embedded mode tasks run eagerly with
``task_eager_propagates``, which would re-raise a raised ``Retry`` into whoever enqueued the task
(the approval gate, the callback view) instead of retrying. A returned one makes eager ``apply()``
run the next attempt at once; a worker schedules it with its countdown as usual."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.exceptions import Retry

from channels_im.services import card_deliver_attempt, card_update_attempt

log = logging.getLogger(__name__)

MAX_RETRIES = 5


@shared_task(bind=True, max_retries=MAX_RETRIES, acks_late=True, ignore_result=True)
def card_deliver(self, request_id: str) -> Retry | None:
    retry_in = card_deliver_attempt(
        request_id=request_id, attempt=self.request.retries + 1, final=self.request.retries >= MAX_RETRIES
    )
    if retry_in is not None:
        return self.retry(countdown=retry_in, throw=False)
    return None


@shared_task(bind=True, max_retries=MAX_RETRIES, acks_late=True, ignore_result=True)
def card_update(self, request_id: str) -> Retry | None:
    retry_in = card_update_attempt(
        request_id=request_id, attempt=self.request.retries + 1, final=self.request.retries >= MAX_RETRIES
    )
    if retry_in is not None:
        return self.retry(countdown=retry_in, throw=False)
    return None
