"""Writes on agents and runs (HackSoft style: ``<entity>_<verb>``, keyword-only, atomic)."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.db.models import Max, QuerySet
from django.utils import timezone

from agents import events as ev
from agents import executors
from agents.checks import hook_chain_of
from agents.consumers import run_group
from agents.executors import dispatch_execute
from agents.models import Agent, Conversation, ExecutionPath, Run, RunEvent, RunStatus
from agents.signals import run_cancel_requested, run_cancelled
from fimone.errors import ServiceError
from fimone.humanize import clipped
from fimone.throttling import ScopedUserRateThrottle
from tenancy.models import Membership, Role
from tenancy.permissions import may_manage_runs_of, member_roles

log = logging.getLogger(__name__)


class RunStartThrottle(ScopedUserRateThrottle):
    """``RUN_START_RATE`` per user: the API's and the chat pages' requests that start a run, and
    the services that start runs for a person from anywhere else (:func:`run_starts_take`)."""

    scope = "run_start"
    what = "runs started"


def run_starts_take(*, user: Any, count: int = 1) -> None:
    """Count ``count`` run starts of ``user`` against ``RUN_START_RATE`` — all of them, or none
    and ``ServiceError(code="throttled")`` saying the limit and when to retry. Called by the
    services that start runs on a person's behalf outside the rate-limited requests (a workflow,
    an eval run's cases), so that no door (the admin's actions, the API, a command) gets more."""
    _check_run_starts(RunStartThrottle().refusal_for_user_taking(user.pk, count), count)


async def run_starts_take_async(*, user: Any) -> None:
    """:func:`run_starts_take` of one run start, on the event loop (the same budget)."""
    _check_run_starts(await RunStartThrottle().refusal_for_user_async(user.pk), 1)


def _check_run_starts(refused: Any, count: int) -> None:
    if refused is not None:
        starting = f"Starting {count} runs at once is refused. " if count > 1 else ""
        raise ServiceError(
            f"{starting}{refused.message} Nothing was started; try again in {refused.wait} s.",
            code="throttled",
            retry_after=refused.wait,
        )


CHAT_PATHS = frozenset({ExecutionPath.PORTAL, ExecutionPath.API, ExecutionPath.MCP})
"""The doors through which a person talks to an agent themselves (workflows and evals start runs
on behalf of whoever configured them, under their own rules)."""


def chat_refusal(*, user: Any, organization_id: int) -> str | None:
    """Why ``user`` may not chat with the agents of organisation ``organization_id``, else ``None``.

    Auditors read the record; they do not act in it. A member whose only role in the organisation
    is auditor may read what they are shown (history, transcripts) but starts no run: a
    conversation could call the organisation's write tools. Any other role alongside (member,
    approver, …) and superusers chat as usual."""
    if getattr(user, "is_superuser", False):
        return None
    return chat_refusal_of(user=user, roles=member_roles(user=user, organization_id=organization_id))


def chat_refusal_of(*, user: Any, roles: set[str]) -> str | None:
    """:func:`chat_refusal` for a member whose roles the caller read (:func:`member_roles`)."""
    if getattr(user, "is_superuser", False):
        return None
    if roles == {Role.AUDITOR}:
        return "auditors read the record but do not chat with agents"
    return None


@transaction.atomic
def run_start(
    *,
    agent: Agent,
    user: Any,
    input: str,
    conversation: Conversation | None = None,
    execution_path: str = ExecutionPath.API,
    dispatch: bool = True,
    claimed_by: str | None = None,
) -> Run:
    """Create a run on ``agent`` for ``user`` and hand it to the executor once committed
    (``dispatch=False``: the caller drives it itself, as the MCP gateway does). ``claimed_by``
    (with ``dispatch=False``): the run is created running, its lease held by that owner, as a
    claim would leave it (``agents.engine.runner.run_drive_claimed`` drives it); if the owner never
    does, the lease runs out and the sweep resumes it like any run whose worker died.

    Preconditions checked here: the user belongs to the agent's organisation and, through the
    portal or the API, may chat there (:func:`chat_refusal`, ``forbidden``); neither the agent nor
    its organisation is archived (``conflict``); a given conversation is the user's and the agent's,
    and not archived (``conflict``).
    The agent's row is locked while the run is created, so an archiving that commits meanwhile
    either sees this run (and stops it) or is seen by this check.
    """
    list(agent_lock(agent_id=agent.pk))
    agent = agent_to_start(agent_id=agent.pk).get()
    roles = member_roles(user=user, organization_id=agent.organization_id)
    text = check_run_start(agent=agent, user=user, roles=roles, input=input, execution_path=execution_path)
    if conversation is None:
        conversation = new_conversation(agent=agent, user=user, text=text)
        conversation.save(force_insert=True)
    else:
        check_conversation_open(conversation=conversation, agent=agent, user=user)
        # An MCP client's session joins its calls in one conversation, and a client may make
        # several at once (each its own run, none waiting for another); a chat goes one turn at
        # a time, never in a conversation that records a client's calls.
        if execution_path != ExecutionPath.MCP:
            _check_chat_turn(conversation=conversation)
    if claimed_by is not None and dispatch:
        raise ValueError("a run claimed at its start is driven by its claimer, not dispatched")
    run = new_run(
        agent=agent,
        user=user,
        conversation=conversation,
        text=text,
        execution_path=execution_path,
        hook_chain=hook_chain_of(agent),
        claimed_by=claimed_by,
    )
    run.save(force_insert=True)
    if dispatch:
        transaction.on_commit(lambda: dispatch_execute(run.pk))
    return run


def agent_lock(*, agent_id: int) -> QuerySet[Any]:
    """The lock a run start takes on its agent, held until it commits: an archiving of the agent
    or of its organisation (which locks all its agents) that commits meanwhile either sees the
    new run (and stops it) or is seen by the start. Read the agent, its organisation and the
    person's roles only once it is held (:func:`agent_to_start`): a statement reads what had
    committed when it began, and the lock may be granted only once an archiving committed."""
    return Agent.objects.select_for_update(of=("self",)).filter(pk=agent_id).values_list("pk", flat=True)


def agent_to_start(*, agent_id: int) -> QuerySet[Agent]:
    """The agent a run starts on, with its organisation (read under :func:`agent_lock`)."""
    return Agent.objects.select_related("organization").filter(pk=agent_id)


def check_run_start(*, agent: Agent, user: Any, roles: set[str], input: str, execution_path: str) -> str:
    """The message a run of ``agent`` for ``user`` starts with, if it may start (:func:`run_start`'s
    preconditions on the person and the agent), else :class:`ServiceError`. ``agent``: locked,
    with its organisation; ``roles``: ``user``'s in it (:func:`member_roles`). Reads nothing: the
    one place these rules live, whoever read the rows (the thread, or the event loop:
    ``agents.loop_start``)."""
    if not roles:
        raise ServiceError("not found", code="not_found")
    if execution_path in CHAT_PATHS:
        refusal = chat_refusal_of(user=user, roles=roles)
        if refusal is not None:
            raise ServiceError(refusal, code="forbidden")
    archived = agent.archived_reason()
    if archived is not None:
        raise ServiceError(archived, code="conflict")
    text = (input or "").strip()
    if not text:
        raise ServiceError("the message is empty", field="input")
    return text


def check_conversation_open(*, conversation: Conversation, agent: Agent, user: Any) -> None:
    """Refuse a run of ``agent`` for ``user`` in ``conversation`` unless it is theirs (``not_found``)
    and not archived (``conflict``). Reads nothing: whoever read the row (the thread, or the event
    loop: ``run_start_on_loop``) asks here."""
    if conversation.user_id != user.pk or conversation.agent_id != agent.pk:
        raise ServiceError("no such conversation with this agent", code="not_found", field="conversation")
    if conversation.archived_at is not None:
        raise ServiceError("this conversation is archived; start a new one", code="conflict")


def _check_chat_turn(*, conversation: Conversation) -> None:
    """Refuse (``conflict``) a chat's next run in ``conversation`` if it records an MCP client's
    calls, or while one of its runs is still in progress."""
    if conversation.runs.filter(execution_path=ExecutionPath.MCP).exists():
        raise ServiceError(
            "this conversation records calls made through an MCP gateway; start a new one",
            code="conflict",
        )
    if Run.objects.filter(
        conversation=conversation,
        status__in=[RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.AWAITING_APPROVAL],
    ).exists():
        raise ServiceError("this conversation already has a run in progress", code="conflict")


def new_conversation(*, agent: Agent, user: Any, text: str) -> Conversation:
    """The conversation a run started without one opens (not saved)."""
    return Conversation(
        organization_id=agent.organization_id, agent=agent, user=user, title=clipped(text, 80)
    )


def new_run(
    *,
    agent: Agent,
    user: Any,
    conversation: Conversation,
    text: str,
    execution_path: str,
    hook_chain: dict[str, Any],
    claimed_by: str | None,
) -> Run:
    """The run :func:`run_start` creates (not saved): queued, or with ``claimed_by`` running with
    its lease held by that owner. ``hook_chain``: ``agents.checks.hook_chain_of(agent)``, kept for
    the whole run, resumes included."""
    lease: dict[str, Any] = {}
    if claimed_by is not None:
        now = timezone.now()
        lease = {
            "status": RunStatus.RUNNING,
            "lease_owner": claimed_by,
            "lease_expires_at": now + dt.timedelta(seconds=settings.RUN_LEASE_SECONDS),
            "heartbeat_at": now,
            "started_at": now,
        }
    return Run(
        conversation=conversation,
        agent=agent,
        user=user,
        input=text,
        execution_path=execution_path,
        hook_chain=hook_chain,
        **lease,
    )


def _conversation_of(*, conversation: Conversation, user: Any) -> Conversation:
    """``conversation`` locked, if it is ``user``'s own; else ``not_found`` (a colleague's or
    another organisation's conversation is not theirs to change)."""
    locked = Conversation.objects.select_for_update().filter(pk=conversation.pk, user=user).first()
    if (
        locked is None
        or not Membership.objects.filter(user=user, organization_id=locked.organization_id).exists()
    ):
        raise ServiceError("not found", code="not_found")
    return locked


