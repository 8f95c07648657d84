"""Who a client is (its address), and request rates per user counted atomically in a shared cache.

:func:`client_ip` is the address sign-in lockouts (django-axes) and throttles key on: the socket's
peer (``REMOTE_ADDR``), unless ``CLIENT_IP_HEADER`` names the header a trusted proxy sets.

:class:`ScopedUserRateThrottle` is a DRF throttle whose rate comes from
``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"][scope]``. It counts in fixed windows with an atomic
increment (Redis ``INCR``, or the local-memory cache's lock in embedded mode), so concurrent
requests cannot slip past the limit the way DRF's read-then-write history can. Its cache is the
``throttle`` alias (``settings.CACHES``), one object per process: Django's per-request cache
objects would open a Redis connection per request under ASGI. Callers without an HTTP request of
the user (a card click from a chat, mapped to the user) count with :meth:`~ScopedUserRateThrottle.
refusal_for_user`, or on the event loop :meth:`~ScopedUserRateThrottle.refusal_for_user_async`
(one Redis round trip, same counters).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import math
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import redis.asyncio
from django.conf import settings
from django.core.cache import BaseCache, caches
from django.http import HttpRequest
from rest_framework.exceptions import Throttled
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

THROTTLE_CACHE = "throttle"

_cache: BaseCache | None = None
_cache_lock = threading.Lock()


def _valid_ip(value: str | None) -> str | None:
    try:
        return str(ipaddress.ip_address((value or "").strip()))
    except ValueError:
        return None


def client_ip(request: HttpRequest) -> str | None:
    """The client's address: ``REMOTE_ADDR``, or, when ``CLIENT_IP_HEADER`` is set, the address
    that header carries (the ``CLIENT_IP_PROXY_COUNT``-th entry from the right of a list such as
    ``X-Forwarded-For``: the one the outermost trusted proxy saw; entries further left are
    whatever the client claimed). A missing or malformed header falls back to ``REMOTE_ADDR``."""
    header = getattr(settings, "CLIENT_IP_HEADER", None)
    if header:
        hops = [hop for hop in request.META.get(header, "").split(",") if hop.strip()]
        count = getattr(settings, "CLIENT_IP_PROXY_COUNT", 1)
        if len(hops) >= count and (address := _valid_ip(hops[-count])) is not None:
            return address
    return _valid_ip(request.META.get("REMOTE_ADDR"))


_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, redis.asyncio.Redis] = (
    weakref.WeakKeyDictionary()
)


def _async_redis() -> redis.asyncio.Redis:
    """The running loop's own Redis client (an asyncio client belongs to its loop)."""
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        client = _async_clients[loop] = redis.asyncio.Redis.from_url(
            settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2
        )
    return client


async def close_async() -> None:
    """Close the running loop's counter client, if it has one (a loop about to end)."""
    client = _async_clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()


def throttle_cache() -> BaseCache:
    global _cache  # one cache object (and Redis pool) per process, made on first use
    with _cache_lock:
        if _cache is None:
            _cache = caches.create_connection(THROTTLE_CACHE)
        return _cache


@dataclass(frozen=True)
class Refusal:
    """A request over its rate: what to tell the client, and how many seconds until it may retry."""

    message: str
    wait: int


