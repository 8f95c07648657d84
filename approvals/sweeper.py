"""The periodic sweep: expire due requests, escalate those whose next tier is due, resume
parked runs whose wake-up was lost, and hand orphaned runs (dead worker, expired lease) to a new one.

In production it is a Celery beat task every ``APPROVAL_SWEEP_SECONDS``; in embedded mode the
server process runs :func:`sweep_forever` on its own loop. When nothing is due it costs four
indexed queries per period, whatever the number of pending requests.
"""

from __future__ import annotations

import asyncio
import logging

from agents import services as agent_services
from agents.engine.db import db
from approvals.services import confirmation_escalate_due, confirmation_expire_due, runs_resume_orphaned

log = logging.getLogger(__name__)


def sweep_once() -> dict[str, int]:
    """One pass of the sweep; how many requests it expired and escalated, and how many runs it
    resumed and reclaimed."""
    # Orphans first: a request this very sweep expires resumes its run itself.
    resumed = runs_resume_orphaned()
    return {
        "expired": confirmation_expire_due(),
        "escalated": confirmation_escalate_due(),
        "resumed": resumed,
        "reclaimed": agent_services.runs_reclaim_expired(),
    }


async def sweep_forever(interval: float) -> None:
    while True:
        try:
            done = await db(sweep_once)
            if any(done.values()):
                log.info("sweep: %s", done)
        except Exception:  # keep sweeping; the next period retries
            log.exception("the approval sweep failed")
        await asyncio.sleep(interval)
