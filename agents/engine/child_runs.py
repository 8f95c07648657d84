"""A run's children and parents: DAG steps and delegates are child runs of the run that opened
them, and a parent parked waiting for them is woken when they end.

Synchronous, called through ``agents.engine.db.db`` like :mod:`agents.engine.store`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from agents import events as ev
from agents.models import TERMINAL_RUN_STATUSES, Conversation, Run, RunEvent, RunStatus


@dataclass(frozen=True, slots=True)
class ChildState:
    run_id: int
    status: str
    output: str
    error: str


def child_run_open(
    *,
    parent_id: int,
    call_id: str,
    agent_id: int,
    input: str,
    execution_path: str,
    hook_chain: dict[str, Any],
    own_conversation: bool,
) -> ChildState:
    """The child run of ``parent_id`` for ``call_id``, created (queued) the first time: entering
    the same step or tool call again finds the same child, so its work is never started twice.

    ``hook_chain`` is recorded on the child (a DAG step keeps its parent's, a delegate its own
    agent's). ``own_conversation``: a delegate talks to its own agent in a conversation of its
    own; a DAG step shares its parent's. Runs in the database thread.
    """
    existing = Run.objects.filter(parent_run_id=parent_id, parent_call_id=call_id).first()
    if existing is None:
        parent = Run.objects.select_related("agent").get(pk=parent_id)
        with transaction.atomic():
            conversation_id = parent.conversation_id
            if own_conversation:
                conversation_id = Conversation.objects.create(
                    organization_id=parent.agent.organization_id,
                    agent_id=agent_id,
                    user_id=parent.user_id,
                    title=f"Asked by {parent.agent.name}: {input}"[:200],
                ).pk
            existing = Run.objects.create(
                conversation_id=conversation_id,
                agent_id=agent_id,
                user_id=parent.user_id,
                parent_run_id=parent_id,
                parent_call_id=call_id,
                execution_path=execution_path,
                input=input,
                hook_chain=hook_chain,
                # Inside an eval, the child inherits its sandbox, and says so like its root.
                hooks_bypassed=isinstance(hook_chain, dict) and hook_chain.get("sandbox") is not None,
            )
    return ChildState(existing.pk, existing.status, existing.output, existing.error)


def child_state(*, run_id: int) -> ChildState:
    status, output, error = Run.objects.values_list("status", "output", "error").get(pk=run_id)
    return ChildState(run_id, status, output, error)


def children_all_unfinished(*, run_ids: list[int]) -> bool:
    """Whether every one of these child runs is still unfinished (none has news for its parent)."""
    unfinished = Run.objects.filter(pk__in=run_ids).exclude(status__in=list(TERMINAL_RUN_STATUSES))
    return unfinished.count() == len(set(run_ids))


def parent_to_wake(*, run_id: int) -> int | None:
    """The parent of a child run that just ended, if that parent is parked waiting for it."""
    return (
        Run.objects.filter(children__pk=run_id, status=RunStatus.AWAITING_APPROVAL)
        .values_list("pk", flat=True)
        .first()
    )


def run_lineage(*, run_id: int) -> list[tuple[int, str]]:
    """``(agent_id, execution_path)`` of the run and each of its ancestors, the run first."""
    lineage: list[tuple[int, str]] = []
    current: int | None = run_id
    while current is not None and len(lineage) < 100:
        agent_id, path, parent = Run.objects.values_list("agent_id", "execution_path", "parent_run_id").get(
            pk=current
        )
        lineage.append((agent_id, path))
        current = parent
    return lineage


def pending_approvals(*, run_ids: list[int]) -> list[tuple[int, dict[str, Any]]]:
    """``(run_id, payload)`` of each ``approval.pending`` event of these runs not followed by an
    ``approval.decided`` of the same request, in order."""
    pending: dict[Any, tuple[int, dict[str, Any]]] = {}
    rows = (
        RunEvent.objects.filter(run_id__in=run_ids, type__in=[ev.APPROVAL_PENDING, ev.APPROVAL_DECIDED])
        .order_by("run_id", "seq")
        .values_list("run_id", "type", "payload")
    )
    for run_id, type_, payload in rows:
        request_id = payload.get("request_id") if isinstance(payload, dict) else None
        if type_ == ev.APPROVAL_PENDING:
            pending[request_id] = (run_id, payload)
        else:
            pending.pop(request_id, None)
    return list(pending.values())
