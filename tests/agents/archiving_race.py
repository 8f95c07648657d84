"""A run start that waits on an agent's lock while its organisation is being archived: the test
kit for both ways a run starts (``agents.services.run_start`` in a thread, the MCP gateway's start
on the event loop)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction

from agents.archiving import organization_archive
from fimone.errors import ServiceError
from tenancy.models import Organization


def start_while_an_archiving_commits(
    *, organization: Organization, admin: Any, start: Callable[[], Any], waits_on_lock: Callable[[], bool]
) -> dict[str, Any]:
    """``start()`` called while ``organization_archive`` holds its locks, the archiving committed
    once the start waits for the agent's lock (``waits_on_lock()``): what the start came to,
    ``{"started": …}`` or ``{"refused": code}``."""
    archived, release = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def archive() -> None:
        try:
            with transaction.atomic():
                organization_archive(organization=organization, user=admin)
                archived.set()
                release.wait(20)
        finally:
            connection.close()

    def begin() -> None:
        try:
            outcome["started"] = start()
        except ServiceError as exc:
            outcome["refused"] = exc.code
        finally:
            connection.close()

    archiving, starting = threading.Thread(target=archive), threading.Thread(target=begin)
    archiving.start()
    assert archived.wait(20), "the archiving did not take its locks"
    starting.start()
    deadline = time.monotonic() + 20
    while not waits_on_lock() and time.monotonic() < deadline:
        time.sleep(0.02)
    release.set()
    archiving.join(20)
    starting.join(20)
    return outcome


def a_start_waits_on_a_lock() -> bool:
    """Whether a statement of this database waits on a row lock now (PostgreSQL)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0] > 0
