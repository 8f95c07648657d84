"""Rate counters: the one counting mechanism behind the request throttles (fimone/throttling.py)
and the ``connector_rate_limit`` hook (agents/rate_limit.py).

A rate is N hits per W seconds (:func:`rate`), counted per identifiers (a scope and a user, a
connector and a user, …) by the ``limits`` library's sliding-window counter
(:class:`~limits.strategies.SlidingWindowCounterRateLimiter`): a hit is allowed while the count of
the current window plus the count of the previous one, weighted by the share of it still inside
the last W seconds, stays within N. So no burst of 2N across a window's edge as fixed windows
allowed; a user who used up the rate gets a hit back as the previous window slides out, not all N
at once. A hit of ``cost`` > 1 is all or none (:func:`hit_all_or_none`); a refused hit is not
counted, so asking again neither shortens nor lengthens the wait. :func:`retry_after` says how
many whole seconds until a hit of that cost would be allowed.

Where the counters live depends on ``settings.REDIS_URL``:

* set (production): in Redis, under ``fimone:rates:``, shared by every process, so a user's rate is
  counted once across all servers and workers. A hit is one Lua script, atomic, one round trip;
  reading when to retry is another. Callers in threads share one connection pool per process;
  coroutines (:func:`hit_async`, :func:`retry_after_async`) use ``limits.aio`` with a client of the
  running event loop's own (an asyncio client belongs to the loop that opened it), closed by
  :func:`close_async`. A Redis that does not answer within 2 s raises redis's error: the caller
  decides whether that refuses (the hook fails closed) or not.
* unset (embedded mode, one process): in this process's memory, behind one lock so that hits from
  concurrent threads are counted exactly. The async helpers count in the same memory (no I/O).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio
from django.conf import settings
from limits import RateLimitItem, RateLimitItemPerSecond
from limits.aio.storage import RedisStorage as AsyncRedisStorage
from limits.aio.strategies import SlidingWindowCounterRateLimiter as AsyncSlidingWindowCounterRateLimiter
from limits.storage import MemoryStorage, RedisStorage
from limits.strategies import SlidingWindowCounterRateLimiter

KEY_PREFIX = "fimone:rates"
"""Every Redis key of a counter starts with ``fimone:rates:``."""

REDIS_TIMEOUT = 2
"""Seconds a Redis connection or command may take before the count fails."""

# The storages are handed a connection pool of ours, so the URI they are given only names the
# client library (redis-py); the real address, unix sockets included, is in the pool.
_LIBRARY_URI = "redis://"


def rate(amount: int, seconds: int) -> RateLimitItem:
    """``amount`` hits per ``seconds``."""
    return RateLimitItemPerSecond(amount, seconds)


@dataclass(frozen=True)
class _Counter:
    limiter: SlidingWindowCounterRateLimiter
    lock: threading.Lock | None  # memory only: its check-then-add is not atomic across threads

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        if self.lock is None:
            yield
        else:
            with self.lock:
                yield


_counters: dict[str | None, _Counter] = {}
_counters_lock = threading.Lock()


def _counter() -> _Counter:
    """This process's counter for the configured store, made on first use."""
    url = settings.REDIS_URL
    with _counters_lock:
        counter = _counters.get(url)
        if counter is None:
            if url is None:
                counter = _Counter(SlidingWindowCounterRateLimiter(MemoryStorage()), threading.Lock())
            else:
                pool = redis.ConnectionPool.from_url(
                    url, socket_timeout=REDIS_TIMEOUT, socket_connect_timeout=REDIS_TIMEOUT
                )
                storage = RedisStorage(_LIBRARY_URI, connection_pool=pool, key_prefix=KEY_PREFIX)
                counter = _Counter(SlidingWindowCounterRateLimiter(storage), None)
            _counters[url] = counter
        return counter


def limiter() -> SlidingWindowCounterRateLimiter:
    """This process's limiter (its storage: Redis with ``REDIS_URL``, else memory). Count with the
    functions below: in memory they hold the lock that makes the count exact."""
    return _counter().limiter


def hit(item: RateLimitItem, *identifiers: str | int) -> bool:
    """Count one hit of ``identifiers`` against ``item``: ``True`` if counted (within the rate),
    ``False`` if refused (and not counted)."""
    return hit_all_or_none(item, *identifiers, count=1)


