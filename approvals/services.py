"""The only writers of confirmation requests (DESIGN §1.4, §5).

A request leaves ``pending`` exactly once, through a conditional ``UPDATE … WHERE
status='pending'``; whoever loses that race is told what the verdict already is. Every attempt,
accepted or refused, is appended to the request's event log. Side effects of a verdict (waking an
inline waiter, resuming a suspended run, updating the card) run after commit.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from agents.consumers import run_group
from agents.engine import jsonsafe
from agents.engine.store import args_sha256
from agents.events import APPROVAL_VOTED
from agents.models import Run, RunEvent, RunStatus
from agents.tools.schema import argument_errors
from agents.tools.toolbox import ToolboxError, tools_for_agent
from approvals import decision_sql, presentation
from approvals.channels import channel_config_for
from approvals.live import OPENED, SETTLED, VOTED, inbox_changed
from approvals.models import (
    ConfirmationApprover,
    ConfirmationEvent,
    ConfirmationRequest,
    ConfirmationStatus,
    ConfirmationVote,
)
from approvals.policy import (
    approver_ids,
    describe_refusal,
    eligible_ids,
    is_outsider,
    policy_for,
    tier_approver_ids,
)
from approvals.selectors import Tally, has_voted, request_for_decision, tally_of, vote_summary
from approvals.signals import confirmation_opened, confirmation_settled, confirmation_voted
from fimone.audit_chain import chain_append

log = logging.getLogger(__name__)

Kind = ConfirmationEvent.Kind


@dataclass(frozen=True)
class Opened:
    request: ConfirmationRequest
    created: bool
    inline_wait_seconds: int


@dataclass(frozen=True)
class DecisionOutcome:
    """What a decider is told. ``accepted`` only for the one decision that set the verdict."""

    accepted: bool
    status: str
    message: str
    request: ConfirmationRequest | None = None

    @property
    def refused(self) -> bool:
        return not self.accepted and self.status == "refused"

    @property
    def counted(self) -> bool:
        """The decider's vote counted: it set the verdict, or it was recorded and the request
        still waits for more approvals (status ``recorded``)."""
        return self.accepted or self.status == RECORDED


#: The status of a vote that was counted without settling the request (a quorum not yet met).
RECORDED = "recorded"
#: The status of an approval refused because of its edited arguments (nothing was recorded).
INVALID_EDIT = "invalid_edit"
#: The status of an approval of arguments another approver has changed since (nothing recorded).
ARGS_CHANGED = "args_changed"


class NoApprovers(Exception):
    """The policy leaves nobody who could approve this call."""


def log_event(
    *,
    request_id: uuid.UUID,
    kind: str,
    actor: Any = None,
    external_id: str = "",
    organization_id: int | None = None,
    **details: Any,
) -> ConfirmationEvent:
    """Append an event to the request's history, as the next link of its organisation's hash
    chain (fimone/audit_chain.py), in the caller's transaction: the organisation's chain stays
    locked until that transaction ends, so log last in long transactions.
    ``organization_id``: the request's, when the caller has it loaded (saves reading it)."""
    if organization_id is None:
        organization_id = (
            ConfirmationRequest.objects.filter(pk=request_id).values_list("organization_id", flat=True).get()
        )
    return chain_append(
        ConfirmationEvent(
            organization_id=organization_id,
            request_id=request_id,
            kind=kind,
            actor=actor if getattr(actor, "pk", None) else None,
            actor_external_id=external_id,
            details=details,
        )
    )


def _settled_follow_up(request: ConfirmationRequest) -> tuple[str, list[Any]] | None:
    """The one Celery task that follows a verdict up when runs and card deliveries both go through
    Celery (production), as (task name, arguments); ``None`` when the deciding process does it
    itself (the embedded mode, or a web-inbox request)."""
    from django.conf import settings

    all_celery = settings.RUN_EXECUTOR == "celery" and settings.CHANNEL_DELIVERY == "celery"
    if not all_celery or request.channel == "web":
        return None
    from approvals.tasks import confirmation_settled_task

    # Waiters and inboxes are told from the worker too: runs wait on workers here, and each push
    # from the deciding server cost it a hop to its event loop and a Redis round trip.
    return confirmation_settled_task.name, [
        str(request.pk),
        request.run_id,
        request.channel,
        str(request.status),
    ]


def _outbox_follow_up(request: ConfirmationRequest) -> tuple[str, list[Any]] | None:
    """:func:`_settled_follow_up`, if it goes to a broker: a Celery that runs tasks in process
    (``task_always_eager``) has no broker to relay to, and runs it on commit instead."""
    from celery import current_app

    return None if current_app.conf.task_always_eager else _settled_follow_up(request)


