"""The web inbox of approvers (mounted at ``/approvals/``).

Thin views (HackSoft style): each validates its input with a form, reads through
``approvals.selectors`` and writes through the one service call ``confirmation_decide``. Requests
a user may not read are reported as 404, so ids of other people's requests reveal nothing.

Arguments shown here were produced by an LLM: they are rendered as text (autoescaped) inside
``<pre>``, never as markup.

Sign-in lives here too (``login/``, ``logout/``): the admin's login form only admits staff, and
approvers are usually not staff.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse_lazy
from django.utils import timezone
from django.utils.timesince import timesince
from django.views.decorators.http import require_GET, require_POST

from approvals import selectors
from approvals.apis import DecisionThrottle
from approvals.gate import pretty_arguments
from approvals.models import ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from approvals.selectors import display_name
from approvals.services import confirmation_decide

LOGIN_URL = reverse_lazy("approvals:login")
HISTORY_PAGE_SIZE = 25
MAX_REASON_LENGTH = 2000

signed_in = login_required(login_url=LOGIN_URL)


@dataclass(frozen=True)
class RequestCard:
    """A request as the pages show it: the model plus what templates cannot compute."""

    request: ConfirmationRequest
    arguments: str
    requester: str
    decider: str | None
    requested_ago: str

    @classmethod
    def of(cls, request: ConfirmationRequest) -> RequestCard:
        return cls(
            request=request,
            arguments=pretty_arguments(request.tool_args),
            requester=display_name(request.requested_by),
            decider=display_name(request.responded_by) if request.responded_by_id else None,
            requested_ago=_ago(request.created_at),
        )


def _ago(moment: dt.datetime) -> str:
    # ``timesince`` counts in whole minutes: a request opened seconds ago would read "0 minutes".
    if timezone.now() - moment < dt.timedelta(minutes=1):
        return "just now"
    return f"{timesince(moment)} ago"


@dataclass(frozen=True)
class EventLine:
    event: ConfirmationEvent
    actor: str
    details: str

    @classmethod
    def of(cls, event: ConfirmationEvent) -> EventLine:
        # A click from a chat platform may carry only the platform's user id; sweeps carry none.
        actor = display_name(event.actor) if event.actor_id else event.actor_external_id or "system"
        return cls(event=event, actor=actor, details=pretty_arguments(event.details) if event.details else "")


def _page(request: HttpRequest, template: str, context: dict[str, Any], *, status: int = 200) -> HttpResponse:
    """Render ``template`` with what the layout needs (navigation, the server's clock for the
    countdowns, so a client with a wrong clock still counts down correctly)."""
    user = request.user
    layout = {
        "show_history": selectors.may_view_history(user=user),
        "user_label": display_name(user) if user.is_authenticated else "",
        "server_now": timezone.now(),
    }
    return render(request, template, {**layout, **context}, status=status)


def _bad_request(request: HttpRequest, problems: dict[str, Any]) -> HttpResponse:
    return _page(request, "approvals/bad_request.html", {"problems": problems}, status=400)


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    reason = forms.CharField(required=False, max_length=MAX_REASON_LENGTH, strip=True)


class HistoryFilterForm(forms.Form):
    status = forms.ChoiceField(choices=[("", "Any status"), *ConfirmationStatus.choices], required=False)


@signed_in
@require_GET
def inbox(request: HttpRequest) -> HttpResponse:
    """The pending requests the user may decide, soonest deadline first."""
    cards = [RequestCard.of(r) for r in selectors.inbox_for(user=request.user)]
    return _page(request, "approvals/inbox.html", {"cards": cards, "nav": "inbox"})


@signed_in
@require_GET
def inbox_live(request: HttpRequest) -> JsonResponse:
    """What a live inbox page needs after a push (``approvals.live``): the user's pending count,
    and with ``?cards=1`` their inbox's cards as HTML, in the inbox's order (the page adds the
    new ones and drops those that left). The same read as :func:`inbox`: nothing more is shown."""
    requests = list(selectors.inbox_for(user=request.user))
    answer: dict[str, Any] = {"pending": len(requests)}
    if request.GET.get("cards") == "1":
        answer["cards"] = [
            {
                "id": str(r.pk),
                "html": render_to_string("approvals/_inbox_card.html", {"card": RequestCard.of(r)}, request),
            }
            for r in requests
        ]
    response = JsonResponse(answer)
    response["Cache-Control"] = "no-store"
    return response


@signed_in
@require_GET
def request_detail(request: HttpRequest, request_id: uuid.UUID) -> HttpResponse:
    """One request with its status, its run's status and its event log."""
    confirmation = selectors.request_get(request_id=request_id, user=request.user)
    if confirmation is None:
        raise Http404("No such approval request.")
    events = [EventLine.of(e) for e in selectors.request_events(request=confirmation)]
    return _page(
        request,
        "approvals/detail.html",
        {
            "card": RequestCard.of(confirmation),
            "events": events,
            "can_decide": selectors.may_decide(request=confirmation, user=request.user),
        },
    )


@signed_in
@require_POST
def request_decide(request: HttpRequest, request_id: uuid.UUID) -> HttpResponse:
    """Approve or reject, then back to the inbox with the outcome as a flash message. Decisions
    count against the same per-user rate as the API's (429 past it, nothing decided)."""
    refused = DecisionThrottle().refusal(request)
    if refused is not None:
        response = _page(
            request,
            "approvals/too_many_requests.html",
            {"message": refused.message, "wait": refused.wait},
            status=429,
        )
        response["Retry-After"] = str(refused.wait)
        return response
    form = DecisionForm(request.POST)
    if not form.is_valid():
        return _bad_request(request, form.errors)
    approve = form.cleaned_data["decision"] == "approve"
    outcome = confirmation_decide(
        request_id=request_id, user=request.user, approve=approve, reason=form.cleaned_data["reason"]
    )
    if outcome.status == "not_found":
        raise Http404(outcome.message)
    if outcome.accepted:
        verb = "Approved" if approve else "Rejected"
        tool = outcome.request.tool_name if outcome.request is not None else "the call"
        messages.success(request, f"{verb}: {tool}")
    elif outcome.refused:
        messages.error(request, outcome.message)
    else:  # someone else decided first, or the deadline passed
        messages.warning(request, outcome.message)
    return redirect("approvals:inbox")


@signed_in
@require_GET
def history(request: HttpRequest) -> HttpResponse:
    """Every request of the organisations the user audits or administers, newest first."""
    if not selectors.may_view_history(user=request.user):
        return _page(request, "approvals/forbidden.html", {}, status=403)
    form = HistoryFilterForm(request.GET)
    if not form.is_valid():
        return _bad_request(request, form.errors)
    status = form.cleaned_data["status"] or None
    page = Paginator(selectors.history_for(user=request.user, status=status), HISTORY_PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    return _page(
        request,
        "approvals/history.html",
        {
            "form": form,
            "status": status or "",
            "page": page,
            "cards": [RequestCard.of(r) for r in page.object_list],
            "nav": "history",
        },
    )


def login_locked_out(request: HttpRequest, *_details: Any) -> HttpResponse:
    """The answer to a sign-in refused by the lockout (django-axes' ``AXES_LOCKOUT_CALLABLE``, for
    both login pages): 429 with how long to wait. It echoes nothing that was posted."""
    cool_off = int(settings.AXES_COOLOFF_TIME.total_seconds())
    response = render(request, "registration/locked_out.html", {"minutes": cool_off // 60}, status=429)
    response["Retry-After"] = str(cool_off)
    return response
