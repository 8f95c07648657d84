"""Remembering which callbacks were already handled (replay protection).

With Redis, one process-wide client with its own connection pool: Django's cache objects live per
request context under ASGI, so going through them would open a Redis connection per callback.
Embedded, Django's local-memory cache serves (one process).
"""

from __future__ import annotations

import threading

import redis
from django.conf import settings
from django.core.cache import cache

_client: redis.Redis | None = None
_lock = threading.Lock()


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
        return bool(cache.add(key, 1, ttl_seconds))
    return bool(client.set(f"fimone:replay:{key}", 1, nx=True, ex=ttl_seconds))
