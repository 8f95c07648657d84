"""Resolving an agent's approver policy and the set of people who may decide."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Exists, OuterRef, Q, QuerySet

from agents.models import Agent, HookDeclaration, Membership, Role
from approvals.models import ApproverPolicy, ConfirmationApprover, EscalationTier

APPROVER_ROLES = (Role.APPROVER, Role.ADMIN)
"""The roles an organisation admin gives to make someone an approver of the organisation: only
they may be named in a policy, and only they may decide the requests of an agent they configure."""


@dataclass(frozen=True)
class ResolvedTier:
    after_seconds: int
    user_ids: frozenset[int]
    channel_config_id: int | None = None
    channel: str | None = None


@dataclass(frozen=True)
class ResolvedPolicy:
    allow_initiator: bool = False
    allow_agent_owner: bool = True
    allow_org_approvers: bool = True
    named_user_ids: frozenset[int] = field(default_factory=frozenset)
    allow_self_approval: bool = False
    timeout_seconds: int = 600
    inline_wait_seconds: int = 20
    channel_config_id: int | None = None
    approvals_required: int = 1
    any_rejection_rejects: bool = True
    allow_edit_on_approve: bool = False
    first_tier_may_decide_after_escalation: bool = True
    tiers: tuple[ResolvedTier, ...] = ()

    @classmethod
    def from_row(cls, row: ApproverPolicy) -> ResolvedPolicy:
        return cls(
            allow_initiator=row.allow_initiator,
            allow_agent_owner=row.allow_agent_owner,
            allow_org_approvers=row.allow_org_approvers,
            named_user_ids=frozenset(row.named_users.values_list("pk", flat=True)),
            allow_self_approval=row.allow_self_approval,
            timeout_seconds=row.timeout_seconds,
            inline_wait_seconds=row.inline_wait_seconds,
            channel_config_id=row.channel_config_id,
            approvals_required=row.approvals_required,
            any_rejection_rejects=row.any_rejection_rejects,
            allow_edit_on_approve=row.allow_edit_on_approve,
            first_tier_may_decide_after_escalation=row.first_tier_may_decide_after_escalation,
            tiers=tuple(
                ResolvedTier(
                    after_seconds=tier.after_seconds,
                    user_ids=frozenset(u.pk for u in tier.named_users.all()),
                    channel_config_id=tier.channel_config_id,
                    channel=tier.channel_config.kind if tier.channel_config_id else None,
                )
                for tier in row.tiers.select_related("channel_config").prefetch_related("named_users")
            ),
        )


def _policy_row(agent: Agent, rows: QuerySet[ApproverPolicy]) -> ApproverPolicy | None:
    """The agent's own policy among ``rows``, else its organisation's default (one query)."""
    found = {
        p.agent_id: p
        for p in rows.filter(
            Q(agent_id=agent.pk) | Q(organization_id=agent.organization_id, agent__isnull=True)
        )
    }
    return found.get(agent.pk) or found.get(None)


def policy_for(*, agent: Agent) -> ResolvedPolicy:
    """The agent's own policy, else its organisation's default, else the built-in defaults."""
    row = _policy_row(agent, ApproverPolicy.objects.all())
    return ResolvedPolicy.from_row(row) if row is not None else ResolvedPolicy()


def approver_ids(*, policy: ResolvedPolicy, agent: Agent, requester_id: int) -> set[int]:
    """Who may decide a request of ``requester_id`` on ``agent`` under ``policy``: the snapshot
    taken at opening, and the set a decider is checked against again at decision time. Whoever
    configures the agent is left out unless an approver, and always on their own call
    (:func:`conflicted_ids`)."""
    ids: set[int] = set(policy.named_user_ids)
    if policy.allow_agent_owner:
        ids.add(agent.owner_id)
    if policy.allow_initiator:
        ids.add(requester_id)
    if policy.allow_org_approvers:
        ids |= set(
            Membership.objects.filter(
                organization_id=agent.organization_id, role__in=APPROVER_ROLES
            ).values_list("user_id", flat=True)
        )
    # Only active members of the organisation may decide, whatever the policy names (the agent's
    # owner included: owning an agent of an organisation one has left grants nothing).
    ids &= set(
        Membership.objects.filter(
            organization_id=agent.organization_id, user_id__in=ids, user__is_active=True
        ).values_list("user_id", flat=True)
    )
    if not policy.allow_self_approval:
        ids.discard(requester_id)
    return ids - conflicted_ids(agent=agent, requester_id=requester_id, user_ids=ids)


def eligible_ids(
    *,
    organization_id: int,
    user_ids: set[int],
    requester_id: int,
    allow_self: bool,
    agent: Agent | None = None,
) -> set[int]:
    """Those of ``user_ids`` who may decide at all: active members of the organisation, not the
    requester unless the policy allows self-approval, and, when ``agent`` is given, none that
    separation of duties bars from its requests (:func:`conflicted_ids`)."""
    ids = set(
        Membership.objects.filter(
            organization_id=organization_id, user_id__in=user_ids, user__is_active=True
        ).values_list("user_id", flat=True)
    )
    if not allow_self:
        ids.discard(requester_id)
    if agent is not None:
        ids -= conflicted_ids(agent=agent, requester_id=requester_id, user_ids=ids)
    return ids


def _configured(*, agent_id: int, organization_id: int, user: Any) -> list[Exists]:
    """Whether ``user`` (an id, or an ``OuterRef`` to one) is recorded by the configuration history
    as having changed the agent, its own hook declarations or its organisation's enforced ones,
    its approver policy or its organisation's default policy: three ``EXISTS`` on the history
    tables' indexed ``history_user_id``."""
    scope = Q(agent_id=agent_id) | Q(agent_id__isnull=True, organization_id=organization_id)
    return [
        Exists(Agent.history.model.objects.filter(id=agent_id, history_user_id=user)),
        Exists(HookDeclaration.history.model.objects.filter(scope, history_user_id=user)),
        Exists(ApproverPolicy.history.model.objects.filter(scope, history_user_id=user)),
    ]


