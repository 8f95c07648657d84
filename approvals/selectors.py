"""Reads of confirmation requests."""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import CharField, Count, F, FloatField, Q, QuerySet, TextField, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Concat
from django.utils import timezone

from agents.events import TOOL_BLOCKED
from agents.models import Membership, Organization, Role, Run, RunEvent, ToolExecution
from approvals.models import (
    ConfirmationApprover,
    ConfirmationEvent,
    ConfirmationRequest,
    ConfirmationStatus,
    ConfirmationVote,
)
from approvals.policy import APPROVER_ROLES, describe_refusal
from approvals.presentation import moment_text

_NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def _count_words(n: int) -> str:
    return _NUMBER_WORDS.get(n, str(n))


@dataclass(frozen=True)
class Tally:
    """The votes on a request against its quorum (the snapshot taken at opening).

    ``eligible`` is the size of the approver snapshot: with ``any_rejection_rejects`` off, a
    request is rejected once so many have rejected that the others can no longer reach
    ``required``."""

    approvals: int
    rejections: int
    required: int
    eligible: int
    any_rejection_rejects: bool = True

    @property
    def outcome(self) -> str | None:
        """``approved``, ``rejected``, or ``None`` while the request must wait for more votes."""
        if self.rejections and self.any_rejection_rejects:
            return ConfirmationStatus.REJECTED
        if self.approvals >= self.required:
            return ConfirmationStatus.APPROVED
        undecided = max(self.eligible - self.approvals - self.rejections, 0)
        if self.approvals + undecided < self.required:
            return ConfirmationStatus.REJECTED
        return None

    @property
    def is_quorum(self) -> bool:
        """Whether the request needs more than one approval (cards show a tally only then)."""
        return self.required > 1

    @property
    def count_text(self) -> str:
        """E.g. "1 of 2 approvals", "1 of 3 approvals, 1 rejection"."""
        noun = "approval" if self.required == 1 else "approvals"
        line = f"{self.approvals} of {self.required} {noun}"
        if self.rejections:
            line += f", {self.rejections} rejection" + ("s" if self.rejections > 1 else "")
        return line

    @property
    def waiting_text(self) -> str:
        """E.g. "waiting for one more"; empty once the votes settle the request."""
        missing = self.required - self.approvals
        return f"waiting for {_count_words(missing)} more" if self.outcome is None and missing > 0 else ""

    @property
    def text(self) -> str:
        """E.g. "1 of 2 approvals — waiting for one more"."""
        return self.count_text + (f" — {self.waiting_text}" if self.waiting_text else "")

    def text_with(self, votes: list[VoteLine]) -> str:
        """The tally with who voted, e.g. "1 of 2 approvals: april approved 10:02 UTC — waiting for
        one more" (a vote's reason in quotes after it)."""
        if not votes:
            return self.text
        said = ", ".join(vote.text + (f" (“{vote.reason}”)" if vote.reason else "") for vote in votes)
        return f"{self.count_text}: {said}" + (f" — {self.waiting_text}" if self.waiting_text else "")


def tally_of(*, request: ConfirmationRequest) -> Tally:
    """Count the votes on ``request`` (two indexed queries)."""
    votes = dict(
        ConfirmationVote.objects.filter(request_id=request.pk)
        .values("approve")
        .annotate(n=Count("pk"))
        .values_list("approve", "n")
    )
    return Tally(
        approvals=votes.get(True, 0),
        rejections=votes.get(False, 0),
        required=request.approvals_required,
        eligible=ConfirmationApprover.objects.filter(request_id=request.pk).count(),
        any_rejection_rejects=request.any_rejection_rejects,
    )


@dataclass(frozen=True)
class VoteLine:
    """One vote as pages, cards and run events show it: who, which way, when, why."""

    by: str
    approve: bool
    at: dt.datetime
    reason: str = ""

    @property
    def verb(self) -> str:
        return "approved" if self.approve else "rejected"

    @property
    def text(self) -> str:
        """E.g. "april approved 10:02 UTC"."""
        return f"{self.by} {self.verb} {moment_text(self.at)}"

    def as_payload(self) -> dict[str, Any]:
        """``{"by", "approve", "at", "reason"}`` for run events (``approval.voted``, ``approval.decided``)."""
        return {"by": self.by, "approve": self.approve, "at": self.at.isoformat(), "reason": self.reason}


