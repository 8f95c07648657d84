"""Reads of agents, runs and their events."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.db.models import Count, Model, QuerySet

from agents.history import PROTECTED_SAMPLE
from agents.models import Agent, Connector, Conversation, Run, RunEvent, ShadowDecision, ToolExecution
from tenancy.selectors import organization_ids_of


@database_sync_to_async
def run_visible_to(*, run_id: int, user: Any) -> bool:
    """Whether ``user`` may read run ``run_id`` (its own runs only, while a member of the agent's
    organisation: someone who left it keeps no window on its agents' work)."""
    return Run.objects.filter(
        pk=run_id, user=user, agent__organization_id__in=organization_ids_of(user=user)
    ).exists()


def agent_list(*, user: Any, include_archived: bool = False) -> QuerySet[Agent]:
    """The agents of the organisations ``user`` belongs to, by name: those that can run (neither
    the agent nor its organisation archived) unless ``include_archived``."""
    agents = Agent.objects.filter(organization_id__in=organization_ids_of(user=user))
    if not include_archived:
        agents = agents.filter(archived_at__isnull=True, organization__archived_at__isnull=True)
    return agents.select_related("organization").order_by("name", "pk")


def agent_get(*, agent_id: int, user: Any) -> Agent | None:
    """Agent ``agent_id`` if it belongs to one of ``user``'s organisations, else ``None``.
    Archived agents are returned too: their history stays readable, and starting a run on one is
    refused by the service with a message rather than a bare "not found"."""
    return agent_list(user=user, include_archived=True).filter(pk=agent_id).first()


def conversation_get(*, conversation_id: int, user: Any) -> Conversation | None:
    """Conversation ``conversation_id`` if it is ``user``'s and they still belong to its
    organisation, else ``None``."""
    return Conversation.objects.filter(
        pk=conversation_id, user=user, organization_id__in=organization_ids_of(user=user)
    ).first()


def run_get(*, run_id: int, user: Any) -> Run | None:
    """Run ``run_id`` if it is ``user``'s own and they still belong to its agent's organisation,
    else ``None`` (colleagues' runs included)."""
    return Run.objects.filter(
        pk=run_id, user=user, agent__organization_id__in=organization_ids_of(user=user)
    ).first()


@dataclass(frozen=True)
class EventPage:
    """One page of a run's events: those with ``seq > after``, at most ``limit`` of them."""

    events: list[RunEvent]
    next_after: int
    has_more: bool


def run_event_page(*, run: Run, after: int = 0, limit: int = 100) -> EventPage:
    """The events of ``run`` after seq ``after``, in seq order; ``next_after`` is the last seq
    returned (or ``after`` when there is none), to pass as ``after`` for the next page."""
    rows = list(RunEvent.objects.filter(run=run, seq__gt=after).order_by("seq")[: limit + 1])
    events, has_more = rows[:limit], len(rows) > limit
    return EventPage(events=events, next_after=events[-1].seq if events else after, has_more=has_more)


@database_sync_to_async
def run_event_page_after(*, run_id: int, after: int, limit: int = 200) -> tuple[list[dict[str, Any]], bool]:
    """The stored events of run ``run_id`` with ``seq > after`` as stream messages (at most
    ``limit``, in seq order) and whether more follow: the replay of a resumed stream."""
    rows = list(RunEvent.objects.filter(run_id=run_id, seq__gt=after).order_by("seq")[: limit + 1])
    return [event.as_message() for event in rows[:limit]], len(rows) > limit


def tool_executions_of(connector: Connector) -> list[Model]:
    """Up to ``PROTECTED_SAMPLE`` executions of the connector's tools, in runs of its organisation's
    agents: the history that keeps it from being deleted (registered in ``agents.history``)."""
    executions = ToolExecution.objects.filter(
        run__agent__organization_id=connector.organization_id, tool_name__startswith=connector.tool_prefix
    )
    return list(executions.order_by("pk")[:PROTECTED_SAMPLE])


def shadow_decision_counts(*, declaration_pks: list[int]) -> dict[int, dict[str, int]]:
    """Per declaration, how many times it would have decided each way in shadow mode (the
    "would have" counter): ``{declaration: {decision: count}}``, declarations without any absent."""
    counts: dict[int, dict[str, int]] = {}
    rows = (
        ShadowDecision.objects.filter(declaration_pk__in=declaration_pks)
        .values_list("declaration_pk", "decision")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for declaration, decision, n in rows:
        counts.setdefault(declaration, {})[decision] = n
    return counts
