"""Deciding: a person's vote, from the web inbox, the API or a card's click, counted under a row
lock on the request (docs/design.md §1.4, §5).

A request leaves ``pending`` exactly once, through a conditional ``UPDATE … WHERE
status='pending'``; whoever loses that race is told what the verdict already is. Every attempt,
accepted or refused, is appended to the request's event log. Side effects of a verdict (waking an
inline waiter, resuming a suspended run, updating the card) run after commit
(:mod:`approvals.services.settling`).
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.engine import jsonsafe
from agents.engine.store import args_sha256
from approvals.models import (
    ConfirmationApprover,
    ConfirmationEvent,
    ConfirmationRequest,
    ConfirmationStatus,
    ConfirmationVote,
)
from approvals.policy import is_outsider
from approvals.selectors import Tally, has_voted, request_for_decision, seat_taken, tally_of
from approvals.services.editing import apply_edit, edit_problem
from approvals.services.event_log import Kind, log_event
from approvals.services.settling import after_stage_opened, after_vote, verdict_follow_up
from approvals.standing import describe_refusal, stage_name, stage_refusal


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


MAX_REASON_LENGTH = 2000


def clean_text(text: Any, *, limit: int = MAX_REASON_LENGTH) -> str:
    """A decider's free text (a reason typed in the inbox, the API or a card's form) as it is
    stored: stripped, at most ``limit`` characters, with what PostgreSQL text and ``jsonb``
    cannot hold (NUL, lone surrogates) replaced by U+FFFD, so that no click or form can make the
    decision's write fail."""
    return jsonsafe.text(text if isinstance(text, str) else "").strip()[:limit]


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
    A web or API caller with no business in the request's organisation
    (:func:`~approvals.policy.is_outsider`) is answered ``not_found`` exactly as for an unknown
    id, and nothing is written: another organisation learns nothing and cannot fill its log.
    (Callbacks reach here only for requests of the channel's own organisation.)
    ``loaded``: the request as :func:`~approvals.selectors.request_for_decision` returned it, if
    the caller has it already; the verdict is still taken by the conditional update, never from this copy.
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
        .values_list("status", "expires_at", "args_sha256", "edited_by_id", "channel", "stage_index")
        .first()
    )
    if locked is None or locked[0] != ConfirmationStatus.PENDING or locked[1] <= now:
        return _late(request_id=request.pk, user=user, external_id=external_id, verdict=verdict)
    if request.stage_plan and locked[5] != request.stage_index:
        # The request moved to its next stage since it was read: the decider's stage is over.
        request.stage_index = locked[5]
        refusal = stage_refusal(request=request, stage=asked_at_stage(request=request, user=user))
        log(Kind.CLICK_REFUSED, reason=refusal, via="web" if via_channel_id is None else via_channel_id)
        return DecisionOutcome(False, "refused", f"You cannot decide this request: {refusal}.", request)
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
    first_vote_settles = (
        request.approvals_required == 1 and request.any_rejection_rejects and not request.stage_plan
    )
    if not first_vote_settles and has_voted(request=request, user=user):
        log(Kind.CLICK_REFUSED, reason="already voted")
        return DecisionOutcome(
            False, "already_voted", "You have already voted on this request; a vote counts once.", request
        )
    taken = None if first_vote_settles else seat_taken(request=request, user=user)
    if taken is not None:
        log(Kind.CLICK_REFUSED, reason=f"already voted: {taken}")
        return DecisionOutcome(False, "already_voted", f"You cannot vote: {taken}.", request)
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
        apply_edit(request=request, edited_args=edited_args, user=user, external_id=external_id)
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
            **({"stage": request.stage_index + 1} if request.stage_plan else {}),
        )
        # The channel read under the lock: an escalation may have moved the card since ``request`` was loaded.
        channel = locked[4]
        transaction.on_commit(lambda: after_vote(request_id=request.pk, channel=channel))
        what = "approval" if approve else "rejection"
        return DecisionOutcome(False, RECORDED, f"Your {what} was recorded: {tally.text}.", request)

    verdict = ConfirmationStatus(tally.outcome)
    if verdict == ConfirmationStatus.APPROVED and request.stage_index + 1 < len(request.stage_plan):
        return _next_stage(request=request, user=user, reason=clean_reason, via=via, tally=tally, now=now)
    written = {
        "status": verdict,
        "responded_at": now,
        "responded_by": user,
        "responded_by_external_id": external_id,
        "reason": clean_reason,
    }
    # Still the one conditional update (docs/design.md §1.4); under the lock it cannot lose, but it is
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
        **decided_details(verdict=verdict, reason=request.reason, via=via, tally=tally),
        verdict=request.verdict_record(),
    )
    verdict_follow_up(request)
    return DecisionOutcome(True, str(verdict), f"The request was {verdict}.", request)


