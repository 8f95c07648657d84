"""The approver's pages: the inbox of pending requests (and its live refresh), one request with
its event log, and the decision form's answer.

Thin views (HackSoft style): each validates its input with a form, reads through
``approvals.selectors`` and writes through the one service call ``confirmation_decide``. Requests
a user may not read are reported as 404, so ids of other people's requests reveal nothing.
"""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from approvals import presentation, selectors
from approvals.apis import DecisionThrottle
from approvals.event_lines import EventLine
from approvals.services import MAX_REASON_LENGTH, confirmation_decide
from approvals.views.cards import RequestCard
from approvals.views.layout import bad_request, render_page, signed_in
from fimone.parsers import loads as json_loads

MAX_EDITED_ARGS_LENGTH = 100_000


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    reason = forms.CharField(required=False, max_length=MAX_REASON_LENGTH, strip=True)
    # Offered when the request's policy allows edits: the arguments to run instead, as JSON.
    arguments = forms.CharField(required=False, max_length=MAX_EDITED_ARGS_LENGTH, strip=True)
    # The hash of the arguments the page showed: approving arguments changed since is refused.
    args_sha256 = forms.CharField(required=False, max_length=64)

    def clean_arguments(self) -> dict[str, Any] | None:
        text = self.cleaned_data["arguments"]
        if not text:
            return None
        try:
            value = json_loads(text)
        except ValueError as exc:  # InvalidJSON: not JSON, or nested too deep (never RecursionError)
            raise forms.ValidationError(f"The arguments cannot be read: {exc}.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("The arguments must be a JSON object.")
        return value


@signed_in
@require_GET
def inbox(request: HttpRequest) -> HttpResponse:
    """The pending requests the user may decide, soonest deadline first."""
    cards = [RequestCard.of(r) for r in selectors.inbox_for(user=request.user)]
    return render_page(request, "approvals/inbox.html", {"cards": cards, "nav": "inbox"})


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
    events = EventLine.lines_of(confirmation, list(selectors.request_events(request=confirmation)))
    can_decide = selectors.may_decide(request=confirmation, user=request.user)
    # Back to where the reader came from: the history for auditors, the inbox for deciders.
    from_history = request.GET.get("from") == "history" or (
        not can_decide and selectors.may_view_history(user=request.user)
    )
    return render_page(
        request,
        "approvals/detail.html",
        {
            "card": RequestCard.of(confirmation),
            "events": events,
            "can_decide": can_decide,
            "back": ("History", reverse("approvals:history"))
            if from_history
            else ("Inbox", reverse("approvals:inbox")),
            "run_record_url": _admin_url(request, "agents_run_change", confirmation.run_id),
            "agent_record_url": _admin_url(request, "agents_agent_change", confirmation.agent_id),
        },
    )


def _admin_url(request: HttpRequest, name: str, pk: Any) -> str | None:
    """The admin page of a record, for staff users who can open it (auditors, operators)."""
    user = request.user
    app_label, model = name.split("_")[0], name.split("_")[1]
    if not user.is_staff or not user.has_perm(f"{app_label}.view_{model}"):
        return None
    return reverse(f"admin:{name}", args=[pk])


@signed_in
@require_POST
def request_decide(request: HttpRequest, request_id: uuid.UUID) -> HttpResponse:
    """Approve or reject, then back to the inbox with the outcome as a flash message. Decisions
    count against the same per-user rate as the API's (429 past it, nothing decided)."""
    refused = DecisionThrottle().refusal(request)
    if refused is not None:
        response = render_page(
            request,
            "approvals/too_many_requests.html",
            {"message": refused.message, "wait": refused.wait},
            status=429,
        )
        response["Retry-After"] = str(refused.wait)
        return response
    form = DecisionForm(request.POST)
    if not form.is_valid():
        if set(form.errors) == {"arguments"} and selectors.request_get(
            request_id=request_id, user=request.user
        ):
            # A typo in the edited arguments: say so on the inbox, nothing was decided.
            messages.error(request, " ".join(form.errors["arguments"]))
            return redirect("approvals:inbox")
        return bad_request(request, form.errors)
    approve = form.cleaned_data["decision"] == "approve"
    outcome = confirmation_decide(
        request_id=request_id,
        user=request.user,
        approve=approve,
        reason=form.cleaned_data["reason"],
        edited_args=form.cleaned_data["arguments"],
        seen_args_sha256=form.cleaned_data["args_sha256"],
    )
    if outcome.status == "not_found":
        raise Http404(outcome.message)
    if outcome.accepted:
        verb = "Approved" if approve else "Rejected"
        decided = outcome.request
        tool = (decided.tool_title or presentation.title_of(decided.tool_name)) if decided else "the call"
        edited = outcome.request is not None and outcome.request.edited_by_id == request.user.pk
        messages.success(request, f"{verb}: {tool}" + (" with your changed arguments" if edited else ""))
    elif outcome.counted:  # a vote towards a quorum: the request still waits for others
        messages.success(request, outcome.message)
    elif outcome.refused:
        messages.error(request, outcome.message)
    else:  # someone else decided first, or the deadline passed
        messages.warning(request, outcome.message)
    return redirect("approvals:inbox")
