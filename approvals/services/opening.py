"""Opening a request: the gate asks for a human, and the request is snapshotted with the
approvers, quorum, escalation plan and deadline its policy says at that moment (DESIGN §5).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.models import Run
from approvals import presentation
from approvals.channels import channel_config_for
from approvals.live import OPENED, inbox_changed
from approvals.models import ConfirmationRequest
from approvals.policy import approver_ids, policy_for, tier_approver_ids
from approvals.services.event_log import Kind, log_event
from approvals.signals import confirmation_opened


@dataclass(frozen=True)
class Opened:
    request: ConfirmationRequest
    created: bool
    inline_wait_seconds: int


class NoApprovers(Exception):
    """The policy leaves nobody who could approve this call."""


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
