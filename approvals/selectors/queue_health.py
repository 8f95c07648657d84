"""The approval queue's health, for the auditors and admins of an organisation: how long decisions
take (p50 / p90 by agent, by tool, by approver and by stage), what waits and for how long, how many requests
expire unanswered, and how the load falls on the approvers.

Every figure is read from the record (requests, their approver snapshots and votes) of the
organisations the reader audits (:func:`~approvals.selectors.access.audited_organization_ids`),
over a period of days (``since``/``until``, inclusive; the last :data:`DEFAULT_DAYS` days by
default), except what waits now (pending requests, whatever their age).

Percentiles are nearest-rank: the p90 of 10 decisions is the 9th fastest, a time that some
decision really took. A request's time to decision runs from its creation to its verdict; an
approver's, from the request's creation to that approver's own vote (so an approver is measured on
every request they voted on, not only those their vote settled).
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import F, QuerySet
from django.utils import timezone

from approvals.models import (
    ConfirmationApprover,
    ConfirmationEvent,
    ConfirmationRequest,
    ConfirmationStatus,
    ConfirmationVote,
)
from approvals.selectors.access import audited_organization_ids
from approvals.selectors.requests import display_name

User = get_user_model()

DEFAULT_DAYS = 30
"""The period the page shows when none is asked for."""

AGE_BUCKETS: tuple[tuple[str, float], ...] = (
    ("under 5 min", 5 * 60),
    ("5 to 30 min", 30 * 60),
    ("30 min to 2 h", 2 * 3600),
    ("2 to 24 h", 24 * 3600),
    ("over a day", math.inf),
)
"""Pending requests by how long they have waited: ``(label, upper bound in seconds)``."""

DECIDED = (ConfirmationStatus.APPROVED, ConfirmationStatus.REJECTED)
SETTLED = (*DECIDED, ConfirmationStatus.EXPIRED, ConfirmationStatus.CANCELLED)


def age_bucket(seconds: float) -> int:
    """The index in :data:`AGE_BUCKETS` of a request that has waited ``seconds``."""
    return next(i for i, (_label, upper) in enumerate(AGE_BUCKETS) if seconds < upper)


def pending_by_age(created: list[dt.datetime], *, now: dt.datetime) -> list[tuple[str, int]]:
    """How many of the requests opened at ``created`` have waited how long, per bucket."""
    counts = [0] * len(AGE_BUCKETS)
    for moment in created:
        counts[age_bucket((now - moment).total_seconds())] += 1
    return [(label, n) for (label, _upper), n in zip(AGE_BUCKETS, counts, strict=True)]


def waiting_for_votes(pending: QuerySet[ConfirmationRequest]) -> dict[tuple[int, int], int]:
    """Per (organisation, person) ids: the requests of ``pending`` they were asked to decide and
    have not voted on."""
    voted = set(ConfirmationVote.objects.filter(request__in=pending).values_list("request_id", "user_id"))
    waiting: dict[tuple[int, int], int] = defaultdict(int)
    # A staged request waits for the people of its current stage only.
    asked = ConfirmationApprover.objects.filter(
        request__in=pending, stage=F("request__stage_index"), withdrawn_at__isnull=True
    )
    for org, request_id, person in asked.values_list("request__organization_id", "request_id", "user_id"):
        if (request_id, person) not in voted:
            waiting[(org, person)] += 1
    return dict(waiting)


def percentile(sorted_values: list[float], q: float) -> float | None:
    """The nearest-rank ``q`` percentile (0 < q <= 1) of ``sorted_values``; ``None`` if empty."""
    if not sorted_values:
        return None
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


@dataclass(frozen=True)
class Timing:
    """How long the decisions of one group took, in seconds."""

    label: str
    count: int
    p50: float | None
    p90: float | None

    @classmethod
    def of(cls, label: str, seconds: Iterable[float]) -> Timing:
        ordered = sorted(seconds)
        return cls(label, len(ordered), percentile(ordered, 0.5), percentile(ordered, 0.9))


@dataclass(frozen=True)
class Expiry:
    """Of the requests of one agent created in the period and since settled, how many expired."""

    label: str
    settled: int
    expired: int

    @property
    def rate(self) -> float | None:
        return self.expired / self.settled if self.settled else None


@dataclass(frozen=True)
class ApproverLoad:
    """One person's share of the queue: what waits for their vote now, and what they decided in
    the period and how fast."""

    label: str
    waiting: int
    votes: int
    p50: float | None
    p90: float | None


@dataclass(frozen=True)
class QueueHealth:
    since: dt.date
    until: dt.date
    now: dt.datetime
    overall: Timing
    by_agent: list[Timing]
    by_tool: list[Timing]
    by_approver: list[Timing]
    #: a staged request's stages, by name: from a stage's opening to its end (the next stage's
    #: opening, or the verdict), of the requests decided in the period
    by_stage: list[Timing]
    pending_by_age: list[tuple[str, int]]
    expiry: list[Expiry]
    expiry_overall: Expiry
    approvers: list[ApproverLoad]

    @property
    def pending(self) -> int:
        return sum(count for _label, count in self.pending_by_age)


def default_period(now: dt.datetime | None = None) -> tuple[dt.date, dt.date]:
    """The last :data:`DEFAULT_DAYS` days, today included (in the server's time zone)."""
    today = timezone.localdate(now or timezone.now())
    return today - dt.timedelta(days=DEFAULT_DAYS - 1), today


def _bounds(since: dt.date, until: dt.date) -> tuple[dt.datetime, dt.datetime]:
    zone = timezone.get_current_timezone()
    start = dt.datetime.combine(since, dt.time.min, tzinfo=zone)
    end = dt.datetime.combine(until + dt.timedelta(days=1), dt.time.min, tzinfo=zone)
    return start, end


def _requests(*, user: Any, organization_id: int | None) -> QuerySet[ConfirmationRequest]:
    requests = ConfirmationRequest.objects.filter(organization_id__in=audited_organization_ids(user=user))
    if organization_id is not None:
        requests = requests.filter(organization_id=organization_id)
    return requests


def queue_health(
    *,
    user: Any,
    since: dt.date | None = None,
    until: dt.date | None = None,
    organization_id: int | None = None,
    now: dt.datetime | None = None,
) -> QueueHealth:
    """The queue's health as ``user`` may read it (module docstring). An organisation they do not
    audit reads as an empty queue."""
    now = now or timezone.now()
    default_since, default_until = default_period(now)
    since, until = since or default_since, until or default_until
    start, end = _bounds(since, until)
    requests = _requests(user=user, organization_id=organization_id)

    # Decided by a person: a call a standing approval approved waited for nobody.
    decided = requests.filter(
        status__in=DECIDED, responded_at__gte=start, responded_at__lt=end, grant__isnull=True
    )
    rows = list(decided.values_list("agent__name", "tool_title", "tool_name", "created_at", "responded_at"))
    by_agent: dict[str, list[float]] = defaultdict(list)
    by_tool: dict[str, list[float]] = defaultdict(list)
    everything: list[float] = []
    for agent, title, tool, created, responded in rows:
        waited = max(0.0, (responded - created).total_seconds())
        everything.append(waited)
        by_agent[agent].append(waited)
        by_tool[title or tool].append(waited)

    by_stage = stage_times(decided.exclude(stage_plan=[]))

    votes = ConfirmationVote.objects.filter(request__in=requests, created_at__gte=start, created_at__lt=end)
    by_voter: dict[Any, list[float]] = defaultdict(list)
    for voter, voted, asked in votes.values_list("user_id", "created_at", "request__created_at"):
        by_voter[voter].append(max(0.0, (voted - asked).total_seconds()))

    pending = requests.filter(status=ConfirmationStatus.PENDING)
    by_age = pending_by_age(list(pending.values_list("created_at", flat=True)), now=now)

    settled = requests.filter(created_at__gte=start, created_at__lt=end, status__in=SETTLED)
    expiry_counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for agent, status in settled.values_list("agent__name", "status"):
        expiry_counts[agent][0] += 1
        expiry_counts[agent][1] += status == ConfirmationStatus.EXPIRED
    expiry = [Expiry(agent, n, expired) for agent, (n, expired) in sorted(expiry_counts.items())]
    overall_expiry = Expiry("all agents", sum(e.settled for e in expiry), sum(e.expired for e in expiry))

    waiting: dict[int, int] = defaultdict(int)
    for (_org, person), n in waiting_for_votes(pending).items():
        waiting[person] += n
    people = {u.pk: u for u in User.objects.filter(pk__in={*by_voter, *waiting})}
    approvers = sorted(
        (
            ApproverLoad(
                display_name(people[pk]),
                waiting.get(pk, 0),
                len(by_voter.get(pk, [])),
                *_p50_p90(by_voter.get(pk, [])),
            )
            for pk in people
        ),
        key=lambda load: (-load.waiting, -load.votes, load.label),
    )

    def timings(groups: dict[str, list[float]]) -> list[Timing]:
        return sorted((Timing.of(label, values) for label, values in groups.items()), key=lambda t: t.label)

    return QueueHealth(
        since=since,
        until=until,
        now=now,
        overall=Timing.of("all decisions", everything),
        by_agent=timings(by_agent),
        by_tool=timings(by_tool),
        by_approver=timings({display_name(people[pk]): values for pk, values in by_voter.items()}),
        by_stage=timings(by_stage),
        pending_by_age=by_age,
        expiry=expiry,
        expiry_overall=overall_expiry,
        approvers=approvers,
    )


def stage_times(staged: QuerySet[ConfirmationRequest]) -> dict[str, list[float]]:
    """How long each stage of the decided ``staged`` requests took, by the stage's name: from its
    opening (the request's creation, or its ``stage_opened`` event) to the next stage's opening or
    the verdict (two queries)."""
    rows = list(staged.values_list("pk", "stage_plan", "created_at", "responded_at"))
    opened: dict[Any, list[dt.datetime]] = defaultdict(list)
    events = ConfirmationEvent.objects.filter(
        request_id__in=[pk for pk, *_ in rows], kind=ConfirmationEvent.Kind.STAGE_OPENED
    ).order_by("created_at", "pk")
    for request_id, moment in events.values_list("request_id", "created_at"):
        opened[request_id].append(moment)
    times: dict[str, list[float]] = defaultdict(list)
    for pk, plan, created, responded in rows:
        starts = [created, *opened[pk]]
        ends = [*opened[pk], responded]
        for index, (began, ended) in enumerate(zip(starts, ends, strict=True)):
            name = (plan[index].get("name") if index < len(plan) else "") or f"stage {index + 1}"
            times[name].append(max(0.0, (ended - began).total_seconds()))
    return times


def _p50_p90(values: list[float]) -> tuple[float | None, float | None]:
    ordered = sorted(values)
    return percentile(ordered, 0.5), percentile(ordered, 0.9)