def _after_verdict(request: ConfirmationRequest) -> None:
    """Wake the waiter, resume the run if it is parked, tell the channel app (which updates the
    card) and the approvers' inboxes. Call on commit."""
    from agents import executors
    from approvals.waking import wake

    follow_up = _settled_follow_up(request)
    if follow_up is not None:
        from approvals.tasks import confirmation_settled_task

        confirmation_settled_task.delay(*follow_up[1])
        return
    wake(request.pk)
    inbox_changed(request_id=request.pk, change=SETTLED)
    executors.dispatch_resume(request.run_id, reason=f"approval request {request.status}")
    announce_settled(request_id=request.pk, channel=request.channel, status=str(request.status))


def _after_vote(*, request_id: uuid.UUID, channel: str) -> None:
    """A vote that did not settle the request: the approvers' inboxes, the channel app (which
    shows the new tally on the cards already sent) and the run's stream are told. Call on commit.

    Only :func:`confirmation_decide` records such a vote: the two-statement click
    (:func:`confirmation_decide_click`) takes only clicks whose vote settles the request."""
    inbox_changed(request_id=request_id, change=VOTED)
    confirmation_voted.send(sender=ConfirmationRequest, request_id=request_id, channel=channel)
    push_voted(request_id=request_id)


#: How many runs up a delegation or DAG chain a vote is shown (the parents show the child's request).
VOTE_PUSH_DEPTH = 8


