"""Spending budgets' counters: what a budget has used in a period, counted exactly across every
process, behind the ``budget`` hook (``agents/budget.py``).

A budget is a key (whose budget, which period) and a limit. A call reserves its amount under its
own id (:func:`reserve`): at once and all or nothing, and only once per call id, so a call
re-entered after a suspension or a crash never counts twice; a call that did not happen
(rejected, blocked, failed) gives its amount back to every budget that counted it
(:func:`release_call`), once. Amounts are counted in
millionths of their unit, as whole numbers, so that sums are exact.

Where the counters live:

* ``REDIS_URL`` set (production): in Redis, under ``fimone:budget:``, each reservation and each
  release one Lua script (atomic, one round trip); the period's keys expire with it.
* unset (embedded mode): in the database (``fimone.models.BudgetCounter``), under a row lock on the
  period's counter, so that a restart forgets nothing; the counters of ended periods are deleted
  when a budget starts a new one.
"""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import redis
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from fimone.models import BudgetCounter, BudgetReservation

KEY_PREFIX = "fimone:budget"
REDIS_TIMEOUT = 2
SCALE = 1_000_000
"""Amounts are counted in millionths of their unit."""

ALREADY, RESERVED, OVER, RESERVED_OVER = 0, 1, 2, 3
"""What :func:`reserve` did: the call was counted before; counted now, within the limit; not
counted, it would exceed the limit; counted although it exceeds the limit (``count_over``)."""

# KEYS: the period's total, its reservations (call id -> amount), the call's index (the budgets
# it is counted in). ARGV: call id, amount, limit, seconds to keep the keys, whether to count a
# call over the limit (1) or refuse it (0), the budget's key.
_RESERVE = """
local held = redis.call('HGET', KEYS[2], ARGV[1])
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if held then return {0, used} end
local amount, limit = tonumber(ARGV[2]), tonumber(ARGV[3])
local over = used + amount > limit
if over and ARGV[5] == '0' then return {2, used} end
used = redis.call('INCRBY', KEYS[1], amount)
redis.call('HSET', KEYS[2], ARGV[1], amount)
redis.call('SADD', KEYS[3], ARGV[6])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[4])
redis.call('EXPIRE', KEYS[3], ARGV[4])
if over then return {3, used} end
return {1, used}
"""

# KEYS: the call's index. ARGV: the call id, the keys' prefix. Gives the call's amount back to
# every budget it was counted in, once; returns how many.
_RELEASE_CALL = """
local released = 0
for _, key in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local calls = ARGV[2] .. ':' .. key .. ':calls'
  local held = redis.call('HGET', calls, ARGV[1])
  if held then
    redis.call('HDEL', calls, ARGV[1])
    redis.call('DECRBY', ARGV[2] .. ':' .. key .. ':used', held)
    released = released + 1
  end
end
redis.call('DEL', KEYS[1])
return released
"""


@dataclass(frozen=True)
class Reservation:
    outcome: int
    #: what the period has used after this reservation (or before a refused one), in units
    used: Decimal


def units(amount: object) -> int:
    """``amount`` (a number, or a string spelling one) in millionths; ``ValueError`` otherwise
    (booleans, NaN, infinities, negatives)."""
    if isinstance(amount, bool) or not isinstance(amount, int | float | str | Decimal):
        raise ValueError("not a number")
    try:
        value = Decimal(str(amount).strip())
    except InvalidOperation:
        raise ValueError("not a number") from None
    if not value.is_finite() or value < 0:
        raise ValueError("not a positive number")
    return int((value * SCALE).to_integral_value())


def as_amount(micro: int) -> Decimal:
    return (Decimal(micro) / SCALE).normalize()


_client: redis.Redis | None = None
_client_url: str | None = None
_client_lock = threading.Lock()


