"""Starting and resuming runs: claim the lease with one conditional update, then drive the engine.

Both entry points are idempotent: of any number of concurrent callers for one run, exactly one wins
the claim and drives it; the others return ``None`` at once.
"""

from __future__ import annotations

import os
import socket
import uuid
from typing import Any

from agents.engine import store
from agents.engine.db import db
from agents.engine.react import ReactEngine
from agents.models import RunStatus


def new_owner() -> str:
    """A lease token naming this process (for operators reading the Run row) plus a nonce."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


async def run_execute(run_id: int, **engine_options: Any) -> str | None:
    """Drive a queued run (or one whose worker died). ``None`` if another caller has it."""
    owner = new_owner()
    claimed = await db(store.run_claim, run_id=run_id, owner=owner, from_statuses=(RunStatus.QUEUED,))
    if not claimed:
        return None
    return await ReactEngine(run_id, owner=owner, **engine_options).execute(resumed_reason="lease expired")


async def run_resume(run_id: int, *, reason: str, **engine_options: Any) -> str | None:
    """Continue a suspended run (or one whose worker died). ``None`` if another caller has it or
    there is nothing to resume."""
    owner = new_owner()
    claimed = await db(
        store.run_claim, run_id=run_id, owner=owner, from_statuses=(RunStatus.AWAITING_APPROVAL,)
    )
    if not claimed:
        return None
    return await ReactEngine(run_id, owner=owner, **engine_options).execute(resumed_reason=reason)