def push_voted(*, request_id: uuid.UUID | str) -> None:
    """Push ``approval.voted`` (:data:`agents.events.APPROVAL_VOTED`: the votes so far, the
    approvals and the approvals required) to the stream of the request's run, and of the runs
    above it, which show their children's requests (with ``child_run_id``). Not stored: like a
    streamed delta it carries the seq of the run's last stored event, so a page that missed it
    reads the votes when it reloads. Call after the vote committed. Fire and forget: a lost push
    costs a stale tally on a page, never a wrong decision."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        request = ConfirmationRequest.objects.filter(pk=request_id).first()
        if request is None:
            return
        payload: dict[str, Any] = {
            "request_id": str(request.pk),
            "tool_call_id": request.tool_call_id,
            **vote_summary(request=request),
        }
        stamp = timezone.now().isoformat()
        run_id: int | None = request.run_id
        for _ in range(VOTE_PUSH_DEPTH):
            if run_id is None:
                break
            seq = RunEvent.objects.filter(run_id=run_id).aggregate(last=Max("seq"))["last"] or 0
            shown = payload if run_id == request.run_id else {**payload, "child_run_id": request.run_id}
            event = {
                "run_id": run_id,
                "seq": seq,
                "type": APPROVAL_VOTED,
                "payload": shown,
                "created_at": stamp,
            }
            async_to_sync(layer.group_send)(run_group(run_id), {"type": "run.event", "event": event})
            run_id = Run.objects.filter(pk=run_id).values_list("parent_run_id", flat=True).first()
    except Exception:  # never fail a vote over a page refresh
        log.warning("could not push the votes of request %s to its run", request_id, exc_info=True)


def announce_settled(*, request_id: uuid.UUID | str, channel: str, status: str) -> None:
    """Send :data:`approvals.signals.confirmation_settled` (after commit)."""
    confirmation_settled.send(
        sender=ConfirmationRequest, request_id=request_id, channel=channel, status=status
    )


@transaction.atomic
def confirmation_request_open(
    *,
    run: Run,
    tool_call_id: str,
    tool_name: str,
    tool_args: dict[str, Any],
    args_sha256: str,
    facts: presentation.CallFacts | None = None,
    context: list[dict[str, str]] | None = None,
) -> Opened:
    """Open the request for ``(run, tool_call_id)``, or return the one already open (a resumed
    run re-enters the same call). A new request is snapshotted with its approvers and handed to
    its channel for delivery after commit. Raises :class:`NoApprovers` if nobody could decide.

    The request keeps what approvers read about the call (:mod:`approvals.presentation`): the
    tool's title and the call's ``context``. ``facts``: the tool's description as
    :func:`~approvals.presentation.call_facts` read it (read here when not given); ``context``:
    what its context action answered (:func:`~approvals.presentation.context_read`, which the gate
    calls on its event loop, outside this transaction); without it, the arguments."""
    existing = ConfirmationRequest.objects.filter(run=run, tool_call_id=tool_call_id).first()
    agent = run.agent
    policy = policy_for(agent=agent)
    if existing is not None:
        return Opened(existing, False, policy.inline_wait_seconds)
    approvers = approver_ids(policy=policy, agent=agent, requester_id=run.user_id)
    if not approvers:
        raise NoApprovers("nobody is authorised to approve this call: check the agent's approver policy")
    tier_approvers = tier_approver_ids(policy=policy, agent=agent, requester_id=run.user_id)
    if len(approvers | tier_approvers) < policy.approvals_required:
        # Fail closed and say so now, rather than leave a request nobody could ever approve.
        raise NoApprovers(
            f"the approver policy needs {policy.approvals_required} approvals and only "
            f"{len(approvers | tier_approvers)} people may approve this call"
        )
    channel_config = channel_config_for(agent=agent, policy_channel_id=policy.channel_config_id)
    facts = facts or presentation.call_facts(agent=agent, tool_name=tool_name)
    now = timezone.now()
    # Only tiers due before the deadline can happen ("up to the expiry").
    plan = [
        {
            "after_seconds": tier.after_seconds,
            "user_ids": sorted(tier.user_ids),
            "channel_config_id": tier.channel_config_id,
            "channel": tier.channel,
        }
        for tier in policy.tiers
        if tier.after_seconds < policy.timeout_seconds
    ]
    try:
        with transaction.atomic():
            request = ConfirmationRequest.objects.create(
                organization_id=agent.organization_id,
                agent=agent,
                requested_by_id=run.user_id,
                run=run,
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                tool_title=facts.title[:120],
                tool_args=tool_args,
                context=presentation.context_of(facts, tool_args, context),
                args_sha256=args_sha256,
                mode=ConfirmationRequest.Mode.INLINE
                if channel_config is None
                else ConfirmationRequest.Mode.CHANNEL,
                channel=channel_config.kind if channel_config is not None else "web",
                channel_config=channel_config,
                allow_self_approval=policy.allow_self_approval,
                approvals_required=policy.approvals_required,
                any_rejection_rejects=policy.any_rejection_rejects,
                allow_edit_on_approve=policy.allow_edit_on_approve,
                expires_at=now + dt.timedelta(seconds=policy.timeout_seconds),
                escalation_plan=plan,
                next_escalation_at=now + dt.timedelta(seconds=plan[0]["after_seconds"]) if plan else None,
                first_tier_may_decide_after_escalation=policy.first_tier_may_decide_after_escalation,
            )
    except IntegrityError:  # a concurrent opener won: theirs is the request
        return Opened(
            ConfirmationRequest.objects.get(run=run, tool_call_id=tool_call_id),
            False,
            policy.inline_wait_seconds,
        )
    request.approvers.set(approvers)
    log_event(
        request_id=request.pk,
        kind=Kind.CREATED,
        actor=run.user,
        tool=tool_name,
        args_sha256=args_sha256,
        approvers=sorted(approvers),
        expires_at=request.expires_at.isoformat(),
        channel=request.channel,
        approvals_required=request.approvals_required,
        any_rejection_rejects=request.any_rejection_rejects,
        escalation_after_seconds=[tier["after_seconds"] for tier in plan],
    )
    transaction.on_commit(
        lambda: confirmation_opened.send(
            sender=ConfirmationRequest, request_id=request.pk, channel=request.channel
        )
    )
    transaction.on_commit(lambda: inbox_changed(request_id=request.pk, change=OPENED))
    return Opened(request, True, policy.inline_wait_seconds)


MAX_REASON_LENGTH = 2000


def clean_text(text: Any, *, limit: int = MAX_REASON_LENGTH) -> str:
    """A decider's free text (a reason typed in the inbox, the API or a card's form) as it is
    stored: stripped, at most ``limit`` characters, with what PostgreSQL text and ``jsonb``
    cannot hold (NUL, lone surrogates) replaced by U+FFFD, so that no click or form can make the
    decision's write fail."""
    return jsonsafe.text(text if isinstance(text, str) else "").strip()[:limit]


def check_decider(*, request: ConfirmationRequest, user: Any, via_channel_id: int | None) -> str | None:
    """Why this click may not decide ``request`` (``None`` when it may). A request is decided on
    a channel it was sent to (its own, or an escalation tier's), or in the web inbox
    (``via_channel_id=None``)."""
    if via_channel_id is not None and via_channel_id not in sent_channel_ids(request=request):
        return "this request was not sent to this channel"
    return describe_refusal(request=request, user=user)


