"""One run as people read it: its transcript page (for its owner and for whoever may read a
request it opened), and the formatted text of one of its events for the page's script."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from approvals import selectors as approval_selectors
from portal import selectors
from portal.transcript import markdown_of, run_transcript
from portal.views.responses import json_not_found, render_page
from portal.views.sign_in import signed_in


@signed_in
@require_GET
def run_page(request: HttpRequest, run_id: int) -> HttpResponse:
    """The read-only transcript of one run, with the chat page's renderer: for its owner and for
    whoever may read a request it opened (approvers, auditors, admins of its organisation). It
    follows the run live while it is unfinished; decision buttons appear only for a user who may
    decide. Anyone else gets the 404 page."""
    run = selectors.run_for_reader(run_id=run_id, user=request.user)
    if run is None:
        raise Http404("No such run.")
    transcript = run_transcript(run=run, user=request.user)
    return render_page(
        request,
        "portal/transcript.html",
        {
            "run": run,
            "turns": [transcript],
            "requests": approval_selectors.requests_of_run(run=run, user=request.user),
            "own": run.user_id == request.user.pk,
            "requester": approval_selectors.display_name(run.user),
            "live": not transcript["terminal"],
        },
    )


@signed_in
@require_GET
def event_html(request: HttpRequest, run_id: int, seq: int) -> JsonResponse:
    """The sanitised HTML of the model text of event ``seq`` of run ``run_id`` (a message or the
    final answer), for the page to show formatted once the event arrived live."""
    run = selectors.run_for_reader(run_id=run_id, user=request.user)
    if run is None:
        return json_not_found("No such run.")
    event = run.events.filter(seq=seq).first()
    rendered = markdown_of(event) if event is not None else None
    if rendered is None:
        return json_not_found("No formatted text for this event.")
    return JsonResponse({"seq": seq, "html": rendered})