@transaction.atomic
def conversation_rename(*, conversation: Conversation, user: Any, title: str) -> Conversation:
    """Give ``user``'s conversation a new title (spaces trimmed; empty: ``invalid``)."""
    locked = _conversation_of(conversation=conversation, user=user)
    text = " ".join((title or "").split())
    if not text:
        raise ServiceError("the title is empty", field="title")
    max_length = Conversation._meta.get_field("title").max_length
    if len(text) > max_length:
        raise ServiceError(f"the title is longer than {max_length} characters", field="title")
    locked.title = text
    locked.save(update_fields=["title"])
    return locked


@transaction.atomic
def conversation_archive(*, conversation: Conversation, user: Any) -> Conversation:
    """Archive ``user``'s conversation: it leaves their lists and takes no new message; it and its
    runs stay whole for the record (nothing with history is deleted). Refused (``conflict``) while
    a run of it is in progress (stop it first) or if it is already archived."""
    locked = _conversation_of(conversation=conversation, user=user)
    if locked.archived_at is not None:
        raise ServiceError("this conversation is already archived", code="conflict")
    in_flight = Run.objects.filter(conversation=locked).exclude(
        status__in=[RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED]
    )
    if in_flight.exists():
        raise ServiceError("this conversation has a run in progress; stop it first", code="conflict")
    locked.archived_at = timezone.now()
    locked.save(update_fields=["archived_at"])
    return locked