@transaction.atomic
def confirmation_decide(
    *,
    request_id: uuid.UUID,
    user: Any,
    approve: bool,
    reason: str = "",
    via_channel_id: int | None = None,
    external_id: str = "",
    loaded: ConfirmationRequest | None = None,
    edited_args: dict[str, Any] | None = None,
    seen_args_sha256: str = "",
) -> DecisionOutcome:
    """Record ``user``'s vote if they may give it and the request is still pending; the vote
    settles the request when it completes the quorum (``approvals_required`` distinct approvals)
    or rejects it (any rejection, or one that leaves the quorum out of reach, as the request's
    snapshot says). Votes are counted under a row lock on the request; a person votes once.

    Refusals and late clicks change nothing but are logged (``click_refused``) on the request.
    A web or API caller with no business in the request's organisation (:func:`is_outsider`) is
    answered ``not_found`` exactly as for an unknown id, and nothing is written: another
    organisation learns nothing and cannot fill its log. (Callbacks reach here only for requests
    of the channel's own organisation.)
    ``loaded``: the request as :func:`request_for_decision` returned it, if the caller has it
    already; the verdict is still taken by the conditional update, never from this copy.
    ``edited_args``: the arguments the approver wants run instead of the proposed ones (an
    approval in the web inbox or API, when the request's policy allows edits). They must satisfy
    the tool's parameter schema, and can only be changed before anybody voted on the proposed
    ones; they then replace the proposed arguments, whose hash the engine binds to.
    ``seen_args_sha256``: the hash of the arguments the decider was shown (the inbox sends it);
    an approval of arguments that were edited since is refused.
    """
    request = loaded if loaded is not None and loaded.pk == request_id else None
    request = request or request_for_decision(request_id=request_id)
    if request is None or (via_channel_id is None and is_outsider(request=request, user=user)):
        return DecisionOutcome(False, "not_found", "No such approval request.")
    verdict = ConfirmationStatus.APPROVED if approve else ConfirmationStatus.REJECTED

    def log(kind: str, **details: Any) -> None:
        """An event of this click on the request (a refusal names the verdict it wanted)."""
        if kind == Kind.CLICK_REFUSED:
            details.setdefault("wanted", str(verdict))
        log_event(
            request_id=request.pk,
            organization_id=request.organization_id,
            kind=kind,
            actor=user,
            external_id=external_id,
            **details,
        )

    refusal = check_decider(request=request, user=user, via_channel_id=via_channel_id)
    if refusal is not None:
        log(Kind.CLICK_REFUSED, reason=refusal, via="web" if via_channel_id is None else via_channel_id)
        return DecisionOutcome(False, "refused", f"You cannot decide this request: {refusal}.", request)
    if isinstance(edited_args, dict) and args_sha256(edited_args) == request.args_sha256:
        edited_args = None  # unchanged: a plain approval
    if edited_args is not None:
        problem = edit_problem(
            request=request, edited_args=edited_args, approve=approve, via_channel_id=via_channel_id
        )
        if problem is not None:
            log(
                Kind.CLICK_REFUSED,
                reason=f"edit refused: {problem}",
                edited_args=jsonsafe.storable(edited_args),
            )
            return DecisionOutcome(
                False, INVALID_EDIT, f"The arguments were not changed: {problem}.", request
            )

    now = timezone.now()
    # Votes are counted under a lock on the request row: two concurrent votes cannot both
    # complete the quorum, and none is lost. Whoever finds it no longer pending is late.
    # ``no_key``: the lock must not block the foreign-key checks of rows that point at the
    # request (events logged elsewhere while this decider waits for the audit chain's lock).
    locked = (
        ConfirmationRequest.objects.select_for_update(no_key=True)
        .filter(pk=request.pk)
        .values_list("status", "expires_at", "args_sha256", "edited_by_id", "channel")
        .first()
    )
    if locked is None or locked[0] != ConfirmationStatus.PENDING or locked[1] <= now:
        return _late(request_id=request.pk, user=user, external_id=external_id, verdict=verdict)
    # An approval covers the arguments the approver saw: after another approver's edit, a page
    # opened before it, a chat card (which shows the proposed ones) or any caller that does not
    # say which arguments it saw, cannot approve.
    current_hash, edited = locked[2], locked[3] is not None
    stated = bool(seen_args_sha256)
    if approve and edited_args is None and (stated or edited) and seen_args_sha256 != current_hash:
        log(Kind.CLICK_REFUSED, reason="the arguments were changed by another approver")
        return DecisionOutcome(
            False,
            ARGS_CHANGED,
            "The arguments were changed by another approver since you saw them: review them in the "
            "web inbox before approving.",
            request,
        )
    # With one approval required and any rejection rejecting, the first vote settles the request:
    # pending under the lock means nobody has voted yet, so there is nothing to look up or count.
    first_vote_settles = request.approvals_required == 1 and request.any_rejection_rejects
    if not first_vote_settles and has_voted(request=request, user=user):
        log(Kind.CLICK_REFUSED, reason="already voted")
        return DecisionOutcome(
            False, "already_voted", "You have already voted on this request; a vote counts once.", request
        )
    clean_reason = clean_text(reason)
    if edited_args is not None:
        if not first_vote_settles and ConfirmationVote.objects.filter(request_id=request.pk).exists():
            log(Kind.CLICK_REFUSED, reason="edit refused: others have already voted on these arguments")
            return DecisionOutcome(
                False,
                INVALID_EDIT,
                "The arguments were not changed: others have already voted on these arguments.",
                request,
            )
        _apply_edit(request=request, edited_args=edited_args, user=user, external_id=external_id)
    ConfirmationVote.objects.create(
        request_id=request.pk, user=user, approve=approve, reason=clean_reason, external_id=external_id
    )
    tally = (
        Tally(approvals=int(approve), rejections=int(not approve), required=1, eligible=1)
        if first_vote_settles
        else tally_of(request=request)
    )
    via = "web" if via_channel_id is None else via_channel_id
    if tally.outcome is None:
        log(
            Kind.VOTED,
            vote=str(verdict),
            reason=clean_reason,
            approvals=tally.approvals,
            rejections=tally.rejections,
            required=tally.required,
            via=via,
        )
        # The channel read under the lock: an escalation may have moved the card since ``request`` was loaded.
        channel = locked[4]
        transaction.on_commit(lambda: _after_vote(request_id=request.pk, channel=channel))
        what = "approval" if approve else "rejection"
        return DecisionOutcome(False, RECORDED, f"Your {what} was recorded: {tally.text}.", request)

    verdict = ConfirmationStatus(tally.outcome)
    written = {
        "status": verdict,
        "responded_at": now,
        "responded_by": user,
        "responded_by_external_id": external_id,
        "reason": clean_reason,
    }
    # Still the one conditional update (DESIGN §1.4); under the lock it cannot lose, but it is
    # what guarantees that nothing else ever moves a request out of ``pending``.
    won = ConfirmationRequest.objects.filter(
        pk=request.pk, status=ConfirmationStatus.PENDING, expires_at__gt=now
    ).update(**written)
    if not won:
        return _late(request_id=request.pk, user=user, external_id=external_id, verdict=verdict)
    for field, value in written.items():  # what we wrote is what the row holds now
        setattr(request, field, value)
    log(
        Kind.DECIDED,
        **_decided_details(verdict=verdict, reason=request.reason, via=via, tally=tally),
        verdict=request.verdict_record(),
    )
    transaction.on_commit(lambda: _after_verdict(request))
    return DecisionOutcome(True, str(verdict), f"The request was {verdict}.", request)


