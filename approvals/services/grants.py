"""Standing approvals (docs/design.md §5): an approver, approving a call, may also approve later calls of
the same tool whose arguments meet conditions they set, in the same conversation or for the whole
agent, for some hours or until revoked, as far as the agent's policy allows. The gate uses a
grant under a lock on its row (:func:`grant_for_call`), so a revocation (:func:`grant_revoke`)
and a use never overlap; each use is a request settled ``approved`` at once, logged with the
grant's id. Organisation-enforced hooks run before the gate, so they still have their say.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from agents.models import Run
from approvals.models import ApproverPolicy, ConfirmationRequest, ConfirmationStatus, StandingGrant
from approvals.policy import APPROVER_ROLES, ResolvedPolicy, eligible_ids, policy_for, stages_for_call
from approvals.presentation import SCOPE_TEXT, call_currency, call_facts, conditions_text, title_of
from approvals.selectors import display_name, request_for_decision
from approvals.services.deciding import DecisionOutcome, confirmation_decide
from approvals.services.event_log import Kind, log_event
from hooks.conditions import conditions_of, judge
from tenancy.models import Membership

Scope = StandingGrant.Scope


@dataclass(frozen=True)
class GrantAsk:
    """What an approver asks to grant with their approval: the scope, how many hours (``None``:
    until revoked) and the conditions on the arguments (``confirm_when``'s rows, all holding)."""

    scope: str
    hours: int | None
    conditions: list[dict[str, Any]]


class GrantRefused(Exception):
    """Why a standing approval cannot be granted, in words for the approver."""


def grant_rules(policy: ResolvedPolicy | ApproverPolicy) -> tuple[str, int, bool]:
    """The policy's standing-approval rules: (widest scope or ``off``, most hours, until revoked)."""
    return (
        getattr(policy, "standing_grants", ApproverPolicy.Grants.OFF),
        getattr(policy, "grant_max_hours", 8),
        getattr(policy, "grants_until_revoked", False),
    )


def check_grant(*, request: ConfirmationRequest, ask: GrantAsk) -> str | None:
    """Why ``ask`` may not be granted with an approval of ``request`` (``None`` when it may)."""
    policy = policy_for(agent=request.agent)
    widest, max_hours, until_revoked = grant_rules(policy)
    if widest == ApproverPolicy.Grants.OFF:
        return "the agent's approver policy allows no standing approvals"
    if request.approvals_required > 1 or request.stage_plan or policy.approvals_required > 1:
        return "a standing approval stands for one person's approval: not where more than one must approve"
    if ask.scope not in Scope.values:
        return "choose this conversation or this agent"
    if ask.scope == Scope.AGENT and widest != ApproverPolicy.Grants.AGENT:
        return "the policy allows standing approvals for this conversation only"
    if ask.hours is None and not until_revoked:
        return f"the policy allows standing approvals of at most {max_hours} hours, not until revoked"
    if ask.hours is not None and not 1 <= ask.hours <= max_hours:
        return f"a standing approval lasts from 1 to {max_hours} hours under this policy"
    try:
        conditions = conditions_of(ask.conditions)
    except ValueError as exc:
        return str(exc)
    if not conditions:
        return "say which arguments it covers: at least one condition"
    schema = call_facts(agent=request.agent, tool_name=request.tool_name).parameters
    judged = judge(conditions, request.tool_args, schema=schema)
    if judged.doubt:
        # A grant approves without asking: one that cannot tell what it covers covers nothing.
        return f"the conditions cannot tell whether they cover the call you approve: {judged.why}"
    if not judged.met:
        return "the conditions must cover the call you approve"
    return None


@transaction.atomic
def confirmation_approve_granting(
    *,
    request_id: uuid.UUID,
    user: Any,
    ask: GrantAsk,
    reason: str = "",
    seen_args_sha256: str = "",
) -> tuple[DecisionOutcome, StandingGrant | None]:
    """Approve ``request_id`` as :func:`~approvals.services.deciding.confirmation_decide` does and,
    if that approval settled it, grant ``ask`` (logged ``granted`` on the request). A grant the
    policy does not allow refuses the whole decision first (:class:`GrantRefused`), so an
    approver never approves thinking they granted more than they did."""
    request = request_for_decision(request_id=request_id)
    if request is None:
        return confirmation_decide(request_id=request_id, user=user, approve=True), None
    problem = check_grant(request=request, ask=ask)
    if problem is not None:
        raise GrantRefused(problem)
    outcome = confirmation_decide(
        request_id=request_id,
        user=user,
        approve=True,
        reason=reason,
        loaded=request,
        seen_args_sha256=seen_args_sha256,
    )
    if not (outcome.accepted and outcome.status == ConfirmationStatus.APPROVED):
        return outcome, None
    now = timezone.now()
    grant = StandingGrant.objects.create(
        organization_id=request.organization_id,
        agent_id=request.agent_id,
        conversation_id=request.run.conversation_id if ask.scope == Scope.CONVERSATION else None,
        scope=ask.scope,
        tool_name=request.tool_name,
        conditions=ask.conditions,
        granted_by=user,
        source_request=request,
        created_at=now,
        expires_at=now + dt.timedelta(hours=ask.hours) if ask.hours is not None else None,
    )
    log_event(
        request_id=request.pk,
        organization_id=request.organization_id,
        kind=Kind.GRANTED,
        actor=user,
        grant=grant.pk,
        scope=grant.scope,
        conditions=grant.conditions,
        until=grant.expires_at.isoformat() if grant.expires_at else "revoked",
    )
    return outcome, grant


@transaction.atomic
def grant_revoke(*, grant: StandingGrant, by: Any) -> StandingGrant:
    """Revoke at once: a call the grant is approving right now finishes first (it holds the row's
    lock), and no call uses it after."""
    locked = StandingGrant.objects.select_for_update().get(pk=grant.pk)
    if locked.revoked_at is None:
        locked.revoked_at, locked.revoked_by = timezone.now(), by
        locked.save(update_fields=["revoked_at", "revoked_by"])
    return locked


def may_revoke(*, grant: StandingGrant, user: Any) -> bool:
    """Its granter, an admin of its organisation, or a superuser."""
    if user.is_superuser or user.pk == grant.granted_by_id:
        return True
    return Membership.objects.filter(
        user_id=user.pk, organization_id=grant.organization_id, role="admin"
    ).exists()


def grant_for_call(
    *,
    run: Run,
    tool_name: str,
    tool_args: Any,
    policy: ResolvedPolicy,
    now: dt.datetime,
    schema: Mapping[str, Any] | None = None,
) -> StandingGrant | None:
    """A standing approval that approves this call now, locked until the caller's transaction
    ends; ``None`` when none does. It must be active, for this agent and tool (and conversation,
    if so scoped), its conditions all met by the arguments as they reach the gate (judged with
    the tool's parameters ``schema``; a condition in doubt covers nothing: docs/design.md §1.16), the policy
    must still allow it (one approval decides, no stage applies, its scope still allowed), and
    its granter must still be able to decide the call (an active approver of the organisation,
    not barred by separation of duties)."""
    widest, _hours, _until = grant_rules(policy)
    if widest == ApproverPolicy.Grants.OFF or policy.approvals_required > 1:
        return None
    if stages_for_call(policy=policy, agent=run.agent, tool_name=tool_name, args=tool_args, schema=schema):
        return None
    candidates = (
        StandingGrant.objects.select_for_update()
        .filter(agent_id=run.agent_id, tool_name=tool_name, revoked_at__isnull=True)
        .exclude(expires_at__lte=now)
        .order_by("pk")
    )
    approvers: set[int] | None = None  # read once a grant's conditions hold, not for every gated call
    for grant in candidates:
        if grant.scope == Scope.CONVERSATION and grant.conversation_id != run.conversation_id:
            continue
        if grant.scope == Scope.AGENT and widest != ApproverPolicy.Grants.AGENT:
            continue
        try:
            conditions = conditions_of(grant.conditions)
        except ValueError:
            continue
        if not conditions or not judge(conditions, tool_args, schema=schema).met:
            continue
        if approvers is None:
            approvers = set(
                Membership.objects.filter(
                    organization_id=run.agent.organization_id, role__in=APPROVER_ROLES
                ).values_list("user_id", flat=True)
            )
        if grant.granted_by_id not in approvers:
            continue
        allowed = eligible_ids(
            organization_id=run.agent.organization_id,
            user_ids={grant.granted_by_id},
            requester_id=run.user_id,
            allow_self=policy.allow_self_approval,
            agent=run.agent,
        )
        if grant.granted_by_id in allowed:
            return grant
    return None


def grant_settle(*, request: ConfirmationRequest, grant: StandingGrant, now: dt.datetime) -> None:
    """Settle the just opened ``request`` as approved by ``grant`` (caller holds the grant's row
    lock, in the transaction that opened the request): the same conditional update as every
    decision, the verdict logged with the grant's id, the grant's use counted."""
    written = {
        "status": ConfirmationStatus.APPROVED,
        # Never before the request's own moment (stamped when its row was written): a verdict
        # does not come before the question.
        "responded_at": max(now, request.created_at),
        "responded_by_id": grant.granted_by_id,
        "reason": f"standing approval #{grant.pk}",
    }
    won = ConfirmationRequest.objects.filter(pk=request.pk, status=ConfirmationStatus.PENDING).update(
        **written
    )
    if not won:  # pragma: no cover - the request was opened in this very transaction
        return
    for field, value in written.items():
        setattr(request, field, value)
    StandingGrant.objects.filter(pk=grant.pk).update(uses=F("uses") + 1)
    log_event(
        request_id=request.pk,
        organization_id=request.organization_id,
        kind=Kind.DECIDED,
        status=str(ConfirmationStatus.APPROVED),
        reason=request.reason,
        via="grant",
        grant=grant.pk,
        granted_by=[grant.granted_by_id],
        verdict=request.verdict_record(),
    )


def grant_text(grant: StandingGrant) -> str:
    """A grant as people read it: "april approves Pay a purchase where Amount is at most 5,000.00
    USD, in every conversation of the agent, until 2026-12-05 18:00 UTC" (no conditions: "whatever
    its arguments")."""
    source = grant.source_request
    currency = call_currency(source.tool_args, source.context)
    said = conditions_text(grant.conditions, currency=currency)
    where = f"where {said}" if said else "whatever its arguments"
    until = f"until {grant.expires_at:%Y-%m-%d %H:%M %Z}" if grant.expires_at else "until revoked"
    scope = SCOPE_TEXT.get(grant.scope, "in one conversation")
    tool = grant.source_request.tool_title or title_of(grant.tool_name)
    return f"{display_name(grant.granted_by)} approves {tool} {where}, {scope}, {until}"
