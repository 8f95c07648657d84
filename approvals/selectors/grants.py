"""Standing approvals as pages show them: what an approver may grant with an approval (the
request's policy's rules, with suggested conditions), and the grants in force."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from approvals.models import ApproverPolicy, ConfirmationRequest, StandingGrant


@dataclass(frozen=True)
class GrantOffer:
    """What an approval of one request may also grant: the scopes (``conversation``, and
    ``agent`` where the policy allows it), at most ``max_hours`` or until revoked, and conditions
    to start from (each argument as it is: numbers "up to", the rest "equal to")."""

    scopes: tuple[str, ...]
    max_hours: int
    until_revoked: bool
    suggested: str


def suggested_conditions(args: Any) -> list[dict[str, Any]]:
    """Conditions that cover exactly this call and, for amounts, smaller ones."""
    rows: list[dict[str, Any]] = []
    if not isinstance(args, dict):
        return rows
    for key, value in args.items():
        if isinstance(value, bool) or value is None or isinstance(value, dict | list):
            continue
        if isinstance(value, int | float | Decimal):
            rows.append({"field": key, "op": "<=", "value": value})
        else:
            rows.append({"field": key, "op": "==", "value": value})
    return rows


def grant_offers(requests: list[ConfirmationRequest]) -> dict[str, GrantOffer]:
    """For the requests whose approval may also grant a standing approval, what it may grant, by
    request id (as text, for templates): one query for the policies of their agents."""
    single = [r for r in requests if r.approvals_required == 1 and not r.stage_plan]
    if not single:
        return {}
    policies = ApproverPolicy.objects.filter(
        Q(agent_id__in={r.agent_id for r in single})
        | Q(organization_id__in={r.organization_id for r in single}, agent__isnull=True)
    )
    own = {p.agent_id: p for p in policies if p.agent_id is not None}
    default = {p.organization_id: p for p in policies if p.agent_id is None}
    offers: dict[str, GrantOffer] = {}
    for request in single:
        policy = own.get(request.agent_id) or default.get(request.organization_id)
        if (
            policy is None
            or policy.standing_grants == ApproverPolicy.Grants.OFF
            or policy.approvals_required > 1
        ):
            continue
        scopes = (
            ("conversation", "agent")
            if policy.standing_grants == ApproverPolicy.Grants.AGENT
            else ("conversation",)
        )
        offers[str(request.pk)] = GrantOffer(
            scopes=scopes,
            max_hours=policy.grant_max_hours,
            until_revoked=policy.grants_until_revoked,
            suggested=json.dumps(suggested_conditions(request.tool_args), ensure_ascii=False, default=str),
        )
    return offers


def grants_in_force(*, organization_ids: Any) -> QuerySet[StandingGrant]:
    """The standing approvals of these organisations that still approve calls, newest first."""
    now = timezone.now()
    return (
        StandingGrant.objects.filter(organization_id__in=organization_ids, revoked_at__isnull=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .select_related("agent", "granted_by", "conversation", "source_request")
    )