def _redis() -> redis.Redis:
    global _client, _client_url
    with _client_lock:
        if _client is None or _client_url != settings.REDIS_URL:
            _client = redis.Redis.from_url(
                settings.REDIS_URL, socket_timeout=REDIS_TIMEOUT, socket_connect_timeout=REDIS_TIMEOUT
            )
            _client_url = settings.REDIS_URL
        return _client


def _keys(key: str) -> tuple[str, str]:
    return f"{KEY_PREFIX}:{key}:used", f"{KEY_PREFIX}:{key}:calls"


def _index(call: str) -> str:
    return f"{KEY_PREFIX}-of:{call}"


def reserve(
    *, key: str, call: str, amount: int, limit: int, until: dt.datetime, count_over: bool = False
) -> Reservation:
    """Count ``amount`` (millionths) for ``call`` in budget ``key`` (whose period ends at
    ``until``) if it keeps the total within ``limit``, or in any case with ``count_over``.
    Idempotent per ``call``. Runs in the calling thread (blocking I/O)."""
    keep = max(1, int((until - timezone.now()).total_seconds()) + 3600)
    if settings.REDIS_URL:
        script = _redis().register_script(_RESERVE)
        keys = [*_keys(key), _index(call)]
        outcome, used = script(keys=keys, args=[call, amount, limit, keep, int(count_over), key])
        return Reservation(int(outcome), as_amount(int(used)))
    return _reserve_in_database(
        key=key, call=call, amount=amount, limit=limit, until=until, count_over=count_over
    )


def release_call(*, call: str) -> int:
    """Give ``call``'s amount back to every budget it was counted in, once; how many."""
    if settings.REDIS_URL:
        script = _redis().register_script(_RELEASE_CALL)
        return int(script(keys=[_index(call)], args=[call, KEY_PREFIX]))
    released = 0
    for held in BudgetReservation.objects.filter(call=call).values_list("pk", "counter_id"):
        with transaction.atomic():
            counter = BudgetCounter.objects.select_for_update().filter(pk=held[1]).first()
            reservation = BudgetReservation.objects.filter(pk=held[0]).first()
            if counter is None or reservation is None:
                continue
            reservation.delete()
            BudgetCounter.objects.filter(pk=counter.pk).update(used=counter.used - reservation.amount)
            released += 1
    return released


def used(*, key: str) -> Decimal:
    """What budget ``key`` has used so far (in units)."""
    if settings.REDIS_URL:
        raw = _redis().get(_keys(key)[0])
        return as_amount(int(raw or 0))
    counter = BudgetCounter.objects.filter(key=key).first()
    return as_amount(counter.used if counter is not None else 0)


def _reserve_in_database(
    *, key: str, call: str, amount: int, limit: int, until: dt.datetime, count_over: bool
) -> Reservation:
    for _attempt in range(2):  # a concurrent first reservation of the period may create the row
        try:
            with transaction.atomic():
                counter, created = BudgetCounter.objects.select_for_update().get_or_create(
                    key=key, defaults={"expires_at": until + dt.timedelta(hours=1)}
                )
                if created:  # a new period of this budget: the ended ones of all budgets go
                    forget_expired(keep=counter.pk)
                if BudgetReservation.objects.filter(counter=counter, call=call).exists():
                    return Reservation(ALREADY, as_amount(counter.used))
                over = counter.used + amount > limit
                if over and not count_over:
                    return Reservation(OVER, as_amount(counter.used))
                BudgetReservation.objects.create(counter=counter, call=call, amount=amount)
                total = counter.used + amount
                BudgetCounter.objects.filter(pk=counter.pk).update(used=total)
                return Reservation(RESERVED_OVER if over else RESERVED, as_amount(total))
        except IntegrityError:
            continue
    raise RuntimeError(f"budget {key}: could not count the call")


def forget_expired(*, now: dt.datetime | None = None, keep: int | None = None) -> int:
    """Delete the database counters of periods that ended but ``keep`` (Redis expires its keys
    itself)."""
    deleted, _ = BudgetCounter.objects.filter(expires_at__lte=now or timezone.now()).exclude(pk=keep).delete()
    return deleted
