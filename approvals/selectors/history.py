"""The auditor's record: every request of the organisations a user audits, configures or
administers, and every tool call of their runs (executions, and calls a hook blocked), filtered.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import CharField, F, FloatField, Q, QuerySet, TextField, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Concat
from django.utils import timezone

from agents.events import TOOL_BLOCKED
from agents.models import RunEvent, ToolExecution
from approvals.models import ConfirmationApprover, ConfirmationRequest, ConfirmationVote
from approvals.selectors.access import audited_organization_ids, may_view_history, with_relations
from tenancy.models import Membership


@dataclass(frozen=True)
class HistoryFilters:
    """What the auditor narrows the record to; every field optional. ``approver`` matches a
    request whose approver snapshot held that person, that they voted on or decided; ``decider``
    one they voted on or decided (every voter of a quorum, not only the last); ``query`` searches
    the tool, the arguments, the ids and the names."""

    status: str | None = None
    organization_id: int | None = None
    agent_id: int | None = None
    requester_id: int | None = None
    approver_id: int | None = None
    decider_id: int | None = None
    channel: str | None = None
    since: dt.date | None = None
    until: dt.date | None = None
    hooks_bypassed: bool | None = None
    query: str = ""


def history_people(*, user: Any) -> QuerySet[Any]:
    """The people a history filter may name: members of the organisations ``user`` audits."""
    members = Membership.objects.filter(organization_id__in=audited_organization_ids(user=user)).values(
        "user_id"
    )
    return get_user_model().objects.filter(pk__in=members).order_by("username")


def _day_start(day: dt.date) -> dt.datetime:
    return timezone.make_aware(dt.datetime.combine(day, dt.time.min))


def _search(query: str) -> Q:
    words = Q(tool_name__icontains=query) | Q(tool_call_id__icontains=query) | Q(_args_text__icontains=query)
    for prefix in ("agent__name", "requested_by__username", "responded_by__username"):
        words |= Q(**{f"{prefix}__icontains": query})
    words |= Q(requested_by__first_name__icontains=query) | Q(requested_by__last_name__icontains=query)
    words |= Q(responded_by__first_name__icontains=query) | Q(responded_by__last_name__icontains=query)
    with contextlib.suppress(ValueError):
        words |= Q(pk=uuid.UUID(query))
    if query.isdigit() and len(query) < 18:
        words |= Q(run_id=int(query))
    return words


def history_for(*, user: Any, filters: HistoryFilters | None = None) -> QuerySet[ConfirmationRequest]:
    """Every request of the organisations ``user`` audits or administers (all of them for a
    superuser) matching ``filters``, newest first. Empty for anyone else."""
    if not may_view_history(user=user):
        return ConfirmationRequest.objects.none()
    f = filters or HistoryFilters()
    requests = ConfirmationRequest.objects.filter(organization_id__in=audited_organization_ids(user=user))
    exact = {
        "status": f.status,
        "organization_id": f.organization_id,
        "agent_id": f.agent_id,
        "requested_by_id": f.requester_id,
        "channel": f.channel,
        "run__hooks_bypassed": f.hooks_bypassed,
    }
    requests = requests.filter(**{field: value for field, value in exact.items() if value not in (None, "")})
    if f.decider_id is not None:  # whoever voted on it, not only the vote that settled it
        voted = ConfirmationVote.objects.filter(user_id=f.decider_id).values("request_id")
        requests = requests.filter(Q(pk__in=voted) | Q(responded_by_id=f.decider_id))
    if f.approver_id is not None:
        snapshot = ConfirmationApprover.objects.filter(user_id=f.approver_id).values("request_id")
        voted = ConfirmationVote.objects.filter(user_id=f.approver_id).values("request_id")
        requests = requests.filter(Q(pk__in=snapshot) | Q(pk__in=voted) | Q(responded_by_id=f.approver_id))
    if f.since is not None:
        requests = requests.filter(created_at__gte=_day_start(f.since))
    if f.until is not None:
        requests = requests.filter(created_at__lt=_day_start(f.until + dt.timedelta(days=1)))
    if f.query:
        requests = requests.annotate(_args_text=Cast("tool_args", TextField())).filter(_search(f.query))
    return with_relations(requests).order_by("-created_at", "-pk")


def history_channels(*, user: Any) -> list[str]:
    """The channels the requests of ``user``'s audited organisations went to."""
    return sorted(
        set(
            ConfirmationRequest.objects.filter(organization_id__in=audited_organization_ids(user=user))
            .values_list("channel", flat=True)
            .distinct()
        )
    )


