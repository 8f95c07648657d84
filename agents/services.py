"""Writes on agents and runs (HackSoft style: ``<entity>_<verb>``, keyword-only, atomic)."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from agents import events as ev
from agents import executors
from agents.checks import hook_chain_of
from agents.consumers import run_group
from agents.executors import dispatch_execute
from agents.models import Agent, Conversation, ExecutionPath, Membership, Role, Run, RunEvent, RunStatus

log = logging.getLogger(__name__)


class ServiceError(Exception):
    """A request the service refuses. ``code`` maps to an HTTP status in the API layer."""

    def __init__(self, message: str, *, code: str = "invalid", field: str | None = None) -> None:
        super().__init__(message)
        self.message, self.code, self.field = message, code, field


def check_member(*, user: Any, organization_id: int) -> None:
    if not Membership.objects.filter(user=user, organization_id=organization_id).exists():
        raise ServiceError("not found", code="not_found")


@transaction.atomic
def run_start(
    *,
    agent: Agent,
    user: Any,
    input: str,
    conversation: Conversation | None = None,
    execution_path: str = ExecutionPath.API,
) -> Run:
    """Create a run on ``agent`` for ``user`` and hand it to the executor once committed.

    Preconditions checked here: the user belongs to the agent's organisation; a given conversation
    is the user's and the agent's.
    """
    check_member(user=user, organization_id=agent.organization_id)
    text = (input or "").strip()
    if not text:
        raise ServiceError("the message is empty", field="input")
    if conversation is None:
        conversation = Conversation.objects.create(
            organization_id=agent.organization_id, agent=agent, user=user, title=text[:80]
        )
    elif conversation.user_id != user.pk or conversation.agent_id != agent.pk:
        raise ServiceError("no such conversation with this agent", code="not_found", field="conversation")
    elif Run.objects.filter(
        conversation=conversation,
        status__in=[RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.AWAITING_APPROVAL],
    ).exists():
        raise ServiceError("this conversation already has a run in progress", code="conflict")
    run = Run.objects.create(
        conversation=conversation,
        agent=agent,
        user=user,
        input=text,
        execution_path=execution_path,
        hook_chain=hook_chain_of(agent),  # kept for the whole run, resumes included
    )
    transaction.on_commit(lambda: dispatch_execute(run.pk))
    return run


def _append_event(*, run: Run, type_: str, payload: dict[str, Any]) -> RunEvent:
    """Append an event for a run nobody is driving. Precondition: the caller holds the row lock
    and the run has no lease holder (queued or suspended), so no engine allocates seqs meanwhile."""
    seq = (RunEvent.objects.filter(run=run).aggregate(m=Max("seq"))["m"] or 0) + 1
    event = RunEvent.objects.create(run=run, seq=seq, type=type_, payload=payload)
    message = event.as_message()

    def push() -> None:
        layer = get_channel_layer()
        if layer is not None:
            try:
                async_to_sync(layer.group_send)(run_group(run.pk), {"type": "run.event", "event": message})
            except Exception:
                log.warning("could not push event %s of run %s", event.seq, run.pk, exc_info=True)

    transaction.on_commit(push)
    return event


def may_manage_runs_of(*, user: Any, organization_id: int) -> bool:
    """Operators and admins of an organisation (and superusers) may cancel its members' runs."""
    if getattr(user, "is_superuser", False):
        return True
    return Membership.objects.filter(
        user=user, organization_id=organization_id, role__in=[Role.OPERATOR, Role.ADMIN]
    ).exists()


@transaction.atomic
def run_cancel(*, run: Run, user: Any) -> Run:
    """Cancel a run, as its owner or as an operator of its organisation. A queued or suspended run
    stops at once; a running one stops at its next step (the engine sees ``cancel_requested``
    when it saves its checkpoint)."""
    if run.user_id != user.pk and not may_manage_runs_of(
        user=user, organization_id=run.agent.organization_id
    ):
        raise ServiceError("not found", code="not_found")
    locked = Run.objects.select_for_update().get(pk=run.pk)
    if locked.is_terminal:
        raise ServiceError(f"the run is already {locked.status}", code="conflict")
    who = "the user" if user.pk == run.user_id else user.get_username()
    error = f"cancelled by {who}"
    if locked.status in (RunStatus.QUEUED, RunStatus.AWAITING_APPROVAL):
        Run.objects.filter(pk=run.pk, status=locked.status).update(
            status=RunStatus.CANCELLED, cancel_requested=True, error=error, finished_at=timezone.now()
        )
        _append_event(run=locked, type_=ev.RUN_FAILED, payload={"error": error, "stage": "cancelled"})
        from agents.signals import run_cancelled

        run_cancelled.send(sender=Run, run_id=run.pk)
    else:
        Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    locked.refresh_from_db()
    return locked


def run_resume_soon(*, run_id: int, reason: str) -> None:
    """Ask the executor to continue a suspended run once the current transaction commits.
    Safe to call any number of times: only one resume wins the claim."""
    transaction.on_commit(lambda: executors.dispatch_resume(run_id, reason=reason))


def runs_reclaim_expired() -> int:
    """Resume every running run whose lease expired (its worker died). Returns how many."""
    ids = list(
        Run.objects.filter(status=RunStatus.RUNNING, lease_expires_at__lt=timezone.now()).values_list(
            "pk", flat=True
        )
    )
    for run_id in ids:
        executors.dispatch_resume(run_id, reason="the previous worker stopped")
    return len(ids)
