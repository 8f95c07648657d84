"""Card clicks answered on the server's event loop (production mode on PostgreSQL).

An approval platform answers clicks more than anything else, and Django's synchronous views cost
each one a thread made for it, a database connection wrapper of its own and, to follow the
verdict up, a broker round trip from the web process: together more than deciding the click
took. Here the common click is verified, mapped to its user, decided and answered without leaving
the loop: two reads on one of the loop's own connections (:mod:`fimone.adb`: the channel; then
the clicker's identity with the request and the clicker's standing on it) and the verdict's one
statement, which also puts its follow-up in the outbox (:mod:`fimone.outbox`); the replay check
and the count against the clicker's ``DECISION_RATE`` each await one Redis round trip. The rules
are the thread path's (``approvals.services``), not a copy of them.

Everything else, a provider that verifies in a thread (Slack, WeCom), a refusal to log (a click
past its rate among them), a click that is not the common kind, an unlinked clicker, is handed
with what was already done (the channel read, the callback parsed and its replay key spent, the
identity read, the click counted) to the thread path
(:func:`channels_im.callbacks.answer_parsed`), which answers it exactly as it answers the
callbacks it parses itself.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Literal

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from psycopg import AsyncConnection

from approvals.apis import DecisionThrottle
from approvals.channel_contract import CallbackResult
from approvals.channels import channel_for
from approvals.services import confirmation_decide_click_async
from channels_im.callbacks import (
    UNCOUNTED,
    answer_for_channel,
    answer_parsed,
    clicked_id,
    storable,
    unknown_channel,
)
from channels_im.identities import clicker_and_facts_async
from channels_im.selectors import channel_config_for_callback_async
from fimone import adb
from fimone.throttling import Refusal

log = logging.getLogger(__name__)


async def answer_callback(http_request: HttpRequest, callback_key: str) -> HttpResponse:
    """The answer to a callback to ``/im/callback/<callback_key>/``. The caller checked
    ``approvals.services.clicks_on_the_loop()``."""
    async with adb.connection() as db:  # one connection for the click's statements
        answer = await _answer_on_the_loop(db, http_request, callback_key)
    if isinstance(answer, HttpResponse):
        return answer
    return await sync_to_async(answer)()  # the connection is back in the pool meanwhile


async def _answer_on_the_loop(
    db: AsyncConnection, http_request: HttpRequest, callback_key: str
) -> HttpResponse | Callable[[], HttpResponse]:
    """The answer, or the thread path's work left to do (with what was done handed to it)."""
    config = await channel_config_for_callback_async(db, callback_key)
    if config is None:
        return unknown_channel()
    channel = channel_for(config)
    if http_request.method not in channel.callback_methods:
        return HttpResponseNotAllowed(sorted(channel.callback_methods))
    try:
        result = await channel.parse_callback_async(http_request)
    except Exception:  # a provider bug must not become a 500 or a decision
        log.exception("callback parsing failed for channel %s", config.pk)
        result = CallbackResult.refuse("malformed callback")
    if result is None:  # this provider verifies in a thread
        return functools.partial(answer_for_channel, http_request, config)
    unlogged = result.kind == "refusal" and result.request_id is None and storable(result.external_user_id)
    if result.kind == "challenge" or unlogged:  # as answer_parsed answers them: nothing to log
        return channel.callback_response(result, None)
    request_id = clicked_id(result) if result.kind == "decision" else None
    if request_id is None or not storable(result.external_user_id):
        return functools.partial(answer_parsed, config, channel, result)
    identity, facts = await clicker_and_facts_async(
        db, config=config, external_id=result.external_user_id, request_id=request_id
    )
    outcome = None
    rate: Refusal | Literal["uncounted"] | None = UNCOUNTED
    if identity is not None:
        rate = await _decision_rate_refusal(identity.user_id)
    if identity is not None and rate is None:  # within the rate (past it: logged by the thread path)
        outcome = await confirmation_decide_click_async(
            db,
            facts=facts,
            user=identity.user,
            approve=bool(result.approve),
            reason=result.reason,
            via_channel_id=config.pk,
            external_id=result.external_user_id,
        )
    if outcome is not None:
        return channel.callback_response(result, outcome)
    return functools.partial(answer_parsed, config, channel, result, identity=identity, decision_rate=rate)


async def _decision_rate_refusal(user_id: int) -> Refusal | Literal["uncounted"] | None:
    """Count a click of ``user_id`` against their ``DECISION_RATE`` without leaving the loop: the
    refusal past the rate, ``None`` within it, ``"uncounted"`` when Redis did not answer (the
    thread path then counts it, or lets it through as it does)."""
    try:
        return await DecisionThrottle().refusal_for_user_async(user_id)
    except Exception:
        log.warning("the decision rate of user %s could not be counted on the loop", user_id, exc_info=True)
        return UNCOUNTED
