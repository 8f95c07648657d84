"""Starting and resuming runs: claim the lease with one conditional update, then drive the engine.

Both entry points are idempotent: of any number of concurrent callers for one run, exactly one wins
the claim and drives it; the others return ``None`` at once.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable
from typing import Any

from agents.engine import store
from agents.engine.db import db
from agents.engine.react import ReactEngine
from agents.models import Run, RunStatus

# Engines that higher apps register at start-up, per execution path: ``resolver(run_id)`` (run in
# the database thread) returns the factory of the engine that drives that run, or ``None`` for
# the agent's own engine. A workflow's CONNECTOR node and an eval case are driven this way.
EngineResolver = Callable[[int], Callable[..., Any] | None]
_engine_resolvers: dict[str, EngineResolver] = {}


def register_engine(execution_path: str, resolver: EngineResolver) -> None:
    """Let a higher app choose the engine of its runs (those of ``execution_path``)."""
    _engine_resolvers[execution_path] = resolver


def _engine_factory(*, run_id: int) -> Callable[..., Any]:
    if _engine_resolvers:
        path = Run.objects.filter(pk=run_id).values_list("execution_path", flat=True).first()
        resolver = _engine_resolvers.get(path or "")
        factory = resolver(run_id) if resolver is not None else None
        if factory is not None:
            return factory
    return ReactEngine


def new_owner() -> str:
    """A lease token naming this process (for operators reading the Run row) plus a nonce."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


async def run_execute(run_id: int, **engine_options: Any) -> str | None:
    """Drive a queued run (or one whose worker died). ``None`` if another caller has it."""
    owner = new_owner()
    claimed = await db(store.run_claim, run_id=run_id, owner=owner, from_statuses=(RunStatus.QUEUED,))
    if not claimed:
        return None
    engine = await db(_engine_factory, run_id=run_id)
    return await engine(run_id, owner=owner, **engine_options).execute(resumed_reason="lease expired")


async def run_resume(run_id: int, *, reason: str, **engine_options: Any) -> str | None:
    """Continue a suspended run (or one whose worker died). ``None`` if another caller has it or
    there is nothing to resume."""
    owner = new_owner()
    claimed = await db(
        store.run_claim, run_id=run_id, owner=owner, from_statuses=(RunStatus.AWAITING_APPROVAL,)
    )
    if not claimed:
        return None
    engine = await db(_engine_factory, run_id=run_id)
    return await engine(run_id, owner=owner, **engine_options).execute(resumed_reason=reason)