def _decided_details(*, verdict: str, reason: str, via: int | str, tally: Tally) -> dict[str, Any]:
    """The details of a ``decided`` event (the tally only where there was more than one vote to
    count or a rejection)."""
    details: dict[str, Any] = {"status": str(verdict), "reason": reason, "via": via}
    if tally.required > 1 or tally.rejections:
        details.update(approvals=tally.approvals, rejections=tally.rejections, required=tally.required)
    return details


def _click_verdict(
    *,
    facts: decision_sql.ClickFacts | None,
    user: Any,
    approve: bool,
    reason: str,
    via_channel_id: int,
    external_id: str,
) -> decision_sql.Verdict | None:
    """What a verified click decides, if it is the common click (:func:`confirmation_decide_click`)
    and ``user`` may decide it; else ``None`` (also for no facts: no such request). Writes
    nothing."""
    if facts is None:
        return None
    request = facts.request
    common = (
        request.status == ConfirmationStatus.PENDING
        and request.approvals_required == 1
        and request.any_rejection_rejects
        and request.escalation_level == 0
        and request.edited_by_id is None
        and request.channel_config_id == via_channel_id
    )
    if not common or describe_refusal(request=request, user=user, standing=facts.standing) is not None:
        return None
    verdict = ConfirmationStatus.APPROVED if approve else ConfirmationStatus.REJECTED
    clean_reason = clean_text(reason)
    now = timezone.now()
    tally = Tally(approvals=int(approve), rejections=int(not approve), required=1, eligible=1)
    decided = _as_decided(
        request, verdict=verdict, user=user, external_id=external_id, reason=clean_reason, now=now
    )
    event = ConfirmationEvent(
        organization_id=request.organization_id,
        request_id=request.pk,
        kind=Kind.DECIDED,
        actor_id=user.pk,
        actor_external_id=external_id,
        details={
            **_decided_details(verdict=verdict, reason=clean_reason, via=via_channel_id, tally=tally),
            "verdict": decided.verdict_record(),
        },
        created_at=now,
    )
    return decision_sql.Verdict(
        request=request,
        verdict=verdict,
        user_id=user.pk,
        external_id=external_id,
        reason=clean_reason,
        now=now,
        event=event,
        follow_up=_outbox_follow_up(decided),
    )


