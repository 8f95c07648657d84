"""Reads of agents, runs and their events."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async


@database_sync_to_async
def run_visible_to(*, run_id: int, user: Any) -> bool:
    """Whether ``user`` may read run ``run_id`` (its own runs only)."""
    from agents.models import Run

    return Run.objects.filter(pk=run_id, user=user).exists()
