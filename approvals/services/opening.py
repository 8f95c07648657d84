"""Opening a request: the gate asks for a human, and the request is snapshotted with the
approvers, quorum, escalation plan and deadline its policy says at that moment (docs/design.md §5).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.models import Run
from approvals import presentation
from approvals.channels import channel_config_for
from approvals.live import OPENED, inbox_changed
from approvals.models import ConfirmationApprover, ConfirmationRequest
from approvals.policy import (
    ResolvedPolicy,
    ResolvedStage,
    approver_ids,
    inline_wait_of,
    policy_for,
    stage_approver_ids,
    stages_for_call,
    tier_approver_ids,
)
from approvals.services.absences import stand_in, stand_ins_at_opening
from approvals.services.event_log import Kind, log_event
from approvals.services.grants import grant_for_call, grant_settle
from approvals.signals import confirmation_opened
from fimone import telemetry


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
    schema: Mapping[str, Any] | None = None,
) -> Opened:
    """Open the request for ``(run, tool_call_id)``, or return the one already open (a resumed
    run re-enters the same call). A new request is snapshotted with its approvers and handed to
    its channel for delivery after commit. Raises :class:`NoApprovers` if nobody could decide.

    The request keeps what approvers read about the call (:mod:`approvals.presentation`): the
    tool's title and the call's ``context``. ``facts``: the tool's description as
    :func:`~approvals.presentation.call_facts` read it (read here when not given); ``context``:
    what its context action answered (:func:`~approvals.presentation.context_read`, which the gate
    calls on its event loop, outside this transaction); without it, the arguments. ``schema``: the
    tool's parameters as the engine checked the arguments against them, which the stages' and
    standing approvals' conditions read (:mod:`hooks.conditions`); without it, the toolbox's."""
    existing = ConfirmationRequest.objects.filter(run=run, tool_call_id=tool_call_id).first()
    agent = run.agent
    if existing is not None:  # a resumed run re-enters its call: only the inline wait is needed
        return Opened(existing, False, inline_wait_of(agent=agent))
    policy = policy_for(agent=agent)
    facts = facts or presentation.call_facts(agent=agent, tool_name=tool_name)
    schema = facts.parameters if schema is None else schema
    stages = stage_plan(policy=policy, run=run, tool_name=tool_name, tool_args=tool_args, schema=schema)
    if stages:
        first = stages[0]
        approvers_by_stage = [set(stage["user_ids"]) for stage in stages]
        approvers = approvers_by_stage[0]
        approvals_required, timeout_seconds = first["approvals_required"], first["timeout_seconds"]
        plan = first["tiers"]
    else:
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
        approvers_by_stage = [approvers]
        approvals_required, timeout_seconds = policy.approvals_required, policy.timeout_seconds
        plan = tier_plan(policy.tiers, timeout_seconds=timeout_seconds)
    channel_config = channel_config_for(agent=agent, policy_channel_id=policy.channel_config_id)
    now = timezone.now()
    # A standing approval that covers the call approves it at once (its row locked until commit).
    grant = (
        None
        if stages
        else grant_for_call(
            run=run,
            tool_name=tool_name,
            tool_args=tool_args,
            schema=schema,
            policy=policy,
            now=now,
        )
    )
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
                trace_context=telemetry.traceparent(),
                mode=ConfirmationRequest.Mode.INLINE
                if channel_config is None
                else ConfirmationRequest.Mode.CHANNEL,
                channel=channel_config.kind if channel_config is not None else "web",
                channel_config=channel_config,
                allow_self_approval=policy.allow_self_approval,
                approvals_required=approvals_required,
                # Any stage's rejection rejects a staged call.
                any_rejection_rejects=policy.any_rejection_rejects or bool(stages),
                allow_edit_on_approve=policy.allow_edit_on_approve,
                expires_at=now + dt.timedelta(seconds=timeout_seconds),
                escalation_plan=plan,
                next_escalation_at=now + dt.timedelta(seconds=plan[0]["after_seconds"]) if plan else None,
                first_tier_may_decide_after_escalation=policy.first_tier_may_decide_after_escalation,
                stage_plan=stages,
                stage_opened_at=now if stages else None,
                grant=grant,
            )
    except IntegrityError:  # a concurrent opener won: theirs is the request
        return Opened(
            ConfirmationRequest.objects.get(run=run, tool_call_id=tool_call_id),
            False,
            policy.inline_wait_seconds,
        )
    ConfirmationApprover.objects.bulk_create(
        [
            ConfirmationApprover(request_id=request.pk, user_id=user_id, stage=index)
            for index, people in enumerate(approvers_by_stage)
            for user_id in sorted(people)
        ]
    )
    away = stand_ins_at_opening(organization_id=agent.organization_id, asked=approvers_by_stage, now=now)
    staged = (
        {
            "stages": [
                {
                    "name": stage["name"],
                    "approvals_required": stage["approvals_required"],
                    "approvers": stage["user_ids"],
                }
                for stage in stages
            ]
        }
        if stages
        else {}
    )
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
        **staged,
    )
    if grant is not None:
        grant_settle(request=request, grant=grant, now=now)
        return Opened(request, True, policy.inline_wait_seconds)
    # Stand-ins for the approvers away now (after ``created``: the log says who was asked first).
    for row in ConfirmationApprover.objects.filter(request_id=request.pk, user_id__in=away).select_related(
        "request", "request__agent"
    ):
        stand_in(row=row, absence=away[row.user_id])
    transaction.on_commit(
        lambda: confirmation_opened.send(
            sender=ConfirmationRequest, request_id=request.pk, channel=request.channel
        )
    )
    transaction.on_commit(lambda: inbox_changed(request_id=request.pk, change=OPENED))
    return Opened(request, True, policy.inline_wait_seconds)


def tier_plan(tiers: tuple[Any, ...], *, timeout_seconds: int) -> list[dict[str, Any]]:
    """The escalation tiers a request (or one of its stages) snapshots: only those due before its
    deadline can happen ("up to the expiry")."""
    return [
        {
            "after_seconds": tier.after_seconds,
            "user_ids": sorted(tier.user_ids),
            "channel_config_id": tier.channel_config_id,
            "channel": tier.channel,
        }
        for tier in tiers
        if tier.after_seconds < timeout_seconds
    ]


def stage_plan(
    *,
    policy: ResolvedPolicy,
    run: Run,
    tool_name: str,
    tool_args: dict[str, Any],
    schema: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The stages that apply to this call, as the request snapshots them, each with the people it
    asks (``[]``: the call has no stages); ``schema``: the tool's parameters, which say how its
    arguments are judged (:mod:`hooks.conditions`). A person asked by several stages is asked by the first
    (a person votes once on a request, so nobody approves two stages of one call). Raises
    :class:`NoApprovers` naming the first stage that could not reach its quorum."""
    applying: list[ResolvedStage] = stages_for_call(
        policy=policy, agent=run.agent, tool_name=tool_name, args=tool_args, schema=schema
    )
    plan: list[dict[str, Any]] = []
    asked: set[int] = set()
    for index, stage in enumerate(applying, start=1):
        people = stage_approver_ids(stage=stage, policy=policy, agent=run.agent, requester_id=run.user_id)
        people -= asked
        if len(people) < stage.approvals_required:
            raise NoApprovers(
                f"stage {index} ({stage.name}) needs {stage.approvals_required} approval"
                f"{'s' if stage.approvals_required > 1 else ''} and only {len(people)} people may give it"
            )
        asked |= people
        timeout = stage.timeout_seconds or policy.timeout_seconds
        plan.append(
            {
                "name": stage.name,
                "approvals_required": stage.approvals_required,
                "timeout_seconds": timeout,
                "user_ids": sorted(people),
                "tiers": tier_plan(stage.tiers, timeout_seconds=timeout),
            }
        )
    return plan
