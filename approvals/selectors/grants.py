"""Standing approvals as pages show them: what an approver may grant with an approval (the
request's policy's rules, with suggested conditions), and the grants in force."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.safestring import SafeString

from approvals.condition_rows import ConditionRowsWidget, fields_of_call, rows_in_words, suggested_rows
from approvals.models import ApproverPolicy, ConfirmationRequest, StandingGrant
from approvals.presentation import call_currency, title_of


@dataclass(frozen=True)
class GrantOffer:
    """What an approval of one request may also grant: the scopes (``conversation``, and
    ``agent`` where the policy allows it), at most ``max_hours`` or until revoked, and its
    conditions as rows to edit (``editor``: the call's arguments to pick from, starting from
    :func:`approvals.condition_rows.suggested_rows`), said in words (``where``)."""

    scopes: tuple[str, ...]
    max_hours: int
    until_revoked: bool
    editor: SafeString
    where: str
    title: str


def _grant_editor(request: ConfirmationRequest) -> tuple[SafeString, str]:
    """The conditions' rows for a standing approval asked with ``request``'s approval, and what
    they say ("where Amount is at most 4,800.00 USD"; "whatever their arguments")."""
    context = request.context if isinstance(request.context, list) else []
    labels = {
        str(item["argument"]): str(item.get("label", ""))
        for item in context
        if isinstance(item, dict) and item.get("argument")
    }
    fields = fields_of_call(request.tool_args, labels)
    currency = call_currency(request.tool_args, context)
    rows = suggested_rows(request.tool_args)
    widget = ConditionRowsWidget(fields=fields, preview=False, currency=currency)
    said = rows_in_words(rows, fields=fields, currency=currency)
    return widget.render("grant_conditions", rows), f"where {said}" if said else "whatever their arguments"


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
        editor, where = _grant_editor(request)
        offers[str(request.pk)] = GrantOffer(
            scopes=scopes,
            max_hours=policy.grant_max_hours,
            until_revoked=policy.grants_until_revoked,
            editor=editor,
            where=where,
            title=request.tool_title or title_of(request.tool_name),
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
