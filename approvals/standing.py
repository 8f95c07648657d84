"""Whether one person may decide one request now (docs/design.md §1.7, §1.13): their :class:`Standing`
on it, read in two queries (or with the request, by ``approvals.decision_sql``), and the rules
over it (:func:`describe_refusal`), for plain approvers, staged requests and stand-ins alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Exists, OuterRef
from django.utils import timezone

from approvals.models import ApproverPolicy, ConfirmationApprover, EscalationTier
from approvals.policy import APPROVER_ROLES, ResolvedPolicy, configured_exists, policy_row
from tenancy.models import Membership


@dataclass(frozen=True)
class Standing:
    """What the rules of :func:`describe_refusal` need to know about one person and one request
    beyond the two rows themselves: their approver-snapshot row (``tier``, ``None`` when they are
    not in the snapshot), their memberships of its organisation, and the agent's current policy
    (its flags, ``None`` for the built-in defaults, and whether it or one of its escalation tiers
    names them), and whether the configuration history records them changing the agent, its
    hooks or its policy (``configured``; its owner is read from the agent). Read by
    :func:`standing_of` (two queries) or by a caller that reads it together with the request
    (``approvals.decision_sql``)."""

    tier: int | None
    member: bool
    org_approver: bool
    policy: PolicyFlags | None
    named_by_policy: bool = False
    named_by_a_tier: bool = False
    configured: bool = False
    #: the stage of the request that asks them (their snapshot row's; 0 without stages)
    stage: int = 0
    #: whom they stand in for on this request (an absence's delegate, or a reassignment)
    delegate_of: int | None = None
    #: whether the absence that made them a stand-in still runs (``False``: it ended)
    delegation_active: bool = True
    #: an absence's stand-in (``False`` for an admin's reassignment, which needs no absence)
    by_absence: bool = False
    #: an admin reassigned their part of the request to someone else
    withdrawn: bool = False


@dataclass(frozen=True)
class PolicyFlags:
    """Who an approver policy lets decide (the flags :func:`describe_refusal` reads)."""

    allow_self_approval: bool
    allow_agent_owner: bool
    allow_initiator: bool
    allow_org_approvers: bool


def standing_of(*, request: Any, user: Any) -> Standing:
    """``user``'s :class:`Standing` on ``request`` in two indexed queries (the snapshot row with
    the memberships and the configuration history, the policy with whether it names the user)."""
    memberships = Membership.objects.filter(user_id=user.pk, organization_id=request.organization_id)
    agent_history, hook_history, policy_history = configured_exists(
        agent_id=request.agent_id, organization_id=request.organization_id, user=user.pk
    )
    row = (
        ConfirmationApprover.objects.filter(request_id=request.pk, user_id=user.pk)
        .annotate(
            member=Exists(memberships),
            org_approver=Exists(memberships.filter(role__in=APPROVER_ROLES)),
            agent_changed=agent_history,
            hooks_changed=hook_history,
            policy_changed=policy_history,
        )
        .values_list(
            "tier",
            "stage",
            "delegate_of_id",
            "absence_id",
            "absence__starts_at",
            "absence__ends_at",
            "absence__ended_at",
            "withdrawn_at",
            "member",
            "org_approver",
            "agent_changed",
            "hooks_changed",
            "policy_changed",
        )
        .first()
    )
    if row is None:
        return Standing(tier=None, member=False, org_approver=False, policy=None)
    (
        tier,
        stage,
        delegate_of,
        absence_id,
        starts,
        ends,
        ended,
        withdrawn_at,
        member,
        org_approver,
        *changed,
    ) = row
    configured = any(changed)
    stand_in: dict[str, Any] = {
        "stage": stage,
        "delegate_of": delegate_of,
        "by_absence": absence_id is not None,
        "delegation_active": absence_id is None or absence_running(starts, ends, ended),
        "withdrawn": withdrawn_at is not None,
    }
    policy = policy_row(
        request.agent,
        ApproverPolicy.objects.annotate(
            names_user=Exists(
                ApproverPolicy.named_users.through.objects.filter(
                    approverpolicy_id=OuterRef("pk"), user_id=user.pk
                )
            ),
            tier_names_user=Exists(
                EscalationTier.named_users.through.objects.filter(
                    escalationtier__policy_id=OuterRef("pk"), user_id=user.pk
                )
            ),
        ),
    )
    if policy is None:
        return Standing(
            tier=tier,
            member=member,
            org_approver=org_approver,
            policy=None,
            configured=configured,
            **stand_in,
        )
    return Standing(
        tier=tier,
        **stand_in,
        member=member,
        org_approver=org_approver,
        configured=configured,
        policy=PolicyFlags(
            allow_self_approval=policy.allow_self_approval,
            allow_agent_owner=policy.allow_agent_owner,
            allow_initiator=policy.allow_initiator,
            allow_org_approvers=policy.allow_org_approvers,
        ),
        named_by_policy=policy.names_user,
        named_by_a_tier=policy.tier_names_user,
    )


def describe_refusal(*, request: Any, user: Any, standing: Standing | None = None) -> str | None:
    """Why ``user`` may not decide ``request`` (``None`` when they may).

    The approver snapshot taken at opening is an upper bound: at decision time the user must also
    still be active, a member of the request's organisation and eligible under the agent's
    current policy (:func:`approver_ids`, or an escalation tier's :func:`tier_approver_ids` once
    the request was escalated). ``request.agent`` is loaded (or loadable) by the caller.
    Whoever configures the agent (:func:`conflicted_ids`) decides only while they hold an approver
    or admin membership, and never their own call.

    The same rules as those two functions, asked of one person, over their :class:`Standing`
    (read here by :func:`standing_of` unless the caller read it already): two indexed queries
    where computing the whole approver set took five or more. A click pays this on every
    decision."""
    if user is None or not getattr(user, "is_authenticated", False):
        return "not signed in"
    if not user.is_active:
        return "the account is deactivated"
    if user.pk == request.requested_by_id and not request.allow_self_approval:
        return "the requester may not approve their own call"
    if standing is None:
        standing = standing_of(request=request, user=user)
    if standing.tier is None:
        return "not an approver of this request"
    if standing.withdrawn:
        return "an admin reassigned your part of this request to someone else"
    if not standing.member:
        return "no longer a member of the organisation"
    agent = request.agent
    is_requester = user.pk == request.requested_by_id
    # Separation of duties (docs/design.md §1.13), whatever the policy says.
    if standing.configured or user.pk == agent.owner_id:
        if is_requester:
            return "whoever configures the agent may not decide their own call"
        if not standing.org_approver:
            return "whoever configures the agent decides only if an organisation admin made them an approver"
    if standing.delegate_of is not None:
        return _stand_in_refusal(request=request, standing=standing)
    if request.stage_plan:
        # A staged request is decided stage by stage, each by the people its snapshot asks for
        # it, while they are still approvers or admins of the organisation (as stages require).
        if standing.stage != request.stage_index:
            return stage_refusal(request=request, stage=standing.stage)
        if not standing.org_approver:
            return "no longer an approver of the organisation"
        return _escalation_refusal(request=request, standing=standing)
    rules: PolicyFlags | ResolvedPolicy = standing.policy if standing.policy is not None else ResolvedPolicy()
    barred_as_requester = is_requester and not rules.allow_self_approval
    current = not barred_as_requester and (
        standing.named_by_policy
        or (rules.allow_agent_owner and user.pk == agent.owner_id)
        or (rules.allow_initiator and is_requester)
        or (rules.allow_org_approvers and standing.org_approver)
    )
    in_a_tier = not barred_as_requester and standing.named_by_a_tier
    if not current and (request.escalation_level == 0 or not in_a_tier):
        return "no longer an approver under the agent's current policy"
    return _escalation_refusal(request=request, standing=standing)


def absence_running(starts: Any, ends: Any, ended: Any, *, now: Any = None) -> bool:
    """Whether an absence (its ``starts_at``, ``ends_at``, ``ended_at``) runs at ``now``."""
    now = now or timezone.now()
    return ended is None and starts is not None and starts <= now < ends


def _stand_in_refusal(*, request: Any, standing: Standing) -> str | None:
    """The rules for someone standing in for another approver on ``request`` (their own membership
    and separation of duties are checked already). They must still be an approver or admin of the
    organisation and, for an absence's delegate, the absence must still run and the absent person
    must still be able to decide it: a delegate's standing is the delegator's, never more."""
    absent = get_user_model().objects.filter(pk=standing.delegate_of).first()
    name = _name(absent)
    if standing.by_absence and not standing.delegation_active:
        return f"your stand-in for {name} has ended"
    if not standing.org_approver:
        return "no longer an approver of the organisation"
    if request.stage_plan and standing.stage != request.stage_index:
        return stage_refusal(request=request, stage=standing.stage)
    if standing.by_absence and absent is not None:
        theirs = describe_refusal(request=request, user=absent)
        if theirs is not None:
            return f"you stand in for {name}, who may not decide it ({theirs})"
    return _escalation_refusal(request=request, standing=standing)


def _name(user: Any) -> str:
    if user is None:
        return "someone"
    return (user.get_full_name() if hasattr(user, "get_full_name") else "") or user.get_username()


def _escalation_refusal(*, request: Any, standing: Standing) -> str | None:
    if (
        request.escalation_level > 0
        and not request.first_tier_may_decide_after_escalation
        and not standing.tier
    ):
        return "the request was escalated: only the escalation tiers may decide it now"
    return None


def stage_name(request: Any, index: int) -> str:
    """How people read stage ``index`` of ``request``: "stage 2 of 2 (Finance)"."""
    plan = request.stage_plan or []
    name = plan[index].get("name", "") if 0 <= index < len(plan) else ""
    where = f"stage {index + 1} of {len(plan)}"
    return f"{where} ({name})" if name else where


def stage_refusal(*, request: Any, stage: int) -> str:
    """Why a person asked at ``stage`` may not decide ``request`` at its current stage."""
    current = stage_name(request, request.stage_index)
    if stage > request.stage_index:
        return f"you are asked at {stage_name(request, stage)}; the request is still at {current}"
    return f"your stage is over: the request is at {current}"