class ScopedUserRateThrottle(SimpleRateThrottle):
    """At most the ``scope``'s rate of requests per user (per address for an anonymous caller).

    A refused request raises :class:`~rest_framework.exceptions.Throttled` with :attr:`what` in its
    message and the seconds to wait (DRF answers 429 with ``Retry-After``). Views outside DRF call
    :meth:`refusal` instead.
    """

    scope = ""
    what = "requests"
    """What is being counted, for the message ("Too many runs started: …")."""

    def __init__(self) -> None:  # the rate is read when used: settings may change (tests)
        pass

    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_cache_key(self, request: Any, view: Any) -> str:
        user = getattr(request, "user", None)
        ident = (
            f"user:{user.pk}" if user is not None and user.is_authenticated else f"ip:{client_ip(request)}"
        )
        return f"throttle:{self.scope}:{ident}"

    def key_for_user(self, user_id: int) -> str:
        """The counter of ``user_id`` (the one :meth:`get_cache_key` names for their requests)."""
        return f"throttle:{self.scope}:user:{user_id}"

    def refusal(self, request: Any, view: Any = None) -> Refusal | None:
        """``None`` when the request is within the rate (and is counted), else why it is not."""
        return self._count(self.get_cache_key(request, view))

    def refusal_for_user(self, user_id: int) -> Refusal | None:
        """:meth:`refusal` for an action of ``user_id`` that is not an HTTP request of theirs (a
        card click in a chat, mapped to them): the same counter as their requests."""
        return self._count(self.key_for_user(user_id))

    def refusal_for_user_taking(self, user_id: int, count: int) -> Refusal | None:
        """Count ``count`` actions of ``user_id`` at once (an eval run starts a run per case): all
        of them within the rate — counted — or none counted and the refusal, so a start refused
        as a whole does not use up what is left of the window."""
        return self._count(self.key_for_user(user_id), count=count, all_or_none=True)

    async def refusal_for_user_async(self, user_id: int) -> Refusal | None:
        """:meth:`refusal_for_user` on the event loop: with Redis one round trip of a client of the
        running loop's own; without Redis the local-memory counter (no I/O)."""
        window = self._window()
        if window is None:
            return None
        if settings.REDIS_URL is None:
            return self._count(self.key_for_user(user_id))
        limit, period, now, number = window
        key = throttle_cache().make_key(f"{self.key_for_user(user_id)}:{number}")
        async with _async_redis().pipeline(transaction=False) as pipe:
            pipe.set(key, 0, nx=True, ex=period + 1)  # what the cache's add() writes
            pipe.incr(key)
            _, count = await pipe.execute()
        return self._verdict(count, limit, period, now, number)

    def _window(self) -> tuple[int, int, float, int] | None:
        """The rate's (limit, period) with now and the number of the current window; ``None``
        when the scope has no rate."""
        rate = self.get_rate()
        if rate is None:
            return None
        limit, period = self.parse_rate(rate)
        now = self.timer()
        return limit, period, now, int(now // period)

    def _count(self, key: str, *, count: int = 1, all_or_none: bool = False) -> Refusal | None:
        """Add ``count`` to ``key``'s counter of the current window; the refusal if that goes past
        the rate (then, ``all_or_none``, the ``count`` is taken back)."""
        window = self._window()
        if window is None:
            return None
        limit, period, now, number = window
        bucket = f"{key}:{number}"
        cache = throttle_cache()
        cache.add(bucket, 0, timeout=period + 1)
        try:
            total = cache.incr(bucket, count)
        except ValueError:  # the bucket expired between the two calls: this request opens it
            cache.add(bucket, count, timeout=period + 1)
            total = count
        refused = self._verdict(total, limit, period, now, number)
        if refused is not None and all_or_none:
            with contextlib.suppress(ValueError):  # expired meanwhile: nothing left to give back
                cache.decr(bucket, count)
        return refused

    def _verdict(self, count: int, limit: int, period: int, now: float, number: int) -> Refusal | None:
        if count <= limit:
            return None
        wait = max(1, math.ceil((number + 1) * period - now))
        unit = {1: "second", 60: "minute", 3600: "hour", 86400: "day"}[period]
        return Refusal(f"Too many {self.what}: the limit is {limit} per {unit}.", wait)

    def allow_request(self, request: Any, view: Any) -> bool:
        refused = self.refusal(request, view)
        if refused is not None:  # DRF adds "Expected available in N seconds." and Retry-After
            raise Throttled(wait=refused.wait, detail=refused.message)
        return True
