"""How an engine drives a child run (a DAG step, a delegate) from its parent's process.

The runner sits above the engines (it chooses and builds them), so the engines cannot import it:
it installs its ``child_drive`` here when it is imported, and an engine is only ever built by the
runner, so the driver is always in place by the time a child needs driving.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

ChildDriver = Callable[..., Awaitable[str | None]]
_driver: list[ChildDriver] = []


def install_child_driver(driver: ChildDriver) -> None:
    """Set the coroutine that claims and drives a queued child run (``runner.child_drive``)."""
    _driver[:] = [driver]


async def child_drive(run_id: int, **engine_options: Any) -> str | None:
    """Drive child run ``run_id`` here; ``None`` when it is not ours to drive (parked, ended, or
    driven elsewhere): its parent then reads its state."""
    if not _driver:
        raise RuntimeError("no child driver installed: agents.engine.runner installs it on import")
    return await _driver[0](run_id, **engine_options)