def asked_at_stage(*, request: ConfirmationRequest, user: Any) -> int:
    """The stage of ``request`` that asks ``user`` (0 when none does)."""
    stage = (
        ConfirmationApprover.objects.filter(request_id=request.pk, user_id=user.pk)
        .values_list("stage", flat=True)
        .first()
    )
    return stage or 0


def _next_stage(
    *, request: ConfirmationRequest, user: Any, reason: str, via: int | str, tally: Any, now: dt.datetime
) -> DecisionOutcome:
    """The vote completed its stage's quorum and a stage follows: the request stays pending and
    asks the next stage's people, with that stage's quorum, deadline and escalation tiers. Caller
    holds the row lock and has recorded the vote; the request's cards go out again (a new card)."""
    done, index = request.stage_index, request.stage_index + 1
    stage = request.stage_plan[index]
    plan = stage.get("tiers") or []
    changed = {
        "stage_index": index,
        "stage_opened_at": now,
        "approvals_required": stage["approvals_required"],
        "expires_at": now + dt.timedelta(seconds=stage["timeout_seconds"]),
        "escalation_plan": plan,
        "escalation_level": 0,
        "next_escalation_at": now + dt.timedelta(seconds=plan[0]["after_seconds"]) if plan else None,
        "external_message_id": "",
    }
    # Under the lock it cannot lose; the condition keeps every move of a stage to one writer.
    ConfirmationRequest.objects.filter(
        pk=request.pk, status=ConfirmationStatus.PENDING, stage_index=done
    ).update(**changed)
    finished = stage_name(request, done)
    log_event(
        request_id=request.pk,
        organization_id=request.organization_id,
        kind=Kind.VOTED,
        actor=user,
        vote=str(ConfirmationStatus.APPROVED),
        reason=reason,
        approvals=tally.approvals,
        rejections=tally.rejections,
        required=tally.required,
        via=via,
        stage=done + 1,
    )
    for field, value in changed.items():
        setattr(request, field, value)
    log_event(
        request_id=request.pk,
        organization_id=request.organization_id,
        kind=Kind.STAGE_OPENED,
        stage=index + 1,
        name=stage.get("name", ""),
        approvers=stage.get("user_ids", []),
        approvals_required=stage["approvals_required"],
        expires_at=request.expires_at.isoformat(),
    )
    channel = request.channel
    transaction.on_commit(lambda: after_stage_opened(request_id=request.pk, channel=channel))
    return DecisionOutcome(
        False,
        RECORDED,
        f"Your approval was recorded: {finished} is approved, and the request now waits for "
        f"{stage_name(request, index)}.",
        request,
    )


def decided_details(*, verdict: str, reason: str, via: int | str, tally: Tally) -> dict[str, Any]:
    """The details of a ``decided`` event (the tally only where there was more than one vote to
    count or a rejection)."""
    details: dict[str, Any] = {"status": str(verdict), "reason": reason, "via": via}
    if tally.required > 1 or tally.rejections:
        details.update(approvals=tally.approvals, rejections=tally.rejections, required=tally.required)
    return details


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