@transaction.atomic
def conversation_unarchive(*, conversation: Conversation, user: Any) -> Conversation:
    """Bring ``user``'s archived conversation back to their lists. Refused (``conflict``) if it is
    not archived."""
    locked = _conversation_of(conversation=conversation, user=user)
    if locked.archived_at is None:
        raise ServiceError("this conversation is not archived", code="conflict")
    locked.archived_at = None
    locked.save(update_fields=["archived_at"])
    return locked


@transaction.atomic
def run_retry(*, conversation: Conversation, user: Any, execution_path: str = ExecutionPath.PORTAL) -> Run:
    """Send the last message of ``user``'s conversation again: a new run with the same input, in
    the same conversation, with :func:`run_start`'s checks (no run in progress, not archived, …).
    The caller counts it against ``RUN_START_RATE`` like any message."""
    locked = _conversation_of(conversation=conversation, user=user)
    last = Run.objects.filter(conversation=locked, parent_run__isnull=True).order_by("-pk").first()
    if last is None:
        raise ServiceError("this conversation has no message to send again", code="conflict")
    return run_start(
        agent=locked.agent, user=user, input=last.input, conversation=locked, execution_path=execution_path
    )


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
    _run_stop(run=locked, error=f"cancelled by {who}")
    locked.refresh_from_db()
    return locked


def _run_stop(*, run: Run, error: str) -> None:
    """Stop a run that is not terminal. Precondition: the caller holds the run's row lock.

    A queued or suspended run is cancelled at once (its pending confirmation requests are withdrawn
    by the approvals app, on ``run_cancelled``); a running one is asked to stop at its next step."""
    if run.status in (RunStatus.QUEUED, RunStatus.AWAITING_APPROVAL):
        Run.objects.filter(pk=run.pk, status=run.status).update(
            status=RunStatus.CANCELLED, cancel_requested=True, error=error, finished_at=timezone.now()
        )
        _append_event(run=run, type_=ev.RUN_FAILED, payload={"error": error, "stage": "cancelled"})
        run_cancelled.send(sender=Run, run_id=run.pk, reason=error)
        if Run.objects.filter(children=run, status=RunStatus.AWAITING_APPROVAL).exists():
            # A DAG step or a delegate its parent waits for: the parent hears it ended.
            run_resume_soon(run_id=run.parent_run_id, reason=f"its child run {run.pk} was cancelled")
    else:
        Run.objects.filter(pk=run.pk).update(cancel_requested=True)
        run_cancel_requested.send(sender=Run, run_id=run.pk, reason=error)
    # Its DAG steps and delegates in flight stop with it (parked ones withdraw their requests).
    runs_stop(runs=Run.objects.filter(parent_run=run), error=error)


def runs_stop(*, runs: Any, error: str) -> int:
    """Stop every run of ``runs`` (a queryset) still in flight; returns how many. Precondition:
    the caller is in a transaction (their rows are locked until it commits)."""
    stopped = 0
    in_flight = runs.exclude(status__in=[RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED])
    for run in in_flight.select_for_update(of=("self",)).order_by("pk"):
        _run_stop(run=run, error=error)
        stopped += 1
    return stopped


# --- who may act on an organisation's agents ----------------------------------------------------


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
