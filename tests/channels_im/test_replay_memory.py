"""A callback is remembered for its whole signature window, both ways, and (without Redis) in a
table that survives a restart and any number of other callbacks (docs/design.md §1.7)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import caches
from django.db import connection

from approvals.models import ConfirmationEvent
from channels_im import replay
from channels_im.models import ReplayKey
from channels_im.slack.transport import SIGNATURE_WINDOW_SECONDS
from tests.channels_im.slack_fake import FakeSlack, click_body, signed_headers
from tests.channels_im.test_slack_flow import Flow, ephemeral_text, park

pytestmark = pytest.mark.django_db(transaction=True)

Kind = ConfirmationEvent.Kind


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def embedded(settings) -> None:
    """The embedded mode's replay memory, whatever services this test run has."""
    settings.REDIS_URL = None


def click_signed_at(flow: Flow, timestamp: int) -> tuple[bytes, dict[str, str]]:
    body = click_body(request_id=str(flow.request.pk), user_id="U0APRIL")
    return body, signed_headers(body, timestamp=timestamp)


def assert_refused_as_replay(flow: Flow, response: Any) -> None:
    assert "already received" in ephemeral_text(response)
    request = flow.refresh()
    assert request.events.filter(kind=Kind.DECIDED).count() == 1
    [refused] = request.events.filter(kind=Kind.CLICK_REFUSED)
    assert "already received" in refused.details["reason"]


def restart_the_process() -> None:
    """What a restart loses: every cache of the process, and the purge clock."""
    for cache in caches.all():
        cache.clear()
    replay._last_purge = 0.0


def test_it_refuses_a_click_signed_ahead_of_our_clock_replayed_after_the_window(
    personas, resumes, slack, embedded, monkeypatch
) -> None:
    flow = park(personas, slack)
    now = time.time()
    body, headers = click_signed_at(flow, int(now) + 200)  # a sender's clock 200 s ahead: accepted
    assert flow.post(body, headers).json()["replace_original"] is True

    # 450 s later: past a memory of one window from the first sight, still well inside the window
    # of the click's own timestamp (250 s). No moment here is near an edge.
    monkeypatch.setattr(time, "time", lambda: now + 450)
    response = flow.post(body, headers)

    assert_refused_as_replay(flow, response)


@pytest.mark.redis
def test_it_keeps_a_slack_click_in_redis_for_both_halves_of_the_window(personas, resumes, slack) -> None:
    flow = park(personas, slack)
    seen: list[tuple[str, int]] = []
    remember = replay.first_time

    def spy(key: str, ttl_seconds: int) -> bool:
        seen.append((key, ttl_seconds))
        return remember(key, ttl_seconds)

    replay.first_time = spy  # type: ignore[assignment]
    try:
        assert flow.post(*flow.click()).json()["replace_original"] is True
    finally:
        replay.first_time = remember  # type: ignore[assignment]

    [(key, ttl)] = seen
    assert ttl >= 2 * SIGNATURE_WINDOW_SECONDS
    assert replay._redis().ttl(f"fimone:replay:{key}") > SIGNATURE_WINDOW_SECONDS + 250


def test_it_refuses_a_replay_after_the_process_restarts(personas, resumes, slack, embedded) -> None:
    flow = park(personas, slack)
    body, headers = flow.click()
    assert flow.post(body, headers).json()["replace_original"] is True

    restart_the_process()
    response = flow.post(body, headers)

    assert_refused_as_replay(flow, response)


def test_it_remembers_a_click_through_a_thousand_other_callbacks(personas, resumes, slack, embedded) -> None:
    flow = park(personas, slack)
    body, headers = flow.click()
    assert flow.post(body, headers).json()["replace_original"] is True

    for number in range(1000):
        assert replay.first_time(f"another-callback:{number}", 600)
    response = flow.post(body, headers)

    assert_refused_as_replay(flow, response)


def test_it_forgets_a_key_only_after_its_memory_ran_out_and_purges_expired_rows_in_bulk(
    embedded, monkeypatch
) -> None:
    now = time.time()
    assert replay.first_time("click", 600)
    assert replay.first_time("short", 10)
    assert not replay.first_time("click", 600)

    monkeypatch.setattr(time, "time", lambda: now + 599)
    assert not replay.first_time("click", 600)
    assert replay.first_time("short", 10), "its 10 s are over: new again"

    monkeypatch.setattr(time, "time", lambda: now + 601 + replay.PURGE_EVERY_SECONDS)
    assert replay.first_time("late", 600)  # a later callback purges what expired meanwhile
    assert ReplayKey.objects.count() == 1
    assert replay.first_time("click", 600)
    assert ReplayKey.objects.count() == 2


def test_it_lets_exactly_one_of_concurrent_first_deliveries_through(embedded) -> None:
    answers: list[bool] = []
    start = threading.Barrier(8)

    def deliver() -> None:
        try:
            start.wait()
            answers.append(replay.first_time("the-same-click", 600))
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert sorted(answers) == [False] * 7 + [True]