def _as_decided(
    request: ConfirmationRequest, *, verdict: str, user: Any, external_id: str, reason: str, now: dt.datetime
) -> ConfirmationRequest:
    """``request`` (in memory) as the verdict leaves the row."""
    request.status, request.responded_at, request.reason = verdict, now, reason
    request.responded_by, request.responded_by_external_id = user, external_id
    return request


def _pending_again(request: ConfirmationRequest) -> None:
    """Undo :func:`_as_decided` in memory: the verdict was not written."""
    request.status, request.responded_at, request.reason = ConfirmationStatus.PENDING, None, ""
    request.responded_by, request.responded_by_external_id = None, ""


def confirmation_decide_click(
    *,
    request_id: uuid.UUID,
    organization_id: int,
    user: Any,
    approve: bool,
    reason: str,
    via_channel_id: int,
    external_id: str,
) -> DecisionOutcome | None:
    """A verified card click through channel ``via_channel_id`` of ``organization_id``, decided in
    two statements (:mod:`approvals.decision_sql`) when it is the common case: the first vote of
    a request one approval settles and any rejection rejects, neither escalated nor edited, sent
    to this channel, by a clicker :func:`describe_refusal` lets decide. The same rows, events and
    follow-ups as :func:`confirmation_decide`, whose conditional update it shares; in production
    the follow-up is written by the same statement, to the outbox (:mod:`fimone.outbox`).

    ``None`` for every other click (no such request in the organisation, a refusal, a late
    click, a quorum, an escalation, or a database without the two-statement path): the caller
    hands it to :func:`confirmation_decide`, which answers and logs it."""
    if not decision_sql.available():
        return None
    facts = decision_sql.click_facts(request_id=request_id, organization_id=organization_id, user_id=user.pk)
    verdict = _click_verdict(
        facts=facts,
        user=user,
        approve=approve,
        reason=reason,
        via_channel_id=via_channel_id,
        external_id=external_id,
    )
    if verdict is None:
        return None
    try:
        if transaction.get_connection().in_atomic_block:
            with transaction.atomic():  # a savepoint: a failure must not void the caller's work
                won = decision_sql.verdict_write(verdict)
        else:
            won = decision_sql.verdict_write(verdict)  # one statement, its own transaction
    except IntegrityError as exc:  # e.g. the organisation's chain has no head row yet
        log.info("the quick decision of %s failed (%s); deciding it the long way", request_id, exc)
        won = False
    outcome = _click_outcome(verdict, won=won)
    if outcome is not None and verdict.follow_up is None:
        transaction.on_commit(lambda: _after_verdict(verdict.request))
    return outcome


async def confirmation_decide_click_async(
    db: psycopg.AsyncConnection,
    *,
    facts: decision_sql.ClickFacts | None,
    user: Any,
    approve: bool,
    reason: str,
    via_channel_id: int,
    external_id: str,
) -> DecisionOutcome | None:
    """:func:`confirmation_decide_click` on the server's event loop, on ``db`` (:mod:`fimone.adb`),
    from ``facts`` the caller read with ``user``'s standing (``None``: no such request in the
    channel's organisation): the same rules and write, for a deployment whose follow-ups go
    through the outbox (the caller checks :func:`clicks_on_the_loop`). ``None`` exactly where
    that returns ``None``."""
    verdict = _click_verdict(
        facts=facts,
        user=user,
        approve=approve,
        reason=reason,
        via_channel_id=via_channel_id,
        external_id=external_id,
    )
    if verdict is None:
        return None
    if verdict.follow_up is None:  # pragma: no cover - clicks_on_the_loop() rules this out
        raise RuntimeError("a click decided on the event loop needs its follow-up in the outbox")
    try:
        won = await decision_sql.verdict_write_async(db, verdict)
    except psycopg.IntegrityError as exc:
        log.info("the quick decision of %s failed (%s); deciding it the long way", verdict.request.pk, exc)
        won = False
    return _click_outcome(verdict, won=won)


def _click_outcome(verdict: decision_sql.Verdict, *, won: bool) -> DecisionOutcome | None:
    """The outcome of a written verdict; ``None`` when it was not written (settled, expired,
    escalated or edited since it was read), the request in memory as it was."""
    if not won:
        _pending_again(verdict.request)
        return None
    request = verdict.request
    return DecisionOutcome(True, str(request.status), f"The request was {request.status}.", request)


def clicks_on_the_loop() -> bool:
    """Whether card clicks may be decided on the server's event loop: ``QUICK_CLICKS`` on,
    PostgreSQL, and verdicts followed up through a Celery broker (so through the outbox)."""
    from celery import current_app
    from django.conf import settings

    return (
        settings.QUICK_CLICKS
        and decision_sql.available()
        and settings.RUN_EXECUTOR == "celery"
        and settings.CHANNEL_DELIVERY == "celery"
        and not current_app.conf.task_always_eager
    )


