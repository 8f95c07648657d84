"""The console's Celery task: a replay of a proposed hook chain, queued from its admin page."""

from __future__ import annotations

from celery import shared_task

from console.chain_replay import chain_replay_execute


# Named as it was when replays were part of the agents app: a replay queued before an upgrade
# still finds its task.
@shared_task(name="agents.tasks.chain_replay_task", ignore_result=True)
def chain_replay_task(replay_id: int) -> None:
    """A queued replay of a proposed hook chain over recorded calls (``console.chain_replay``)."""
    chain_replay_execute(replay_id=replay_id)
