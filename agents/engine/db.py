"""Calling the ORM from the engine's coroutines.

The engine's ORM calls run in one long-lived thread, so its connection is kept open across calls
(opening one costs milliseconds, more than the work of a whole step). Like
``channels.db.database_sync_to_async`` it drops a connection that broke (after an error, if it no
longer answers), so a worker survives a database restart; it never touches a connection inside a
transaction (a caller driving the engine inside ``atomic()``, as tests do).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections

T = TypeVar("T")


def _fresh_call(fn: Callable[..., T], kwargs: dict[str, Any]) -> T:
    for conn in connections.all(initialized_only=True):
        if conn.connection is None or conn.in_atomic_block:
            continue
        if conn.errors_occurred and not conn.is_usable():
            conn.close()
        conn.errors_occurred = False
    return fn(**kwargs)


_call = sync_to_async(_fresh_call, thread_sensitive=True)


async def db(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """Run ``fn(**kwargs)`` in the thread that owns the ORM connection and return its result."""
    return await _call(fn, kwargs)
