"""Remembering which callbacks were already handled (replay protection).

With Redis, one process-wide client with its own connection pool: Django's cache objects live per
request context under ASGI, so going through them would open a Redis connection per callback.
Without Redis (embedded mode) the memory is a table (:class:`~channels_im.models.ReplayKey`), not
the process's local-memory cache: a replay must still be refused after a restart, and however many
other callbacks arrived in between (a bounded cache would have evicted the key).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import threading
import time
import weakref

import redis
import redis.asyncio
from django.conf import settings
from django.db import IntegrityError, transaction

from channels_im.models import ReplayKey

PURGE_EVERY_SECONDS = 60
"""How often (at most, per process) expired rows of the replay table are deleted."""

_client: redis.Redis | None = None
_lock = threading.Lock()
_last_purge = 0.0


def _redis() -> redis.Redis | None:
    global _client  # one client (and pool) per process, made on first use
    if settings.REDIS_URL is None:
        return None
    with _lock:
        if _client is None:
            _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        return _client


def first_time(key: str, ttl_seconds: int) -> bool:
    """``True`` the first time ``key`` is seen within ``ttl_seconds``; atomic across processes.

    Raises on a store outage: callers refuse the callback then (failing closed lets no replay in).
    """
    client = _redis()
    if client is None:
        return _first_time_in_table(key, ttl_seconds)
    return bool(client.set(f"fimone:replay:{key}", 1, nx=True, ex=ttl_seconds))


_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, redis.asyncio.Redis] = (
    weakref.WeakKeyDictionary()
)


async def first_time_async(key: str, ttl_seconds: int) -> bool:
    """:func:`first_time` on the event loop, through a client of the running loop's own (an
    asyncio client belongs to its loop). Needs Redis; the same key space as :func:`first_time`,
    so a click seen by either is a replay to both."""
    if settings.REDIS_URL is None:
        raise RuntimeError("the replay memory on the event loop needs Redis")
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        client = _async_clients[loop] = redis.asyncio.Redis.from_url(
            settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2
        )
    return bool(await client.set(f"fimone:replay:{key}", 1, nx=True, ex=ttl_seconds))


async def close_async() -> None:
    """Close the running loop's client, if it has one (a loop about to end)."""
    client = _async_clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()


def _moment(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


def _first_time_in_table(key: str, ttl_seconds: int) -> bool:
    now = time.time()
    digest = hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()
    expires_at = _moment(now + ttl_seconds)
    _purge_now_and_then(now)
    try:
        with transaction.atomic():
            ReplayKey.objects.create(key=digest, expires_at=expires_at)
        return True
    except IntegrityError:
        # Seen before. It is new again only if its memory ran out (not purged yet): one
        # conditional update, so of two callers racing on an expired key exactly one wins.
        renewed = ReplayKey.objects.filter(key=digest, expires_at__lte=_moment(now)).update(
            expires_at=expires_at
        )
        return renewed == 1


def _purge_now_and_then(now: float) -> None:
    global _last_purge
    if now - _last_purge < PURGE_EVERY_SECONDS:
        return
    _last_purge = now
    purge_expired(now=now)


def purge_expired(*, now: float | None = None) -> int:
    """Delete the replay keys whose memory ran out (one bulk ``DELETE``); returns how many."""
    moment = _moment(time.time() if now is None else now)
    deleted, _ = ReplayKey.objects.filter(expires_at__lte=moment).delete()
    return deleted
