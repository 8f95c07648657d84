"""Who a client is (its address), and request rates per user counted in a shared store.

:func:`client_ip` is the address sign-in lockouts (django-axes) and throttles key on: the socket's
peer (``REMOTE_ADDR``), unless ``CLIENT_IP_HEADER`` names the header a trusted proxy sets.

:class:`ScopedUserRateThrottle` is a DRF throttle whose rate comes from
``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"][scope]``. It counts with :mod:`fimone.rates`: a sliding
window (the last minute, hour, … as the rate says, not the calendar's), atomic, in Redis shared by
every process with ``REDIS_URL`` and in the process's memory in embedded mode; so concurrent
requests cannot slip past the limit the way DRF's read-then-write history can, and a refused
request is not counted. Callers without an HTTP request of the user (a card click from a chat,
mapped to the user) count with :meth:`~ScopedUserRateThrottle.refusal_for_user`, or on the event
loop :meth:`~ScopedUserRateThrottle.refusal_for_user_async` (one Redis round trip when within the
rate, same counters). A store that cannot be reached raises (Redis's error): a request then answers
503 with ``Retry-After`` (``portal.middleware.StoreUnavailable``), and each caller outside a
request decides (a card click is let through, logged).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from limits import RateLimitItem
from rest_framework.exceptions import Throttled
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from fimone import rates


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
        """Who is counted: ``user:<id>``, or ``ip:<address>`` for an anonymous caller."""
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            return f"user:{user.pk}"
        return f"ip:{client_ip(request)}"

    def refusal(self, request: Any, view: Any = None) -> Refusal | None:
        """``None`` when the request is within the rate (and is counted), else why it is not."""
        return self._count(self.get_cache_key(request, view))

    def refusal_for_user(self, user_id: int) -> Refusal | None:
        """:meth:`refusal` for an action of ``user_id`` that is not an HTTP request of theirs (a
        card click in a chat, mapped to them): the same counter as their requests."""
        return self._count(f"user:{user_id}")

    def refusal_for_user_taking(self, user_id: int, count: int) -> Refusal | None:
        """Count ``count`` actions of ``user_id`` at once (an eval run starts a run per case): all
        of them within the rate — counted — or none counted and the refusal, so a start refused
        as a whole does not use up what is left of the rate."""
        return self._count(f"user:{user_id}", count=count)

    async def refusal_for_user_async(self, user_id: int) -> Refusal | None:
        """:meth:`refusal_for_user` on the event loop: with Redis one round trip (two when
        refused: the count, then when to retry) of a client of the running loop's own; without
        Redis the process's memory counter (no I/O)."""
        item = self._limit()
        if item is None:
            return None
        ident = ("throttle", self.scope, f"user:{user_id}")
        if await rates.hit_async(item, *ident):
            return None
        return self._refusal(item, await rates.retry_after_async(item, *ident))

    def _limit(self) -> RateLimitItem | None:
        """The scope's rate; ``None`` when it has none (nothing is counted)."""
        rate = self.get_rate()
        if rate is None:
            return None
        return rates.rate(*self.parse_rate(rate))

    def _count(self, who: str, *, count: int = 1) -> Refusal | None:
        """Count ``count`` requests of ``who``, all or none; the refusal if they do not fit."""
        item = self._limit()
        if item is None:
            return None
        ident = ("throttle", self.scope, who)
        if rates.hit_all_or_none(item, *ident, count=count):
            return None
        return self._refusal(item, rates.retry_after(item, *ident, cost=count))

    def _refusal(self, item: RateLimitItem, wait: int) -> Refusal:
        seconds = item.get_expiry()
        unit = {1: "second", 60: "minute", 3600: "hour", 86400: "day"}[seconds]
        return Refusal(f"Too many {self.what}: the limit is {item.amount} per {unit}.", wait)

    def allow_request(self, request: Any, view: Any) -> bool:
        refused = self.refusal(request, view)
        if refused is not None:  # DRF adds "Expected available in N seconds." and Retry-After
            raise Throttled(wait=refused.wait, detail=refused.message)
        return True
