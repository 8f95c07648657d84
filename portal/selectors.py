"""Reads for the portal's pages. Everything here is scoped to the signed-in user: a conversation
or run of someone else (another organisation's above all) reads as ``None``, which views turn
into a 404 page."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Exists, Max, OuterRef, Q, QuerySet, TextField
from django.db.models.functions import Cast, Coalesce

from agents import events
from agents import selectors as agent_selectors
from agents.models import TERMINAL_RUN_STATUSES, Agent, Conversation, ExecutionPath, Run, RunEvent, RunStatus
from agents.services import chat_refusal
from agents.tools.toolbox import ToolboxError, tools_for_agent
from approvals import selectors as approval_selectors
from approvals.models import ConfirmationRequest
from tenancy import selectors as tenancy_selectors
from tenancy.models import Membership, Role

RECENT_CONVERSATIONS = 20
SEARCH_RESULTS = 50
MAX_QUERY_LENGTH = 200


@dataclass(frozen=True)
class Navigation:
    """What the top bar offers this user: the agents (Chat) for everyone, the rest by role."""

    show_inbox: bool
    pending: int
    show_history: bool
    show_admin: bool
    chat_label: str = "Chat"
    """The first tab's name: "Agents" for someone who reads the agents' record but does not chat."""


def navigation_for(*, user: Any) -> Navigation:
    if not getattr(user, "is_authenticated", False):
        return Navigation(show_inbox=False, pending=0, show_history=False, show_admin=False)
    pending = approval_selectors.inbox_for(user=user).count()
    return Navigation(
        show_inbox=bool(pending or approval_selectors.may_use_inbox(user=user)),
        pending=pending,
        show_history=approval_selectors.may_view_history(user=user),
        show_admin=bool(user.is_staff),
        chat_label="Agents" if reads_only(user=user) else "Chat",
    )


def lands_in_inbox(*, user: Any) -> bool:
    """Whether the portal's home sends ``user`` to the approvals inbox: a person whose only role, in
    every organisation they belong to, is approver (deciding is what they come for; the agents
    stay one click away)."""
    if getattr(user, "is_superuser", False):
        return False
    roles = set(Membership.objects.filter(user=user).values_list("role", flat=True))
    return roles == {Role.APPROVER}


def agents_for(*, user: Any) -> QuerySet[Agent]:
    """The agents ``user`` may chat with: those of their organisations."""
    return agent_selectors.agent_list(user=user)


@dataclass(frozen=True)
class AgentCard:
    """An agent as the home page presents it to people: what it can do, in its tools' titles."""

    agent: Agent
    tools: list[str]
    asks_first: list[str]
    """The tools whose calls wait for a person's approval."""


def agent_cards(*, agents: Any) -> list[AgentCard]:
    """A card per agent of ``agents``. The agent's own instructions are written for the model, not
    for people, so a card describes it by what it can do. An agent whose tools cannot be built
    (a configuration problem its operator sees in the admin) shows none."""
    cards = []
    for agent in agents:
        try:
            # In the order people read them, not by their internal names.
            tools = sorted(tools_for_agent(agent).values(), key=lambda tool: tool.spec.display.lower())
        except ToolboxError:
            tools = []
        cards.append(
            AgentCard(
                agent=agent,
                tools=[tool.spec.display for tool in tools],
                asks_first=[tool.spec.display for tool in tools if tool.spec.requires_confirmation],
            )
        )
    return cards


def may_chat(*, user: Any, agent: Agent) -> str | None:
    """Why ``user`` may not chat with ``agent`` (the page says it instead of offering Send), else
    ``None``. The run start service refuses the same (:func:`agents.services.chat_refusal`)."""
    return chat_refusal(user=user, organization_id=agent.organization_id)


def reads_only(*, user: Any) -> bool:
    """Whether ``user`` may chat in none of their organisations (an auditor everywhere)."""
    organization_ids = Membership.objects.filter(user=user).values_list("organization_id", flat=True)
    ids = set(organization_ids)
    return bool(ids) and all(chat_refusal(user=user, organization_id=i) for i in ids)


def reads_record_of(*, user: Any, organization_id: int) -> bool:
    """Whether ``user`` may read the approval record of organisation ``organization_id`` (its
    auditors, operators and admins, and superusers: :data:`approvals.selectors.AUDIT_ROLES`)."""
    if getattr(user, "is_superuser", False):
        return True
    return Membership.objects.filter(
        user=user, organization_id=organization_id, role__in=approval_selectors.AUDIT_ROLES
    ).exists()


def agent_for_chat(*, agent_id: int, user: Any) -> Agent | None:
    return agent_selectors.agent_get(agent_id=agent_id, user=user)


def conversation_list(
    *, user: Any, agent: Agent | None = None, limit: int = RECENT_CONVERSATIONS
) -> list[Any]:
    """``user``'s conversations, most recently active first; each carries ``last_activity``."""
    return list(_listed(user=user, agent=agent)[:limit])


def archived_conversations(*, user: Any, limit: int = SEARCH_RESULTS) -> list[Any]:
    """``user``'s archived conversations, most recently archived first (where they find one to
    restore)."""
    return list(
        Conversation.objects.filter(
            user=user,
            organization_id__in=tenancy_selectors.organization_ids_of(user=user),
            archived_at__isnull=False,
        )
        .select_related("agent")
        .annotate(last_activity=Coalesce(Max("runs__created_at"), "created_at"))
        .order_by("-archived_at", "-pk")[:limit]
    )