def votes_by_request(*, request_ids: list[Any]) -> dict[Any, list[VoteLine]]:
    """The votes on each of ``request_ids``, oldest first, with their voters' names (one query)."""
    votes: dict[Any, list[VoteLine]] = {}
    rows = (
        ConfirmationVote.objects.filter(request_id__in=request_ids)
        .select_related("user")
        .order_by("created_at", "pk")
    )
    for vote in rows:
        votes.setdefault(vote.request_id, []).append(
            VoteLine(by=display_name(vote.user), approve=vote.approve, at=vote.created_at, reason=vote.reason)
        )
    return votes


def votes_of(*, request: ConfirmationRequest) -> list[VoteLine]:
    """The votes on ``request``, oldest first."""
    return votes_by_request(request_ids=[request.pk]).get(request.pk, [])


def vote_summary(*, request: ConfirmationRequest) -> dict[str, Any]:
    """The votes of ``request`` as a run event carries them: ``{"votes": [{"by", "approve", "at",
    "reason"}], "approvals": <approving votes>, "approvals_required"}``."""
    votes = votes_of(request=request)
    return {
        "votes": [vote.as_payload() for vote in votes],
        "approvals": sum(1 for vote in votes if vote.approve),
        "approvals_required": request.approvals_required,
    }


def may_edit_arguments(*, request: ConfirmationRequest) -> bool:
    """Whether an approver may still change ``request``'s arguments: its policy allows it, it is
    pending, and nobody has voted on the arguments yet."""
    return (
        request.allow_edit_on_approve
        and request.is_pending
        and not ConfirmationVote.objects.filter(request_id=request.pk).exists()
    )


def has_voted(*, request: ConfirmationRequest, user: Any) -> bool:
    return ConfirmationVote.objects.filter(request_id=request.pk, user_id=user.pk).exists()


def request_status(*, request_id: uuid.UUID) -> str:
    return ConfirmationRequest.objects.filter(pk=request_id).values_list("status", flat=True).get()


def request_for_call(*, run_id: int, tool_call_id: str) -> ConfirmationRequest | None:
    return (
        ConfirmationRequest.objects.select_related("responded_by")
        .filter(run_id=run_id, tool_call_id=tool_call_id)
        .first()
    )


def request_for_decision(*, request_id: uuid.UUID) -> ConfirmationRequest | None:
    """The request with the related rows every decider shows next (cards, pages). The agent's
    configuration and secrets are not loaded: a click needs its name, and no secret of it."""
    return (
        ConfirmationRequest.objects.select_related("agent", "requested_by", "responded_by")
        .defer("agent__model_config_json", "agent__secrets", "agent__instructions", "agent__builtin_tools")
        .filter(pk=request_id)
        .first()
    )


def inbox_for(*, user: Any) -> QuerySet[ConfirmationRequest]:
    """Pending, unexpired requests ``user`` is an approver of and has not voted on yet, in
    organisations they still belong to, soonest deadline first (a change of policy since opening
    is checked when they decide)."""
    return (
        ConfirmationRequest.objects.filter(
            approvers=user,
            status=ConfirmationStatus.PENDING,
            expires_at__gt=timezone.now(),
            organization_id__in=Membership.objects.filter(user=user).values("organization_id"),
        )
        .exclude(pk__in=ConfirmationVote.objects.filter(user_id=user.pk).values("request_id"))
        .select_related("agent", "requested_by", "run", "run__conversation")
        .order_by("expires_at")
    )


def display_name(user: Any) -> str:
    if user is None:
        return "nobody"
    full = user.get_full_name() if hasattr(user, "get_full_name") else ""
    return full or user.get_username()


# --- who may see what (web inbox, history, decision API) -----------------------------------------

AUDIT_ROLES = (Role.AUDITOR, Role.OPERATOR, Role.ADMIN)
"""Roles that may read every confirmation request of their organisation (operators read the
approval record as they read runs in the admin: ``agents.roles``; they still decide nothing)."""


def _audited_organization_ids(*, user: Any) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user, role__in=AUDIT_ROLES).values("organization_id")


def _with_relations(queryset: QuerySet[ConfirmationRequest]) -> QuerySet[ConfirmationRequest]:
    return queryset.select_related(
        "organization", "agent", "requested_by", "responded_by", "run", "run__conversation"
    )


def requests_visible_to(*, user: Any) -> QuerySet[ConfirmationRequest]:
    """Requests ``user`` may read: those they may decide or asked for, every request of the
    organisations they audit or administer, and everything for a superuser."""
    if not getattr(user, "is_authenticated", False):
        return ConfirmationRequest.objects.none()
    requests = ConfirmationRequest.objects.all()
    if not user.is_superuser:
        # A subquery on the approvers table rather than a join: a join would repeat a request
        # once per matching approver row and need DISTINCT.
        decidable = ConfirmationApprover.objects.filter(user_id=user.pk).values("request_id")
        requests = requests.filter(
            Q(pk__in=decidable)
            | Q(requested_by_id=user.pk)
            | Q(organization_id__in=_audited_organization_ids(user=user))
        )
    return _with_relations(requests)