TOOL_CALL_STATUSES = ("succeeded", "failed", "unknown", "started", "blocked")

TOOL_CALL_COLUMNS = (
    "at",
    "tool",
    "state",
    "run_ref",
    "call_id",
    "agent_name",
    "organization_name",
    "requester",
    "took_ms",
    "detail",
    "bypassed",
)
"""The columns of one tool-call line (:func:`tool_calls_for`), in this order."""


def _tool_call_scope(queryset: QuerySet[Any], f: HistoryFilters, at: str, user: Any) -> QuerySet[Any]:
    queryset = queryset.filter(run__agent__organization_id__in=audited_organization_ids(user=user))
    exact = {
        "run__agent__organization_id": f.organization_id,
        "run__agent_id": f.agent_id,
        "run__user_id": f.requester_id,
        "run__hooks_bypassed": f.hooks_bypassed,
    }
    queryset = queryset.filter(**{k: v for k, v in exact.items() if v is not None})
    if f.since is not None:
        queryset = queryset.filter(**{f"{at}__gte": _day_start(f.since)})
    if f.until is not None:
        queryset = queryset.filter(**{f"{at}__lt": _day_start(f.until + dt.timedelta(days=1))})
    return queryset


def _tool_call_search(query: str) -> Q:
    words = (
        Q(tool__icontains=query)
        | Q(call_id__icontains=query)
        | Q(_text__icontains=query)
        | Q(agent_name__icontains=query)
        | Q(requester__icontains=query)
    )
    if query.isdigit() and len(query) < 18:
        words |= Q(run_ref=int(query))
    return words


def tool_calls_for(*, user: Any, filters: HistoryFilters | None = None) -> QuerySet[Any]:
    """The tool calls of the organisations ``user`` audits, newest first, as rows of
    :data:`TOOL_CALL_COLUMNS`: every execution (``ToolExecution``) and every call a hook blocked
    (``tool.blocked`` run events), matching ``filters`` (``status`` is an execution status or
    ``"blocked"``; ``query`` searches tools, call ids, arguments, agents and people)."""
    if not may_view_history(user=user):
        return ToolExecution.objects.none().values("pk")
    f = filters or HistoryFilters()
    executions = _tool_call_scope(ToolExecution.objects.all(), f, "started_at", user)
    blocked = _tool_call_scope(RunEvent.objects.filter(type=TOOL_BLOCKED), f, "created_at", user)
    if f.status == "blocked":
        executions = executions.none()
    elif f.status:
        executions, blocked = executions.filter(status=f.status), blocked.none()
    text = TextField()
    common = {
        "agent_name": F("run__agent__name"),
        "organization_name": F("run__agent__organization__name"),
        "requester": F("run__user__username"),
    }
    # Both sides annotate the same names in the same order: the union lines their columns up.
    executions = executions.annotate(_text=Cast("args", text)).annotate(
        at=F("started_at"),
        tool=F("tool_name"),
        state=F("status"),
        run_ref=F("run_id"),
        call_id=F("tool_call_id"),
        **common,
        took_ms=F("duration_ms"),
        detail=Value("", output_field=text),
        bypassed=F("run__hooks_bypassed"),
    )
    blocked = blocked.annotate(_text=Cast("payload", text)).annotate(
        at=F("created_at"),
        tool=KT("payload__tool"),
        state=Value("blocked", output_field=CharField()),
        run_ref=F("run_id"),
        call_id=KT("payload__tool_call_id"),
        **common,
        took_ms=Value(None, output_field=FloatField()),
        detail=Concat(KT("payload__blocked_by"), Value(": "), KT("payload__error"), output_field=text),
        bypassed=F("run__hooks_bypassed"),
    )
    if f.query:
        executions = executions.filter(_tool_call_search(f.query))
        blocked = blocked.filter(_tool_call_search(f.query))
    # Each side unordered (a compound statement orders only as a whole).
    rows = executions.order_by().values(*TOOL_CALL_COLUMNS)
    return rows.union(blocked.order_by().values(*TOOL_CALL_COLUMNS), all=True).order_by("-at", "-run_ref")
