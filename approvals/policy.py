"""Resolving an agent's approver policy and the set of people who may decide."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Exists, OuterRef, Q, QuerySet

from agents.models import Agent, HookDeclaration
from approvals.models import ApprovalStage, ApproverPolicy, EscalationTier
from hooks.conditions import Condition, conditions_of, judge
from tenancy.models import Membership, Role

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
class ResolvedStage:
    """A policy's stage as a request snapshots it (:class:`approvals.models.ApprovalStage`)."""

    name: str
    conditions: tuple[Condition, ...] = ()
    any_condition: bool = False
    user_ids: frozenset[int] = field(default_factory=frozenset)
    roles: frozenset[str] = field(default_factory=frozenset)
    requester_manager: bool = False
    approvals_required: int = 1
    timeout_seconds: int | None = None
    tiers: tuple[ResolvedTier, ...] = ()

    def applies(
        self, *, tool_name: str, agent_name: str, args: Any, schema: Mapping[str, Any] | None = None
    ) -> bool:
        """Whether this stage asks about a call: its conditions hold on the call's arguments,
        where ``@tool`` and ``@agent`` read the tool's and the agent's names; ``schema`` is the
        tool's parameters (:mod:`hooks.conditions`). No conditions: always. Conditions that
        cannot decide (a text where a number is compared) apply the stage: its people are asked
        (docs/design.md §1.16)."""
        if not self.conditions:
            return True
        facts = {**args, "@tool": tool_name, "@agent": agent_name} if isinstance(args, dict) else {}
        return not judge(self.conditions, facts, schema=schema, any_=self.any_condition).unmet

    @classmethod
    def from_row(cls, row: ApprovalStage) -> ResolvedStage:
        return cls(
            name=row.name,
            # Saved through the admin's form, which refuses rows that do not parse.
            conditions=conditions_of(row.conditions or []),
            any_condition=row.condition_mode == ApprovalStage.Mode.ANY,
            user_ids=frozenset(u.pk for u in row.named_users.all()),
            roles=frozenset(r for r in (row.roles or []) if r in APPROVER_ROLES),
            requester_manager=row.requester_manager,
            approvals_required=row.approvals_required,
            timeout_seconds=row.timeout_seconds,
            tiers=tuple(_tier(tier) for tier in row.tiers.all()),
        )


def _tier(tier: EscalationTier) -> ResolvedTier:
    return ResolvedTier(
        after_seconds=tier.after_seconds,
        user_ids=frozenset(u.pk for u in tier.named_users.all()),
        channel_config_id=tier.channel_config_id,
        channel=tier.channel_config.kind if tier.channel_config_id else None,
    )


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
    stages: tuple[ResolvedStage, ...] = ()
    standing_grants: str = "off"
    grant_max_hours: int = 8
    grants_until_revoked: bool = False

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
            standing_grants=row.standing_grants,
            grant_max_hours=row.grant_max_hours,
            grants_until_revoked=row.grants_until_revoked,
            tiers=tuple(
                _tier(tier)
                for tier in row.tiers.filter(stage__isnull=True)
                .select_related("channel_config")
                .prefetch_related("named_users")
            ),
            stages=tuple(
                ResolvedStage.from_row(stage)
                for stage in row.stages.prefetch_related(
                    "named_users", "tiers__named_users", "tiers__channel_config"
                )
            ),
        )


def policy_row(agent: Agent, rows: QuerySet[ApproverPolicy]) -> ApproverPolicy | None:
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
    row = policy_row(agent, ApproverPolicy.objects.all())
    return ResolvedPolicy.from_row(row) if row is not None else ResolvedPolicy()


def inline_wait_of(*, agent: Agent) -> int:
    """How long the agent's policy lets a run wait inline, in one query (what a re-entered call
    needs of the policy)."""
    row = policy_row(agent, ApproverPolicy.objects.only("agent_id", "inline_wait_seconds"))
    return row.inline_wait_seconds if row is not None else ResolvedPolicy().inline_wait_seconds


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


def configured_exists(*, agent_id: int, organization_id: int, user: Any) -> list[Exists]:
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
    (docs/design.md §1.13), whatever the policy says, in one query.

    Its *configurers* are its owner and whoever the configuration history records as having
    changed the agent, its hooks (its own and its organisation's enforced ones) or its approver
    policy (its own and its organisation's default). A configurer decides only while an
    organisation admin has made them an approver (:data:`APPROVER_ROLES` in the agent's
    organisation), and never on a call they requested themselves."""
    if not user_ids:
        return set()
    configured = Q(pk=agent.owner_id)
    for exists in configured_exists(
        agent_id=agent.pk, organization_id=agent.organization_id, user=OuterRef("pk")
    ):
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


def stages_for_call(
    *,
    policy: ResolvedPolicy,
    agent: Agent,
    tool_name: str,
    args: Any,
    schema: Mapping[str, Any] | None = None,
) -> list[ResolvedStage]:
    """The policy's stages that apply to this call, in order (none: the call has no stages);
    ``schema``: the tool's parameters, as :meth:`ResolvedStage.applies` reads them."""
    return [
        stage
        for stage in policy.stages
        if stage.applies(tool_name=tool_name, agent_name=agent.name, args=args, schema=schema)
    ]


def stage_approver_ids(
    *, stage: ResolvedStage, policy: ResolvedPolicy, agent: Agent, requester_id: int
) -> set[int]:
    """Who a stage asks about a call of ``requester_id``: the people it names, the members holding
    its roles and, if it says so, the requester's manager (the ``manager`` of any of their
    memberships of the organisation) — among them only approvers and admins of the organisation
    whom :func:`eligible_ids` lets decide (active members, not the requester unless the policy
    allows self-approval, none that separation of duties bars)."""
    org = agent.organization_id
    ids: set[int] = set(stage.user_ids)
    if stage.roles:
        ids |= set(
            Membership.objects.filter(organization_id=org, role__in=stage.roles).values_list(
                "user_id", flat=True
            )
        )
    if stage.requester_manager:
        ids |= set(
            Membership.objects.filter(organization_id=org, user_id=requester_id, manager__isnull=False)
            .values_list("manager_id", flat=True)
            .distinct()
        )
    ids &= set(
        Membership.objects.filter(organization_id=org, user_id__in=ids, role__in=APPROVER_ROLES).values_list(
            "user_id", flat=True
        )
    )
    return eligible_ids(
        organization_id=org,
        user_ids=ids,
        requester_id=requester_id,
        allow_self=policy.allow_self_approval,
        agent=agent,
    )


def is_outsider(*, request: Any, user: Any) -> bool:
    """Whether ``user`` has no business with ``request`` at all (docs/design.md §1.11): not a superuser,
    not a member of its organisation, not its requester and not in its approver snapshot. Such a
    user is told the request does not exist, and nothing is written on it."""
    if user is None or not getattr(user, "is_authenticated", False) or user.is_superuser:
        return False
    if user.pk == request.requested_by_id:
        return False
    if Membership.objects.filter(user_id=user.pk, organization_id=request.organization_id).exists():
        return False
    return not request.approvers.filter(pk=user.pk).exists()