def hit_all_or_none(item: RateLimitItem, *identifiers: str | int, count: int) -> bool:
    """Count ``count`` hits at once: all of them if they fit within the rate, else none (``False``).
    More than the rate's amount never fits."""
    counter = _counter()
    with counter.exclusive():
        return counter.limiter.hit(item, *identifiers, cost=count)


def retry_after(item: RateLimitItem, *identifiers: str | int, cost: int = 1) -> int:
    """Whole seconds (at least 1) until a hit of ``cost`` would be allowed, if nothing else is
    counted meanwhile; the rate's window for a cost above its amount."""
    counter = _counter()
    storage: Any = counter.limiter.storage
    with counter.exclusive():
        window = storage.get_sliding_window(item.key_for(*identifiers), item.get_expiry())
    return _whole_seconds(_seconds_until_room(item, cost, *window))


_async_counters: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop,
    dict[str, tuple[AsyncSlidingWindowCounterRateLimiter, redis.asyncio.ConnectionPool]],
] = weakref.WeakKeyDictionary()


def _async_limiter(url: str) -> AsyncSlidingWindowCounterRateLimiter:
    """The running loop's own limiter on Redis at ``url``."""
    per_url = _async_counters.setdefault(asyncio.get_running_loop(), {})
    if url not in per_url:
        pool = redis.asyncio.ConnectionPool.from_url(
            url, socket_timeout=REDIS_TIMEOUT, socket_connect_timeout=REDIS_TIMEOUT
        )
        storage = AsyncRedisStorage(
            f"async+{_LIBRARY_URI}", implementation="redispy", key_prefix=KEY_PREFIX, connection_pool=pool
        )
        per_url[url] = (AsyncSlidingWindowCounterRateLimiter(storage), pool)
    return per_url[url][0]


async def hit_async(item: RateLimitItem, *identifiers: str | int) -> bool:
    """:func:`hit` on the event loop: with Redis one round trip of the running loop's own client;
    without it the process's memory counter (no I/O)."""
    url = settings.REDIS_URL
    if url is None:
        return hit(item, *identifiers)
    return await _async_limiter(url).hit(item, *identifiers)


async def retry_after_async(item: RateLimitItem, *identifiers: str | int, cost: int = 1) -> int:
    """:func:`retry_after` on the event loop."""
    url = settings.REDIS_URL
    if url is None:
        return retry_after(item, *identifiers, cost=cost)
    storage: Any = _async_limiter(url).storage
    window = await storage.get_sliding_window(item.key_for(*identifiers), item.get_expiry())
    return _whole_seconds(_seconds_until_room(item, cost, *window))


async def close_async() -> None:
    """Close the running loop's Redis clients, if it has any (a loop about to end)."""
    for _limiter, pool in _async_counters.pop(asyncio.get_running_loop(), {}).values():
        await pool.aclose()


def _seconds_until_room(
    item: RateLimitItem, cost: int, previous: int, previous_ttl: float, current: int, current_ttl: float
) -> float:
    """Seconds from now until ``cost`` more hits fit, given the sliding window as the storage
    reports it: the previous window's count and the seconds until it has slid out entirely, the
    current window's count and the seconds until it has (it becomes the previous window when that
    drops to one window length). ``cost`` hits are allowed when
    ``floor(previous * previous_ttl / window) + current + cost <= amount``."""
    length = item.get_expiry()
    room = item.amount - cost  # what the weighted count may be for the hit to fit
    if room < 0:
        return length
    if current <= room:  # fits once enough of the previous window has slid out
        if previous == 0:
            return 0.0
        return max(0.0, previous_ttl - (room - current + 1) * length / previous)
    # Only once the current window is the previous one, and enough of it has slid out.
    return max(current_ttl - length, current_ttl - (room + 1) * length / current, 0.0)


def _whole_seconds(seconds: float) -> int:
    """``seconds`` rounded up, at least 1. (The weighted count must fall below its threshold, not
    reach it, but whoever is told a whole number of seconds only retries once it has passed.)"""
    return max(1, math.ceil(seconds))


def forget_counts_in_memory() -> None:
    """Forget every count kept in this process's memory (tests: each starts at zero)."""
    with _counters_lock:
        counter = _counters.get(None)
    if counter is not None:
        with counter.exclusive():
            counter.limiter.storage.reset()