def conflicted_ids(*, agent: Agent, requester_id: int, user_ids: set[int]) -> set[int]:
    """Those of ``user_ids`` whom separation of duties bars from deciding ``agent``'s requests
    (DESIGN §1.13), whatever the policy says, in one query.

    Its *configurers* are its owner and whoever the configuration history records as having
    changed the agent, its hooks (its own and its organisation's enforced ones) or its approver
    policy (its own and its organisation's default). A configurer decides only while an
    organisation admin has made them an approver (:data:`APPROVER_ROLES` in the agent's
    organisation), and never on a call they requested themselves."""
    if not user_ids:
        return set()
    configured = Q(pk=agent.owner_id)
    for exists in _configured(agent_id=agent.pk, organization_id=agent.organization_id, user=OuterRef("pk")):
        configured |= Q(exists)
    rows = (
        get_user_model()
        .objects.filter(configured, pk__in=user_ids)
        .annotate(
            approver=Exists(
                Membership.objects.filter(
                    user_id=OuterRef("pk"), organization_id=agent.organization_id, role__in=APPROVER_ROLES
                )
            )
        )
        .values_list("pk", "approver")
    )
    return {pk for pk, approver in rows if pk == requester_id or not approver}


def non_approvers(*, organization_id: int, users: Any) -> list[Any]:
    """Those of ``users`` who do not hold an approver or admin membership of the organisation:
    a policy may not name them (an operator cannot make themselves an approver)."""
    users = list(users)
    approvers = set(
        Membership.objects.filter(
            organization_id=organization_id, user_id__in=[u.pk for u in users], role__in=APPROVER_ROLES
        ).values_list("user_id", flat=True)
    )
    return [user for user in users if user.pk not in approvers]


def is_organisation_admin(*, user: Any, organization_id: int | None) -> bool:
    """Whether ``user`` may change the settings that belong to organisation admins
    (``allow_self_approval``, ``allow_initiator``): a superuser, or an admin of the organisation."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    if user.is_superuser:
        return True
    if organization_id is None:
        return False
    return Membership.objects.filter(
        user_id=user.pk, organization_id=organization_id, role=Role.ADMIN
    ).exists()


def tier_approver_ids(*, policy: ResolvedPolicy, agent: Agent, requester_id: int) -> set[int]:
    """Everyone the policy's escalation tiers would add (eligible ones only)."""
    named: set[int] = set()
    for tier in policy.tiers:
        named |= tier.user_ids
    if not named:
        return set()
    return eligible_ids(
        organization_id=agent.organization_id,
        user_ids=named,
        requester_id=requester_id,
        allow_self=policy.allow_self_approval,
        agent=agent,
    )


def is_outsider(*, request: Any, user: Any) -> bool:
    """Whether ``user`` has no business with ``request`` at all (DESIGN §1.11): not a superuser,
    not a member of its organisation, not its requester and not in its approver snapshot. Such a
    user is told the request does not exist, and nothing is written on it."""
    if user is None or not getattr(user, "is_authenticated", False) or user.is_superuser:
        return False
    if user.pk == request.requested_by_id:
        return False
    if Membership.objects.filter(user_id=user.pk, organization_id=request.organization_id).exists():
        return False
    return not request.approvers.filter(pk=user.pk).exists()


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
    agent_history, hook_history, policy_history = _configured(
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
        .values_list("tier", "member", "org_approver", "agent_changed", "hooks_changed", "policy_changed")
        .first()
    )
    if row is None:
        return Standing(tier=None, member=False, org_approver=False, policy=None)
    tier, member, org_approver, *changed = row
    configured = any(changed)
    policy = _policy_row(
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
            tier=tier, member=member, org_approver=org_approver, policy=None, configured=configured
        )
    return Standing(
        tier=tier,
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
    if not standing.member:
        return "no longer a member of the organisation"
    agent = request.agent
    is_requester = user.pk == request.requested_by_id
    # Separation of duties (DESIGN §1.13), whatever the policy says.
    if standing.configured or user.pk == agent.owner_id:
        if is_requester:
            return "whoever configures the agent may not decide their own call"
        if not standing.org_approver:
            return "whoever configures the agent decides only if an organisation admin made them an approver"
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
    if (
        request.escalation_level > 0
        and not request.first_tier_may_decide_after_escalation
        and not standing.tier
    ):
        return "the request was escalated: only the escalation tiers may decide it now"
    return None