def edit_problem(
    *, request: ConfirmationRequest, edited_args: Any, approve: bool = True, via_channel_id: int | None = None
) -> str | None:
    """Why ``edited_args`` may not replace ``request``'s arguments (``None`` when they may): the
    policy must allow edits, only an approval carries them, only from the web inbox or the API
    (a chat button cannot), and they must satisfy the tool's parameter schema as the agent's
    toolbox declares it now."""
    if not request.allow_edit_on_approve:
        return "this request's approver policy does not allow changing the arguments"
    if not approve:
        return "only an approval can change the arguments"
    if via_channel_id is not None:
        return "arguments can only be changed in the web inbox"
    if not isinstance(edited_args, dict):
        return "the arguments must be a JSON object"
    if jsonsafe.storable(edited_args) is not edited_args:
        return "they hold characters or values that cannot be stored (NUL, lone surrogates, NaN)"
    try:
        tool = tools_for_agent(request.agent).get(request.tool_name)
    except ToolboxError as exc:
        return f"the agent's tools cannot be read ({exc})"
    if tool is None:
        return f"the tool {request.tool_name} is no longer available to this agent"
    problems = argument_errors(tool.spec.parameters, edited_args)
    if problems:
        return "they do not fit the tool's parameters: " + "; ".join(problems[:5])
    return None


def _apply_edit(
    *, request: ConfirmationRequest, edited_args: dict[str, Any], user: Any, external_id: str
) -> None:
    """Replace the proposed arguments by the approver's (the caller holds the request's lock and
    checked :func:`edit_problem`). The proposed ones are kept on the request and in the log."""
    proposed, proposed_hash = request.tool_args, request.args_sha256
    written = {
        "tool_args": edited_args,
        "args_sha256": args_sha256(edited_args),
        "proposed_args": proposed,
        "proposed_args_sha256": proposed_hash,
        "edited_by": user,
    }
    ConfirmationRequest.objects.filter(pk=request.pk, status=ConfirmationStatus.PENDING).update(**written)
    for field, value in written.items():
        setattr(request, field, value)
    log_event(
        request_id=request.pk,
        kind=Kind.EDITED,
        actor=user,
        external_id=external_id,
        proposed_args=proposed,
        proposed_args_sha256=proposed_hash,
        approved_args=edited_args,
        approved_args_sha256=written["args_sha256"],
    )


def _late(*, request_id: uuid.UUID, user: Any, external_id: str, verdict: str) -> DecisionOutcome:
    """A vote that came after the verdict or the deadline: logged, and answered with the
    verdict."""
    request = request_for_decision(request_id=request_id)
    if request is None:  # deleted with its run meanwhile
        return DecisionOutcome(False, "not_found", "No such approval request.")
    late = "expired" if request.is_pending else str(request.status)
    log_event(
        request_id=request.pk,
        kind=Kind.CLICK_REFUSED,
        actor=user,
        external_id=external_id,
        reason=f"already {late}",
        wanted=str(verdict),
    )
    return DecisionOutcome(False, late, f"This request was already {late}.", request)


def sent_channel_ids(*, request: ConfirmationRequest) -> set[int | None]:
    """The channel configurations ``request``'s cards went to: its own, and those of the
    escalation tiers that happened (one query, for escalated requests only)."""
    ids: set[int | None] = {request.channel_config_id}
    if request.escalation_level:
        for details in ConfirmationEvent.objects.filter(
            request_id=request.pk, kind=Kind.ESCALATED
        ).values_list("details", flat=True):
            ids.add(details.get("from_channel_config_id"))
            ids.add(details.get("channel_config_id"))
    return ids


def confirmation_escalate_due(*, now: dt.datetime | None = None, limit: int = 500) -> int:
    """Escalate pending requests whose next tier is due (the beat / in-process sweep). One query
    when nothing is due. Each escalation is its own transaction and happens once: the conditional
    update on ``escalation_level`` lets only one sweeper move a request to its next tier."""
    now = now or timezone.now()
    due = list(
        ConfirmationRequest.objects.filter(
            status=ConfirmationStatus.PENDING, next_escalation_at__lte=now, expires_at__gt=now
        ).values_list("pk", flat=True)[:limit]
    )
    escalated = 0
    for request_id in due:
        with transaction.atomic():
            if _escalate(request_id=request_id, now=now):
                escalated += 1
    return escalated


