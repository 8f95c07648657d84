"""Calling the ORM from the engine's coroutines.

Like ``channels.db.database_sync_to_async`` it drops broken or expired connections before each
call, so a long-lived worker survives a database restart; unlike it, it leaves a connection alone
while it is inside a transaction (a caller driving the engine inside ``atomic()``, as tests do).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections

T = TypeVar("T")


def _fresh_call(fn: Callable[..., T], kwargs: dict[str, Any]) -> T:
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close_if_unusable_or_obsolete()
    return fn(**kwargs)


_call = sync_to_async(_fresh_call, thread_sensitive=True)


async def db(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """Run ``fn(**kwargs)`` in the thread that owns the ORM connection and return its result."""
    return await _call(fn, kwargs)
