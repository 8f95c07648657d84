"""Starting and resuming runs: claim the lease with one conditional update, then drive the engine.

Both entry points are idempotent: of any number of concurrent callers for one run, exactly one wins
the claim and drives it; the others return ``None`` at once.

The engine is the agent's (``Agent.engine``): ReAct, or DAG, whose steps are child runs driven by
ReAct. A child run (a DAG step or a delegate) that ends after its parent parked waiting for it
wakes the parent (docs/design.md §4: a verdict inside a child resumes the whole chain).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable
from typing import Any

from agents import executors
from agents.engine import child_runs, store
from agents.engine.dag import DagEngine
from agents.engine.db import db
from agents.engine.react import ReactEngine
from agents.models import TERMINAL_RUN_STATUSES, Agent, ExecutionPath, Run, RunStatus

# Engines that higher apps register at start-up, per execution path: ``resolver(run_id)`` (run in
# the database thread) returns the factory of the engine that drives that run, or ``None`` for
# the agent's own engine. A workflow's CONNECTOR node and an MCP gateway call are driven this way
# (an eval case is an ordinary run whose chain is sandboxed).
EngineResolver = Callable[[int], Callable[..., Any] | None]
_engine_resolvers: dict[str, EngineResolver] = {}


def register_engine(execution_path: str, resolver: EngineResolver) -> None:
    """Let a higher app choose the engine of its runs (those of ``execution_path``)."""
    _engine_resolvers[execution_path] = resolver


def new_owner() -> str:
    """A lease token naming this process (for operators reading the Run row) plus a nonce."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


EngineKind = tuple[str, str, Callable[..., Any] | None]
"""The run's agent engine, its execution path, and the engine registered for that path."""


def _engine_kind(run: Run) -> EngineKind:
    """The run's agent engine and execution path, and the engine a higher app registered for
    that path (``None``: the agent's own). ``run`` with its agent (``store.run_load``)."""
    engine, path = run.agent.engine, run.execution_path
    resolver = _engine_resolvers.get(path)
    return engine, path, resolver(run.pk) if resolver is not None else None


Claimed = tuple[EngineKind, store.Opening]


def _claim(*, run_id: int, owner: str, from_statuses: tuple[str, ...]) -> Claimed | None:
    """Take the run's lease (``store.run_claim``) and, if won, say what drives it
    (:func:`_engine_kind`) and open it (``store.run_open``, what the engine's journal reads
    first): one trip to the database thread."""
    if not store.run_claim(run_id=run_id, owner=owner, from_statuses=from_statuses):
        return None
    opening = store.run_open(run_id=run_id)
    return _engine_kind(opening.run), opening


def _engine(run_id: int, owner: str, options: dict[str, Any], kind: EngineKind) -> Any:
    """The engine that drives ``run_id``: a DAG agent's own run plans; its steps run ReAct."""
    engine, path, registered = kind
    if registered is not None:
        return registered(run_id, owner=owner, **options)
    if engine == Agent.Engine.DAG and path != ExecutionPath.DAG:
        return DagEngine(run_id, owner=owner, **options)
    return ReactEngine(run_id, owner=owner, **options)


async def _wake_parent(engine: Any, status: str | None) -> None:
    run_id = engine.run_id
    if status not in TERMINAL_RUN_STATUSES or getattr(engine, "run", None) is None:
        return
    if engine.run.parent_run_id is None:  # a top-level run: no parent waits for it
        return
    parent_id = await db(child_runs.parent_to_wake, run_id=run_id)
    if parent_id is not None:
        executors.dispatch_resume(parent_id, reason=f"its child run {run_id} ended {status}")


async def run_execute(run_id: int, **engine_options: Any) -> str | None:
    """Drive a queued run (or one whose worker died). ``None`` if another caller has it."""
    return await _claim_and_drive(run_id, RunStatus.QUEUED, "lease expired", engine_options)


async def _claim_and_drive(
    run_id: int, from_status: str, reason: str, engine_options: dict[str, Any]
) -> str | None:
    """Claim the run's lease from ``from_status`` and drive it to its end or its next pause,
    waking its parent if it ended; ``None`` if another caller has it."""
    owner = new_owner()
    claimed = await db(_claim, run_id=run_id, owner=owner, from_statuses=(from_status,))
    if claimed is None:
        return None
    kind, opening = claimed
    return await run_drive_claimed(
        run_id, owner=owner, kind=kind, opening=opening, resumed_reason=reason, **engine_options
    )


async def run_drive_claimed(
    run_id: int,
    *,
    owner: str,
    kind: EngineKind,
    opening: store.Opening | None = None,
    resumed_reason: str = "lease expired",
    **engine_options: Any,
) -> str:
    """Drive a run whose lease ``owner`` took when it created it (``run_start(claimed_by=…)``):
    no claim, and with ``kind`` (what :func:`_engine_kind` would say) and ``opening`` nothing is
    read again before the engine starts."""
    engine = _engine(run_id, owner, engine_options, kind)
    status = await engine.execute(resumed_reason=resumed_reason, opening=opening)
    await _wake_parent(engine, status)
    return status


async def run_resume(run_id: int, *, reason: str, **engine_options: Any) -> str | None:
    """Continue a suspended run (or one whose worker died). ``None`` if another caller has it or
    there is nothing to resume."""
    return await _claim_and_drive(run_id, RunStatus.AWAITING_APPROVAL, reason, engine_options)


async def child_drive(run_id: int, **engine_options: Any) -> str | None:
    """Drive a child run from its parent's process: a queued one starts, one whose worker died
    continues. ``None`` when it is not ours to drive (parked, ended, or driven elsewhere); its
    parent then reads its state. The parent is not woken: it is the caller."""
    owner = new_owner()
    claimed = await db(_claim, run_id=run_id, owner=owner, from_statuses=(RunStatus.QUEUED,))
    if claimed is None:
        return None
    kind, opening = claimed
    engine = _engine(run_id, owner, engine_options, kind)
    return await engine.execute(resumed_reason="lease expired", opening=opening)