def _escalate(*, request_id: uuid.UUID, now: dt.datetime) -> bool:
    request = ConfirmationRequest.objects.select_related("channel_config").get(pk=request_id)
    level, plan = request.escalation_level, request.escalation_plan or []
    if level >= len(plan):
        return False
    tier = plan[level]
    following = plan[level + 1] if level + 1 < len(plan) else None
    channel_config_id = tier.get("channel_config_id") or request.channel_config_id
    channel = tier.get("channel") or request.channel
    won = ConfirmationRequest.objects.filter(
        pk=request_id, status=ConfirmationStatus.PENDING, escalation_level=level
    ).update(
        escalation_level=level + 1,
        next_escalation_at=request.created_at + dt.timedelta(seconds=following["after_seconds"])
        if following
        else None,
        channel_config_id=channel_config_id,
        channel=channel,
        # A new card: the previous card's id no longer names the one to update.
        external_message_id=""
        if channel_config_id != request.channel_config_id
        else request.external_message_id,
    )
    if not won:
        return False
    added = eligible_ids(
        organization_id=request.organization_id,
        user_ids=set(tier.get("user_ids") or []),
        requester_id=request.requested_by_id,
        allow_self=request.allow_self_approval,
        agent=request.agent,
    )
    # People already asked move up to this tier (they may decide even if the first tier may not).
    ConfirmationApprover.objects.filter(request_id=request_id, user_id__in=added).update(tier=level + 1)
    ConfirmationApprover.objects.bulk_create(
        [ConfirmationApprover(request_id=request_id, user_id=user_id, tier=level + 1) for user_id in added],
        ignore_conflicts=True,
    )
    log_event(
        request_id=request_id,
        kind=Kind.ESCALATED,
        tier=level + 1,
        after_seconds=tier["after_seconds"],
        added_approvers=sorted(added),
        channel=channel,
        channel_config_id=channel_config_id,
        from_channel_config_id=request.channel_config_id,
    )
    transaction.on_commit(
        lambda: confirmation_opened.send(sender=ConfirmationRequest, request_id=request_id, channel=channel)
    )
    transaction.on_commit(lambda: inbox_changed(request_id=request_id, change=OPENED))
    return True


def confirmation_expire_due(*, now: dt.datetime | None = None, limit: int = 500) -> int:
    """Expire pending requests past their deadline (the beat / in-process sweep). One query when
    nothing is due. Each expiry is its own transaction with the same conditional update as a
    decision, so it races safely with clicks."""
    now = now or timezone.now()
    due = list(
        ConfirmationRequest.objects.filter(
            status=ConfirmationStatus.PENDING, expires_at__lte=now
        ).values_list("pk", flat=True)[:limit]
    )
    expired = 0
    for request_id in due:
        with transaction.atomic():
            won = ConfirmationRequest.objects.filter(pk=request_id, status=ConfirmationStatus.PENDING).update(
                status=ConfirmationStatus.EXPIRED, responded_at=now
            )
            if not won:
                continue
            request = ConfirmationRequest.objects.get(pk=request_id)
            log_event(
                request_id=request_id,
                kind=Kind.EXPIRED,
                timeout_seconds=request.timeout_seconds,
                verdict=request.verdict_record(),
            )
            transaction.on_commit(lambda r=request: _after_verdict(r))
            expired += 1
    return expired


@transaction.atomic
def confirmation_cancel(*, request_id: uuid.UUID, reason: str, actor: Any = None) -> bool:
    """Withdraw a pending request (its run was cancelled). ``False`` if it was already final."""
    now = timezone.now()
    won = ConfirmationRequest.objects.filter(pk=request_id, status=ConfirmationStatus.PENDING).update(
        status=ConfirmationStatus.CANCELLED, responded_at=now, reason=reason
    )
    if won:
        request = ConfirmationRequest.objects.get(pk=request_id)
        log_event(
            request_id=request_id,
            kind=Kind.CANCELLED,
            actor=actor,
            reason=reason,
            verdict=request.verdict_record(),
        )
        from approvals.waking import wake

        transaction.on_commit(
            lambda: (
                wake(request_id),
                announce_settled(request_id=request.pk, channel=request.channel, status=request.status),
                inbox_changed(request_id=request_id, change=SETTLED),
            )
        )
    return bool(won)


def confirmation_log_executed(*, request_id: uuid.UUID, tool_status: str) -> None:
    log_event(request_id=request_id, kind=Kind.EXECUTED, tool_status=tool_status)


def runs_resume_orphaned() -> int:
    """Safety net for lost wake-ups: resume parked runs none of whose requests is still pending.
    One query when there are none."""
    from agents.executors import dispatch_resume

    run_ids = list(
        Run.objects.filter(status=RunStatus.AWAITING_APPROVAL, confirmation_requests__isnull=False)
        .exclude(confirmation_requests__status=ConfirmationStatus.PENDING)
        .values_list("pk", flat=True)
        .distinct()[:200]
    )
    for run_id in run_ids:
        dispatch_resume(run_id, reason="its approval was settled")
    return len(run_ids)
