"""Who a client is (its address), and request rates per user counted atomically in a shared cache.

:func:`client_ip` is the address sign-in lockouts (django-axes) and throttles key on: the socket's
peer (``REMOTE_ADDR``), unless ``CLIENT_IP_HEADER`` names the header a trusted proxy sets.

:class:`ScopedUserRateThrottle` is a DRF throttle whose rate comes from
``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"][scope]``. It counts in fixed windows with an atomic
increment (Redis ``INCR``, or the local-memory cache's lock in embedded mode), so concurrent
requests cannot slip past the limit the way DRF's read-then-write history can. Its cache is the
``throttle`` alias (``settings.CACHES``), one object per process: Django's per-request cache
objects would open a Redis connection per request under ASGI.
"""

from __future__ import annotations

import ipaddress
import math
import threading
from dataclasses import dataclass
from typing import Any

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

    def refusal(self, request: Any, view: Any = None) -> Refusal | None:
        """``None`` when the request is within the rate (and is counted), else why it is not."""
        rate = self.get_rate()
        if rate is None:
            return None
        limit, period = self.parse_rate(rate)
        now = self.timer()
        window = int(now // period)
        bucket = f"{self.get_cache_key(request, view)}:{window}"
        cache = throttle_cache()
        cache.add(bucket, 0, timeout=period + 1)
        try:
            count = cache.incr(bucket)
        except ValueError:  # the bucket expired between the two calls: this request opens it
            cache.add(bucket, 1, timeout=period + 1)
            count = 1
        if count <= limit:
            return None
        wait = max(1, math.ceil((window + 1) * period - now))
        unit = {1: "second", 60: "minute", 3600: "hour", 86400: "day"}[period]
        return Refusal(f"Too many {self.what}: the limit is {limit} per {unit}.", wait)

    def allow_request(self, request: Any, view: Any) -> bool:
        refused = self.refusal(request, view)
        if refused is not None:  # DRF adds "Expected available in N seconds." and Retry-After
            raise Throttled(wait=refused.wait, detail=refused.message)
        return True
