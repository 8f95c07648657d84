"""The transactional outbox (fimone/outbox.py): a task queued in a transaction is sent once that
transaction commits, and never if it rolls back; the relay sends at least once, never loses a
message to a failed send, a dead database connection or a second relay, and wakes on commit."""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.conf import settings
from django.db import connection, transaction

from fimone import outbox
from fimone.models import OutboxMessage
from fimone.outbox import outbox_enqueue, relay_batch, relay_connection, relay_forever

TASK = "approvals.tasks.confirmation_settled_task"


class RecordingApp:
    """Celery's side of the relay, recorded: ``producer_or_acquire`` and ``send_task``. With
    ``fail_at``, the send of that many-th message raises, as a broker outage would."""

    def __init__(self, *, fail_at: int | None = None, delay: float = 0.0) -> None:
        self.sent: list[tuple[str, list[Any]]] = []
        self.fail_at, self.delay = fail_at, delay
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def producer_or_acquire(self) -> Iterator[object]:
        yield object()

    def send_task(self, name: str, *, args: list[Any], producer: object) -> None:
        time.sleep(self.delay)
        with self.lock:
            if self.fail_at is not None and len(self.sent) + 1 == self.fail_at:
                self.fail_at = None
                raise ConnectionError("the broker went away")
            self.sent.append((name, args))


@pytest.fixture
def relay() -> Iterator[Any]:
    with relay_connection() as conn:
        yield conn


def wake_up() -> None:
    """A notification, so that a relay told to stop does so now rather than at its next poll."""
    with connection.cursor() as cursor:
        cursor.execute(f"NOTIFY {outbox.NOTIFY_CHANNEL}")


def queue(count: int, *, start: int = 0) -> None:
    with transaction.atomic():
        for index in range(start, start + count):
            outbox_enqueue(task=TASK, args=["request", index, "feishu", "approved"])


pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]  # the relay's own session


def test_a_task_queued_in_a_committed_transaction_is_sent_once_and_its_row_removed(relay: Any) -> None:
    app = RecordingApp()
    queue(3)

    assert relay_batch(relay, app) == 3
    assert relay_batch(relay, app) == 0

    assert app.sent == [(TASK, ["request", index, "feishu", "approved"]) for index in range(3)]
    assert not OutboxMessage.objects.exists()


def test_a_task_queued_in_a_rolled_back_transaction_is_never_sent(relay: Any) -> None:
    app = RecordingApp()
    with contextlib.suppress(RuntimeError), transaction.atomic():
        outbox_enqueue(task=TASK, args=["gone"])
        raise RuntimeError("the change failed")

    assert relay_batch(relay, app) == 0
    assert app.sent == []


def test_a_failed_send_keeps_the_whole_batch_for_the_next_try(relay: Any) -> None:
    queue(4)
    broken = RecordingApp(fail_at=3)

    with pytest.raises(ConnectionError):
        relay_batch(relay, broken)

    assert OutboxMessage.objects.count() == 4, "a message was deleted though its batch failed"
    working = RecordingApp()
    assert relay_batch(relay, working) == 4
    assert [args[1] for _, args in working.sent] == [0, 1, 2, 3]
    assert not OutboxMessage.objects.exists()


def test_two_relays_at_once_send_every_message_exactly_once() -> None:
    queue(120)
    app = RecordingApp(delay=0.002)

    def drain() -> None:
        with relay_connection() as conn:
            while relay_batch(conn, app, batch=10):
                pass

    relays = [threading.Thread(target=drain) for _ in range(2)]
    for thread in relays:
        thread.start()
    for thread in relays:
        thread.join(30)

    numbers = sorted(args[1] for _, args in app.sent)
    assert numbers == list(range(120)), "a message was sent twice or never"


def test_the_relay_sends_a_task_as_soon_as_its_transaction_commits() -> None:
    app, stop = RecordingApp(), threading.Event()
    running = threading.Thread(target=relay_forever, args=(app,), kwargs={"stop": stop, "poll_seconds": 30})
    running.start()
    try:
        time.sleep(0.5)  # listening
        started = time.monotonic()
        queue(1)
        while not app.sent and time.monotonic() - started < 5:
            time.sleep(0.01)
        took = time.monotonic() - started
    finally:
        stop.set()
        wake_up()
        running.join(35)
    assert app.sent == [(TASK, ["request", 0, "feishu", "approved"])]
    assert took < 2, f"sent {took:.1f} s after the commit: the relay waited for its poll, not the NOTIFY"


def test_the_relay_reconnects_when_its_database_connection_is_killed(monkeypatch) -> None:
    monkeypatch.setattr(outbox, "RETRY_SECONDS", 0.1)
    app, stop = RecordingApp(), threading.Event()
    running = threading.Thread(target=relay_forever, args=(app,), kwargs={"stop": stop, "poll_seconds": 0.2})
    running.start()
    try:
        time.sleep(0.5)
        with connection.cursor() as cursor:  # the relay's session ends, as in a database restart
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = %s",
                [outbox.APPLICATION_NAME],
            )
            assert cursor.fetchone() is not None
        time.sleep(0.3)
        queue(2)
        deadline = time.monotonic() + 10
        while len(app.sent) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        running.join(10)
    assert [args[1] for _, args in app.sent] == [0, 1]


@pytest.mark.redis
def test_the_relay_hands_the_task_to_the_celery_broker_as_celery_sends_it(relay: Any) -> None:
    from fimone.celery import app

    name = f"outbox-test-{time.monotonic_ns()}"
    client = redis.Redis.from_url(settings.REDIS_URL)
    previous = app.conf.task_default_queue, app.conf.task_always_eager
    app.conf.task_default_queue, app.conf.task_always_eager = name, False  # a broker, as deployed
    try:
        queue(1)
        assert relay_batch(relay, app) == 1
        [raw] = client.lrange(name, 0, -1)
    finally:
        app.conf.task_default_queue, app.conf.task_always_eager = previous
        client.delete(name)
        client.close()
    message = json.loads(raw)
    assert message["headers"]["task"] == TASK
    args, kwargs, _ = json.loads(base64.b64decode(message["body"]))
    assert (args, kwargs) == (["request", 0, "feishu", "approved"], {})


def test_the_notification_comes_only_for_a_statement_that_queued_something(relay: Any) -> None:
    queue(1)
    assert [note.channel for note in relay.notifies(timeout=2, stop_after=1)] == [outbox.NOTIFY_CHANNEL]
    OutboxMessage.objects.filter(pk=-1).update(task="x")  # changes nothing
    with connection.cursor() as cursor:
        cursor.execute(  # inserts no row: the statement trigger fires, and stays silent
            f"INSERT INTO {OutboxMessage._meta.db_table} (task, args, created_at) "
            "SELECT 'x', '[]'::jsonb, now() WHERE false"
        )
    assert list(relay.notifies(timeout=0.5, stop_after=1)) == []
