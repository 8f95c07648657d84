"""The pages a user lands on: home (or the landing page, signed out), the agents they may use,
and their conversations (search, and the archived ones)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from agents.demo import DEMO_PASSWORD, demo_sign_ins
from approvals import selectors as approval_selectors
from portal import selectors
from portal.views.responses import render_page
from portal.views.sign_in import signed_in


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """Signed out: what this is and a way to sign in. Signed in: an approver and nothing else goes
    to the inbox; everyone else sees the agents they may use and their conversations."""
    if not request.user.is_authenticated:
        # The demo's sign-ins only where the demo is served (development, with its data loaded):
        # a real deployment's visitors get their accounts from their organisation.
        demo = demo_sign_ins() if settings.FIMONE_ENV == "development" else []
        context = {
            "login_url": reverse("portal:login"),
            "demo_sign_ins": demo,
            "demo_password": DEMO_PASSWORD,
        }
        return render(request, "portal/landing.html", context)
    if selectors.lands_in_inbox(user=request.user):
        return redirect("approvals:inbox")
    return _home(request)


@signed_in
@require_GET
def agents_page(request: HttpRequest) -> HttpResponse:
    """The agents this user may use and their recent conversations (the nav's Chat, for everyone:
    an approver whose home is the inbox finds their agents here)."""
    return _home(request)


def _home(request: HttpRequest) -> HttpResponse:
    agents = selectors.agents_for(user=request.user)
    reads_only = selectors.reads_only(user=request.user)
    return render_page(
        request,
        "portal/home.html",
        {
            "cards": selectors.agent_cards(agents=agents),
            # Someone who does not chat has no conversations to list or search: the page offers
            # where they read instead (the record, and each agent's part of it).
            "conversations": [] if reads_only else selectors.conversation_list(user=request.user),
            "reads_only": reads_only,
            "reads_record": reads_only and approval_selectors.may_view_history(user=request.user),
            "nav": "chat",
        },
    )


@signed_in
@require_GET
def conversation_list(request: HttpRequest) -> HttpResponse:
    """Search over the user's own conversations (title and messages); without a query, the most
    recent ones. Archived conversations are not listed, except on their own list (``?archived=1``),
    where one is found again to restore it."""
    if request.GET.get("archived") == "1":
        found = selectors.archived_conversations(user=request.user)
        return render_page(
            request, "portal/conversations.html", {"archived": True, "conversations": found, "nav": "chat"}
        )
    query = " ".join(str(request.GET.get("q", "")).split())[: selectors.MAX_QUERY_LENGTH]
    found = (
        selectors.conversation_search(user=request.user, query=query)
        if query
        else selectors.conversation_list(user=request.user, limit=selectors.SEARCH_RESULTS)
    )
    return render_page(
        request, "portal/conversations.html", {"query": query, "conversations": found, "nav": "chat"}
    )
