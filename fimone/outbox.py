"""A transactional outbox for Celery tasks that follow up a database change (PostgreSQL).

Sending a Celery message from the process that made the change costs that process a broker round
trip and kombu's message building (for a card click, more than deciding it did), and a process
that dies between its commit and the send loses the follow-up. Instead the change's own statement
(or transaction) inserts an :class:`~fimone.models.OutboxMessage` row (:func:`insert_sql`,
:func:`outbox_enqueue`); a trigger makes PostgreSQL ``NOTIFY`` on commit, and the relay
(``python manage.py outbox_relay``, one or more per deployment) sends each row's task and deletes
the row, in one transaction per batch.

Delivery is at least once: a relay killed after sending and before its commit leaves the rows,
and they are sent again, so only idempotent tasks go through here. Relays share the work with
``FOR UPDATE SKIP LOCKED``: two relays never hold the same row. A missed notification (the relay
was reconnecting) costs at most :data:`POLL_SECONDS`: the relay also looks without being told.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone

from fimone.models import OutboxMessage

log = logging.getLogger(__name__)

NOTIFY_CHANNEL = "fimone_outbox"
"""The channel the insert trigger notifies (installed by ``fimone``'s migration)."""
APPLICATION_NAME = "fimone-outbox-relay"
"""How the relay's sessions are named to the database (``pg_stat_activity.application_name``)."""
POLL_SECONDS = 1.0
"""How long the relay waits for a notification before it looks anyway."""
BATCH = 200
"""The most rows one relay transaction sends."""
RETRY_SECONDS = 2.0
"""How long the relay waits after the database or the broker failed it."""
LINGER_SECONDS = 0.01
"""Under load (the relay sent something less than :data:`BUSY_SECONDS` ago), how long it lets a
notification's company arrive before it sends: one transaction then sends several messages (a
batch costs the relay about what a message does), at the price of this much delay. A message
after a quiet spell is sent at once."""
BUSY_SECONDS = 0.1


def _table() -> str:
    return connections[DEFAULT_DB_ALIAS].ops.quote_name(OutboxMessage._meta.db_table)


def insert_sql(*, task: str, args: list[Any], source: str) -> tuple[str, list[Any]]:
    """An ``INSERT`` of one message per row of ``source`` (a CTE name of the caller's statement,
    e.g. the rows an ``UPDATE`` changed), for use as a CTE of that statement: the message exists
    exactly when the change does."""
    sql = (
        f"INSERT INTO {_table()} (task, args, created_at) "  # noqa: S608 - our names only
        f"SELECT %s, %s::jsonb, now() FROM {source}"
    )
    return sql, [task, json.dumps(args)]


def outbox_enqueue(*, task: str, args: list[Any]) -> OutboxMessage:
    """Queue ``task(*args)`` to be sent once the caller's transaction commits (nothing is sent if
    it rolls back)."""
    return OutboxMessage.objects.create(task=task, args=args, created_at=timezone.now())


def relay_connection() -> psycopg.Connection:
    """A connection of the relay's own to the default database (autocommit, listening)."""
    params = connections[DEFAULT_DB_ALIAS].get_connection_params()
    for django_only in ("context", "cursor_factory", "prepare_threshold"):
        params.pop(django_only, None)
    params["application_name"] = APPLICATION_NAME  # pg_stat_activity names the relay
    connection = psycopg.connect(**params, autocommit=True)
    connection.execute(f"LISTEN {NOTIFY_CHANNEL}")
    return connection


def relay_batch(connection: psycopg.Connection, app: Any, *, batch: int = BATCH) -> int:
    """Send up to ``batch`` messages, oldest first, and delete them, in one transaction: if a send
    fails nothing is deleted (and what was sent before it in the batch is sent again later).
    Returns how many were sent."""
    with connection.transaction():
        found = connection.execute(
            f"DELETE FROM {_table()} WHERE id IN ("  # noqa: S608 - our names only
            f"SELECT id FROM {_table()} ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED) "
            "RETURNING id, task, args",
            [batch],
        ).fetchall()
        if not found:
            return 0
        with app.producer_or_acquire() as producer:
            for _, task, args in sorted(found):
                app.send_task(task, args=args, producer=producer)
    return len(found)


def relay_forever(
    app: Any,
    *,
    stop: threading.Event | None = None,
    poll_seconds: float = POLL_SECONDS,
    linger_seconds: float = LINGER_SECONDS,
) -> None:
    """Send queued messages as they commit until ``stop`` is set (or forever). Survives the
    database and the broker going away: it logs, waits :data:`RETRY_SECONDS` and reconnects."""
    stop = stop or threading.Event()
    while not stop.is_set():
        try:
            with relay_connection() as connection:
                log.info("outbox relay listening")
                last_sent = 0.0
                while not stop.is_set():
                    while (sent := relay_batch(connection, app)) == BATCH:
                        pass
                    if sent:
                        last_sent = time.monotonic()
                    told = list(connection.notifies(timeout=poll_seconds, stop_after=1))
                    if told and time.monotonic() - last_sent < BUSY_SECONDS:
                        stop.wait(linger_seconds)
                        list(connection.notifies(timeout=0))  # the next batch takes theirs too
        except Exception:
            log.exception("outbox relay failed; retrying in %.0f s", RETRY_SECONDS)
            stop.wait(RETRY_SECONDS)
