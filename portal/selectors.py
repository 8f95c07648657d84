"""Reads for the portal's pages. Everything here is scoped to the signed-in user: a conversation
or run of someone else (another organisation's above all) reads as ``None``, which views turn
into a 404 page."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db.models import Max, QuerySet
from django.db.models.functions import Coalesce

from agents import selectors as agent_selectors
from agents.models import Agent, Conversation, Membership, Role, Run
from approvals import selectors as approval_selectors

RECENT_CONVERSATIONS = 20
INBOX_ROLES = (Role.APPROVER, Role.ADMIN)
"""Roles whose members get the Inbox in their navigation even while nothing waits for them."""


@dataclass(frozen=True)
class Navigation:
    """What the top bar offers this user: Chat for everyone, the rest by role."""

    show_inbox: bool
    pending: int
    show_history: bool
    show_admin: bool


def navigation_for(*, user: Any) -> Navigation:
    if not getattr(user, "is_authenticated", False):
        return Navigation(show_inbox=False, pending=0, show_history=False, show_admin=False)
    pending = approval_selectors.inbox_for(user=user).count()
    approver = Membership.objects.filter(user=user, role__in=INBOX_ROLES).exists()
    return Navigation(
        show_inbox=bool(user.is_superuser or approver or pending),
        pending=pending,
        show_history=approval_selectors.may_view_history(user=user),
        show_admin=bool(user.is_staff),
    )


def agents_for(*, user: Any) -> QuerySet[Agent]:
    """The agents ``user`` may chat with: those of their organisations."""
    return agent_selectors.agent_list(user=user)


def agent_for_chat(*, agent_id: int, user: Any) -> Agent | None:
    return agent_selectors.agent_get(agent_id=agent_id, user=user)


def conversation_list(
    *, user: Any, agent: Agent | None = None, limit: int = RECENT_CONVERSATIONS
) -> list[Any]:
    """``user``'s conversations, most recently active first; each carries ``last_activity``."""
    conversations = Conversation.objects.filter(
        user=user, organization_id__in=agent_selectors.organization_ids_of(user=user)
    ).select_related("agent")
    if agent is not None:
        conversations = conversations.filter(agent=agent)
    conversations = conversations.annotate(
        last_activity=Coalesce(Max("runs__created_at"), "created_at")
    ).order_by("-last_activity", "-pk")
    return list(conversations[:limit])


def conversation_for_chat(*, conversation_id: int, user: Any) -> Conversation | None:
    """Conversation ``conversation_id`` if it is ``user``'s own, else ``None``."""
    conversation = agent_selectors.conversation_get(conversation_id=conversation_id, user=user)
    if conversation is None:
        return None
    return Conversation.objects.select_related("agent", "agent__organization").get(pk=conversation.pk)


def conversation_runs(*, conversation: Conversation) -> list[Run]:
    """The runs of ``conversation`` (its turns), oldest first, with their stored events."""
    return list(
        Run.objects.filter(conversation=conversation, parent_run__isnull=True)
        .prefetch_related("events")
        .order_by("pk")
    )


def run_for_reader(*, run_id: int, user: Any) -> Run | None:
    """Run ``run_id`` if ``user`` may read its transcript, else ``None``: their own runs, and the
    runs behind the requests they may read (:func:`approvals.selectors.runs_visible_to`)."""
    return approval_selectors.run_for_transcript(run_id=run_id, user=user)


def last_activity(*, conversation: Conversation) -> dt.datetime:
    latest = conversation.runs.aggregate(m=Max("created_at"))["m"]
    return latest or conversation.created_at