def _listed(*, user: Any, agent: Agent | None = None, archived: bool = False) -> QuerySet[Conversation]:
    """``user``'s conversations that are not archived (with ``archived``, those too), most
    recently active first."""
    conversations = Conversation.objects.filter(
        user=user, organization_id__in=tenancy_selectors.organization_ids_of(user=user)
    ).select_related("agent")
    if not archived:
        conversations = conversations.filter(archived_at__isnull=True)
    conversations = conversations.exclude(_only_refused_client_calls())
    if agent is not None:
        conversations = conversations.filter(agent=agent)
    return conversations.annotate(
        last_activity=Coalesce(Max("runs__created_at"), "created_at"),
        client_calls=Count("runs", filter=Q(runs__execution_path=ExecutionPath.MCP)),
    ).order_by("-last_activity", "-pk")


def _only_refused_client_calls() -> Q:
    """Conversations that are nothing but an MCP client's call a rule refused (an unknown tool, a
    blocked one) before anyone was asked: no one's work to come back to, they would fill the list
    with noise. They stay in the record (the tool-call history, the run's page)."""
    refused = Q(
        Q(execution_path=ExecutionPath.MCP, status=RunStatus.FAILED),
        Exists(RunEvent.objects.filter(run=OuterRef("pk"), type=events.TOOL_BLOCKED)),
        ~Exists(ConfirmationRequest.objects.filter(run=OuterRef("pk"))),
    )
    runs = Run.objects.filter(conversation=OuterRef("pk"))
    return Q(Exists(runs.filter(refused))) & ~Q(Exists(runs.exclude(refused)))


def conversation_search(*, user: Any, query: str, limit: int = SEARCH_RESULTS) -> list[Any]:
    """``user``'s own conversations whose title or messages contain ``query`` (case-insensitive):
    what they wrote, what the agent said (its final answers and its words between tool calls),
    and what its approval cards are about (vendor, amount, … as the card shows them), most
    recently active first. Archived ones are found too (a search is how one finds an old
    conversation again; the page marks them). Other people's conversations are never searched,
    colleagues' included."""
    text = " ".join(query.split())[:MAX_QUERY_LENGTH]
    if not text:
        return []
    said = Run.objects.filter(conversation=OuterRef("pk")).filter(
        Q(input__icontains=text)
        | Q(output__icontains=text)
        | Exists(
            RunEvent.objects.filter(
                run=OuterRef("pk"), type=events.LLM_MESSAGE, payload__content__icontains=text
            )
        )
        | Exists(
            ConfirmationRequest.objects.annotate(about=Cast("context", TextField()))
            .filter(run=OuterRef("pk"))
            .filter(_json_text_contains("about", text))
        )
    )
    return list(_listed(user=user, archived=True).filter(Q(title__icontains=text) | Exists(said))[:limit])


def _json_text_contains(field: str, text: str) -> Q:
    """``field`` (a JSON value cast to text) contains ``text``, case-insensitively, as PostgreSQL
    prints JSON (characters as they are) and as SQLite stores it (non-ASCII characters escaped,
    ``\\u00fc``, as Python's ``json.dumps`` writes them)."""
    escaped = json.dumps(text)[1:-1]
    condition = Q(**{f"{field}__icontains": text})
    if escaped != text:
        condition |= Q(**{f"{field}__icontains": escaped})
    return condition


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


def run_in_flight(*, conversation: Conversation) -> Run | None:
    """The run of ``conversation`` that has not ended yet, if any (there is at most one)."""
    return (
        Run.objects.filter(conversation=conversation, parent_run__isnull=True)
        .exclude(status__in=TERMINAL_RUN_STATUSES)
        .order_by("-pk")
        .first()
    )


def request_states(*, request_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Where each of the approval requests ``request_ids`` stands now, as the chat page shows it:
    its status, the votes so far (who, how, when, why) and the tally, the tool as people read it
    and what the call is about. For the requests a transcript already names (its readers see its
    ``approval.pending`` events): the votes pushed live are not stored in the run's events, and a
    run stopped while it waited records no verdict of its own."""
    ids = []
    for request_id in request_ids:
        try:
            ids.append(uuid.UUID(request_id))
        except ValueError:  # a malformed id in a payload names no request
            continue
    states: dict[str, dict[str, Any]] = {}
    requests = ConfirmationRequest.objects.filter(pk__in=ids).select_related("responded_by")
    for request in requests.prefetch_related("votes__user"):
        votes = [
            {
                "by": approval_selectors.display_name(vote.user),
                "approve": vote.approve,
                "at": vote.created_at.isoformat(),
                "reason": vote.reason,
            }
            for vote in request.votes.all()
        ]
        states[str(request.pk)] = {
            "status": str(request.status),
            "votes": votes,
            "approvals": sum(1 for vote in votes if vote["approve"]),
            "approvals_required": request.approvals_required,
            "tool_title": request.tool_title,
            "context": request.context if isinstance(request.context, list) else [],
            "by": approval_selectors.display_name(request.responded_by) if request.responded_by_id else None,
            "at": request.responded_at.isoformat() if request.responded_at else None,
            "reason": request.reason,
        }
        if request.stage_plan and request.is_pending:
            # Waiting at a stage: its votes, quorum, people and deadline (the run's
            # ``approval.pending`` told the first stage's).
            states[str(request.pk)].update(approval_selectors.stage_vote_summary(request=request))
    return states


def run_for_reader(*, run_id: int, user: Any) -> Run | None:
    """Run ``run_id`` if ``user`` may read its transcript, else ``None``: their own runs, and the
    runs behind the requests they may read (:func:`approvals.selectors.runs_visible_to`)."""
    return approval_selectors.run_for_transcript(run_id=run_id, user=user)


def last_activity(*, conversation: Conversation) -> dt.datetime:
    latest = conversation.runs.aggregate(m=Max("created_at"))["m"]
    return latest or conversation.created_at
