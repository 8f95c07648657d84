"""An approval request from the chat page: where it stands (for the page's script), and a
decision on it through ``approvals.services.confirmation_decide``, with the inbox's checks and
counted against the decision rate the API and the inbox share (``DECISION_RATE``)."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from approvals import selectors as approval_selectors
from approvals.apis import DecisionThrottle
from approvals.services import confirmation_decide
from portal import selectors
from portal.views.chat_forms import DecisionForm, form_problem
from portal.views.errors import error_page
from portal.views.responses import json_not_found, retry_after, wait_text, wants_json
from portal.views.sign_in import signed_in


def _request_state(confirmation: Any, user: Any) -> dict[str, Any]:
    state = selectors.request_states(request_ids=[str(confirmation.pk)]).get(str(confirmation.pk), {})
    return {
        **state,
        "request_id": str(confirmation.pk),
        "status": str(confirmation.status),
        "may_decide": approval_selectors.may_decide(request=confirmation, user=user),
    }


@signed_in
@require_GET
def request_state(request: HttpRequest, request_id: uuid.UUID) -> JsonResponse:
    """Where the request stands (status, votes) and whether the signed-in user may decide it now
    (the page then offers the buttons)."""
    confirmation = approval_selectors.request_get(request_id=request_id, user=request.user)
    if confirmation is None:
        return json_not_found("No such approval request.")
    return JsonResponse(_request_state(confirmation, request.user))


@signed_in
@require_POST
def request_decide(request: HttpRequest, request_id: uuid.UUID) -> HttpResponse:
    """Approve or reject from the chat page: the inbox's service, with the same checks. Answers
    JSON to the page's script, or redirects back (``next``) with a flash message without it.
    Decisions count against the rate the API and the inbox share (429 past it, nothing decided)."""
    refused = DecisionThrottle().refusal(request)
    if refused is not None:
        message = f"{refused.message} Nothing was decided; {wait_text(refused)}."
        if wants_json(request):
            answer = JsonResponse({"accepted": False, "status": "throttled", "message": message}, status=429)
            return retry_after(answer, refused)
        return retry_after(error_page(request, 429, "Too many decisions", message), refused)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        message = form_problem(form)
        if wants_json(request):
            return JsonResponse({"accepted": False, "status": "invalid", "message": message}, status=400)
        messages.error(request, message)
        return _back(request)
    approve = form.cleaned_data["decision"] == "approve"
    # A request the user may not even read (another organisation's) is a 404, not a refusal.
    visible = approval_selectors.request_get(request_id=request_id, user=request.user) is not None
    outcome = (
        confirmation_decide(
            request_id=request_id, user=request.user, approve=approve, reason=form.cleaned_data["reason"]
        )
        if visible
        else None
    )
    if outcome is None or outcome.status == "not_found":
        if wants_json(request):
            return json_not_found("No such approval request.")
        raise Http404("No such approval request.")
    if outcome.accepted:
        message = ("Approved" if approve else "Rejected") + ": the run goes on with your decision."
    else:
        message = outcome.message
    if wants_json(request):
        status = 200 if outcome.counted else 403 if outcome.refused else 409
        return JsonResponse(
            {"accepted": outcome.accepted, "status": outcome.status, "message": message}, status=status
        )
    (messages.success if outcome.counted else messages.error)(request, message)
    return _back(request)


def _back(request: HttpRequest) -> HttpResponse:
    """Back where the decision was made (``next``, when it is on this site), else home."""
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = reverse("portal:home")
    return redirect(target)