def request_get(*, request_id: uuid.UUID, user: Any) -> ConfirmationRequest | None:
    """Request ``request_id`` if ``user`` may read it (:func:`requests_visible_to`), else ``None``
    — an unknown id and a hidden one look the same to the caller."""
    return requests_visible_to(user=user).filter(pk=request_id).first()


def request_events(*, request: ConfirmationRequest) -> QuerySet[ConfirmationEvent]:
    """The append-only log of ``request``, oldest first."""
    return (
        ConfirmationEvent.objects.filter(request=request).select_related("actor").order_by("created_at", "pk")
    )


def may_decide(*, request: ConfirmationRequest, user: Any) -> bool:
    """Whether ``user`` could decide ``request`` right now (the service decides for real: this only
    chooses whether a page offers the buttons)."""
    return (
        request.is_pending
        and request.expires_at > timezone.now()
        and describe_refusal(request=request, user=user) is None
        and not has_voted(request=request, user=user)
    )


def may_view_history(*, user: Any) -> bool:
    """Whether ``user`` may read the approval history: superusers, and the auditors, operators
    and admins of an organisation."""
    if not getattr(user, "is_authenticated", False):
        return False
    return bool(user.is_superuser) or _audited_organization_ids(user=user).exists()


def may_use_inbox(*, user: Any) -> bool:
    """Whether the inbox is of use to ``user``: a superuser, an approver or admin of an
    organisation, or anyone something waits for."""
    if not getattr(user, "is_authenticated", False):
        return False
    return bool(
        user.is_superuser
        or Membership.objects.filter(user=user, role__in=APPROVER_ROLES).exists()
        or inbox_for(user=user).exists()
    )


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


def audited_organization_ids(*, user: Any) -> QuerySet[Any]:
    """The organisations whose record ``user`` may read (every one for a superuser)."""
    if user.is_superuser:
        return Organization.objects.values("pk")
    return _audited_organization_ids(user=user)


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
    return _with_relations(requests).order_by("-created_at", "-pk")


def history_channels(*, user: Any) -> list[str]:
    """The channels the requests of ``user``'s audited organisations went to."""
    return sorted(
        set(
            ConfirmationRequest.objects.filter(organization_id__in=audited_organization_ids(user=user))
            .values_list("channel", flat=True)
            .distinct()
        )
    )


# --- tool calls (executions, and calls a hook blocked) ---------------------------------------------

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


# --- who may read the run behind a request ------------------------------------------------------


def runs_visible_to(*, user: Any) -> QuerySet[Run]:
    """Runs whose transcript ``user`` may read: their own, and the run behind every request they
    may read (:func:`requests_visible_to`: its approvers, its requester, the auditors and admins
    of its organisation) — for anyone but a superuser, only while they still belong to that
    organisation: someone who left keeps no window on the agent's work, their own runs included.
    The one rule for the transcript page and the run stream alike (a stream checks it again when
    its watcher's memberships change, :mod:`agents.access`)."""
    if not getattr(user, "is_authenticated", False):
        return Run.objects.none()
    if user.is_superuser:
        return Run.objects.all()
    organizations = Membership.objects.filter(user=user).values("organization_id")
    behind_requests = requests_visible_to(user=user).filter(organization_id__in=organizations)
    return Run.objects.filter(
        Q(user_id=user.pk, agent__organization_id__in=organizations)
        | Q(pk__in=behind_requests.values("run_id"))
    )


def run_visible_to(*, run_id: int, user: Any) -> bool:
    """Whether ``user`` may read run ``run_id`` (:func:`runs_visible_to`)."""
    return runs_visible_to(user=user).filter(pk=run_id).exists()


def run_for_transcript(*, run_id: int, user: Any) -> Run | None:
    """Run ``run_id`` with its agent, organisation and owner if ``user`` may read it, else ``None``
    — an unknown id and a hidden one look the same."""
    return (
        runs_visible_to(user=user)
        .select_related("agent", "agent__organization", "user", "conversation")
        .filter(pk=run_id)
        .first()
    )


def requests_of_run(*, run: Run, user: Any) -> QuerySet[ConfirmationRequest]:
    """The requests of ``run`` that ``user`` may read, oldest first (the transcript links them)."""
    return requests_visible_to(user=user).filter(run=run).order_by("created_at", "pk")
