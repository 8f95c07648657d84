"""The portal's pages (mounted at ``/``): home, conversations, the chat page and its small JSON
endpoints, sign-in, and the friendly error pages.

Thin views: validate, one selector or service call, render. Another user's conversation, run or
request answers 404 — the same page as an unknown id, so ids reveal nothing across organisations.
Writes go through the services of the apps below (``agents.services.run_start``,
``approvals.services.confirmation_decide``); no rule of theirs is re-implemented here. Run starts
and decisions count against the same per-user rates as the API's (``RUN_START_RATE``,
``DECISION_RATE``): past them a 429 with ``Retry-After``, and nothing is started or decided.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template import loader
from django.urls import reverse, reverse_lazy
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agents.apis import RunStartThrottle
from agents.demo import DEMO_PASSWORD, demo_sign_ins
from agents.models import Conversation, ExecutionPath
from agents.services import (
    ServiceError,
    conversation_archive,
    conversation_rename,
    conversation_unarchive,
    run_cancel,
    run_retry,
    run_start,
)
from approvals import selectors as approval_selectors
from approvals.apis import DecisionThrottle
from approvals.services import confirmation_decide
from fimone.throttling import Refusal
from portal import selectors
from portal.transcript import markdown_of, run_transcript

LOGIN_URL = reverse_lazy("portal:login")
MAX_MESSAGE_LENGTH = 8000
MAX_REASON_LENGTH = 2000

signed_in = login_required(login_url=LOGIN_URL)


def _page(request: HttpRequest, template: str, context: dict[str, Any], *, status: int = 200) -> HttpResponse:
    """Render with what the layout needs: the server's clock (countdowns count from it)."""
    return render(request, template, {"server_now": timezone.now(), **context}, status=status)


class MessageForm(forms.Form):
    message = forms.CharField(max_length=MAX_MESSAGE_LENGTH, strip=True)

    def clean_message(self) -> str:
        # Browsers send a textarea's line breaks as CRLF; the agent reads them as typed.
        return self.cleaned_data["message"].replace("\r\n", "\n").replace("\r", "\n")


class RenameForm(forms.Form):
    title = forms.CharField(max_length=Conversation._meta.get_field("title").max_length, strip=True)


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    reason = forms.CharField(required=False, max_length=MAX_REASON_LENGTH, strip=True)


def _retry_after(response: HttpResponse, refused: Refusal) -> HttpResponse:
    response["Retry-After"] = str(refused.wait)
    return response


def _wait_text(refused: Refusal) -> str:
    return f"try again in {refused.wait} second{'' if refused.wait == 1 else 's'}"


def _form_problem(form: forms.Form) -> str:
    field, errors = next(iter(form.errors.items()))
    label = {"message": "your message", "title": "the title"}.get(field, field)
    return f"Check {label}: {errors[0]}"


def _sentence(text: str) -> str:
    """A service's refusal ("this conversation is archived; …") as a sentence for a flash message."""
    text = text.strip()
    return (text[:1].upper() + text[1:]).rstrip(".") + "." if text else text


# --- home and conversations -------------------------------------------------------------------------


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
    return _page(
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
        return _page(
            request, "portal/conversations.html", {"archived": True, "conversations": found, "nav": "chat"}
        )
    query = " ".join(str(request.GET.get("q", "")).split())[: selectors.MAX_QUERY_LENGTH]
    found = (
        selectors.conversation_search(user=request.user, query=query)
        if query
        else selectors.conversation_list(user=request.user, limit=selectors.SEARCH_RESULTS)
    )
    return _page(
        request, "portal/conversations.html", {"query": query, "conversations": found, "nav": "chat"}
    )


@signed_in
@require_http_methods(["GET", "POST"])
def agent_chat(request: HttpRequest, agent_id: int) -> HttpResponse:
    """GET: a new conversation with the agent (and the user's earlier ones with it).
    POST: start the conversation with a first message and open it."""
    agent = selectors.agent_for_chat(agent_id=agent_id, user=request.user)
    if agent is None:
        raise Http404("No such agent.")
    form = MessageForm(request.POST or None)
    refusal = selectors.may_chat(user=request.user, agent=agent)
    refused = RunStartThrottle().refusal(request) if request.method == "POST" and refusal is None else None
    if request.method == "POST" and refusal is not None:
        messages.error(request, f"Not sent: {refusal}.")
    elif refused is not None:
        messages.error(request, f"Not sent: {refused.message} Nothing was started; {_wait_text(refused)}.")
    elif request.method == "POST":
        if form.is_valid():
            try:
                run = run_start(
                    agent=agent,
                    user=request.user,
                    input=form.cleaned_data["message"],
                    execution_path=ExecutionPath.PORTAL,
                )
            except ServiceError as error:
                if error.code == "not_found":
                    raise Http404("No such agent.") from None
                messages.error(request, _sentence(error.message))
            else:
                return redirect("portal:conversation", conversation_id=run.conversation_id)
        else:
            messages.error(request, _form_problem(form))
    status = 200
    if request.method == "POST":
        status = 403 if refusal is not None else 429 if refused is not None else 400
    page = _page(
        request,
        "portal/new_chat.html",
        {
            "agent": agent,
            "card": selectors.agent_cards(agents=[agent])[0],
            "form": form,
            "refusal": refusal,
            "conversations": selectors.conversation_list(user=request.user, agent=agent, limit=10),
            # Who may not chat here but reads the record gets this agent's part of it.
            "agent_history_url": _agent_history_url(request, agent) if refusal is not None else None,
            "nav": "chat",
        },
        status=status,
    )
    return _retry_after(page, refused) if refused is not None else page


def _agent_history_url(request: HttpRequest, agent: Any) -> str | None:
    """The approval history filtered to ``agent`` (the history's ``agent`` filter) for a user who
    reads its organisation's record, else ``None`` (the history would refuse that filter)."""
    if not selectors.reads_record_of(user=request.user, organization_id=agent.organization_id):
        return None
    return f"{reverse('approvals:history')}?{urlencode({'agent': agent.pk})}"


@signed_in
@require_http_methods(["GET", "POST"])
def conversation(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """GET: the chat page (earlier turns from stored events, the current one live).
    POST: continue the conversation: a new run, with the earlier turns as context."""
    chat = selectors.conversation_for_chat(conversation_id=conversation_id, user=request.user)
    if chat is None:
        raise Http404("No such conversation.")
    if request.method == "POST":
        refused = RunStartThrottle().refusal(request)
        if refused is not None:
            message = f"{refused.message} Your message was not sent; {_wait_text(refused)}."
            page = _error(
                request,
                429,
                "Too many runs started",
                message,
                draft=str(request.POST.get("message", ""))[:MAX_MESSAGE_LENGTH],
                retry_url=request.path,
            )
            return _retry_after(page, refused)
        form = MessageForm(request.POST)
        if not form.is_valid():
            messages.error(request, _form_problem(form))
        else:
            try:
                run_start(
                    agent=chat.agent,
                    user=request.user,
                    input=form.cleaned_data["message"],
                    conversation=chat,
                    execution_path=ExecutionPath.PORTAL,
                )
            except ServiceError as error:
                if error.code == "not_found":
                    raise Http404("No such conversation.") from None
                messages.error(request, f"Not sent: {error.message}.")
        return redirect("portal:conversation", conversation_id=chat.pk)
    turns = [
        run_transcript(run=run, user=request.user) for run in selectors.conversation_runs(conversation=chat)
    ]
    busy = bool(turns) and not turns[-1]["terminal"]
    refusal = selectors.may_chat(user=request.user, agent=chat.agent)
    return _page(
        request,
        "portal/chat.html",
        {
            "chat": chat,
            "turns": turns,
            "busy": busy,
            "form": MessageForm(),
            "rename_form": RenameForm(initial={"title": chat.title}),
            "refusal": refusal,
            "composer": chat.archived_at is None and refusal is None,
            "nav": "chat",
            "live": True,
        },
    )


# --- the chat page's controls: stop, retry, rename, archive --------------------------------------


def _own_conversation(request: HttpRequest, conversation_id: int) -> Conversation:
    chat = selectors.conversation_for_chat(conversation_id=conversation_id, user=request.user)
    if chat is None:
        raise Http404("No such conversation.")
    return chat


def _done(
    request: HttpRequest, chat: Conversation, *, ok: bool, message: str, status: int = 200
) -> HttpResponse:
    """Answer JSON to the page's script, else go back to the conversation with a flash message."""
    if _wants_json(request):
        return JsonResponse({"ok": ok, "message": message}, status=200 if ok else status)
    (messages.success if ok else messages.error)(request, message)
    return redirect("portal:conversation", conversation_id=chat.pk)


@signed_in
@require_POST
def conversation_stop(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Stop the conversation's run in progress — also while it waits for an approval, whose
    request is then withdrawn (the approvers' cards say so)."""
    chat = _own_conversation(request, conversation_id)
    run = selectors.run_in_flight(conversation=chat)
    if run is None:
        return _done(request, chat, ok=False, message="Nothing is running in this conversation.", status=409)
    try:
        run_cancel(run=run, user=request.user)
    except ServiceError as error:
        if error.code == "not_found":
            raise Http404("No such conversation.") from None
        return _done(request, chat, ok=False, message=_sentence(error.message), status=409)
    return _done(request, chat, ok=True, message="Stopped: the agent does nothing more for this message.")


@signed_in
@require_POST
def conversation_retry(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Send the conversation's last message again, as a new run (counted like any message)."""
    chat = _own_conversation(request, conversation_id)
    refused = RunStartThrottle().refusal(request)
    if refused is not None:
        message = f"{refused.message} Nothing was started; {_wait_text(refused)}."
        return _retry_after(_error(request, 429, "Too many runs started", message), refused)
    try:
        run_retry(conversation=chat, user=request.user)
    except ServiceError as error:
        if error.code == "not_found":
            raise Http404("No such conversation.") from None
        messages.error(request, f"Not sent again: {error.message}.")
    return redirect("portal:conversation", conversation_id=chat.pk)


@signed_in
@require_POST
def conversation_rename_view(request: HttpRequest, conversation_id: int) -> HttpResponse:
    chat = _own_conversation(request, conversation_id)
    form = RenameForm(request.POST)
    if not form.is_valid():
        return _done(request, chat, ok=False, message=_form_problem(form), status=400)
    try:
        renamed = conversation_rename(conversation=chat, user=request.user, title=form.cleaned_data["title"])
    except ServiceError as error:
        if error.code == "not_found":
            raise Http404("No such conversation.") from None
        return _done(request, chat, ok=False, message=f"Check the title: {error.message}.", status=400)
    if _wants_json(request):
        return JsonResponse({"ok": True, "message": "Renamed.", "title": renamed.title})
    messages.success(request, "Renamed.")
    return redirect("portal:conversation", conversation_id=chat.pk)


@signed_in
@require_POST
def conversation_archive_view(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Archive: out of the user's lists, kept whole for the record; back to the agents."""
    chat = _own_conversation(request, conversation_id)
    try:
        conversation_archive(conversation=chat, user=request.user)
    except ServiceError as error:
        if error.code == "not_found":
            raise Http404("No such conversation.") from None
        messages.error(request, f"Not archived: {error.message}.")
        return redirect("portal:conversation", conversation_id=chat.pk)
    archived = f"{reverse('portal:conversations')}?archived=1"
    found = format_html('Find it under <a href="{}">Archived conversations</a>.', archived)
    messages.success(request, format_html("“{}” is archived. {}", chat, found))
    return redirect("portal:agents")


@signed_in
@require_POST
def conversation_restore(request: HttpRequest, conversation_id: int) -> HttpResponse:
    chat = _own_conversation(request, conversation_id)
    try:
        conversation_unarchive(conversation=chat, user=request.user)
    except ServiceError as error:
        if error.code == "not_found":
            raise Http404("No such conversation.") from None
        messages.error(request, _sentence(error.message))
    else:
        messages.success(request, "Restored: the conversation is back in your list.")
    return redirect("portal:conversation", conversation_id=chat.pk)


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
    return _page(
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


# --- small JSON endpoints of the chat page ------------------------------------------------------


def _json_not_found(message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=404)


@signed_in
@require_GET
def event_html(request: HttpRequest, run_id: int, seq: int) -> JsonResponse:
    """The sanitised HTML of the model text of event ``seq`` of run ``run_id`` (a message or the
    final answer), for the page to show formatted once the event arrived live."""
    run = selectors.run_for_reader(run_id=run_id, user=request.user)
    if run is None:
        return _json_not_found("No such run.")
    event = run.events.filter(seq=seq).first()
    rendered = markdown_of(event) if event is not None else None
    if rendered is None:
        return _json_not_found("No formatted text for this event.")
    return JsonResponse({"seq": seq, "html": rendered})


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
        return _json_not_found("No such approval request.")
    return JsonResponse(_request_state(confirmation, request.user))


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


@signed_in
@require_POST
def request_decide(request: HttpRequest, request_id: uuid.UUID) -> HttpResponse:
    """Approve or reject from the chat page: the inbox's service, with the same checks. Answers
    JSON to the page's script, or redirects back (``next``) with a flash message without it.
    Decisions count against the rate the API and the inbox share (429 past it, nothing decided)."""
    refused = DecisionThrottle().refusal(request)
    if refused is not None:
        message = f"{refused.message} Nothing was decided; {_wait_text(refused)}."
        if _wants_json(request):
            answer = JsonResponse({"accepted": False, "status": "throttled", "message": message}, status=429)
            return _retry_after(answer, refused)
        return _retry_after(_error(request, 429, "Too many decisions", message), refused)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        message = _form_problem(form)
        if _wants_json(request):
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
        if _wants_json(request):
            return _json_not_found("No such approval request.")
        raise Http404("No such approval request.")
    if outcome.accepted:
        message = ("Approved" if approve else "Rejected") + ": the run goes on with your decision."
    else:
        message = outcome.message
    if _wants_json(request):
        status = 200 if outcome.counted else 403 if outcome.refused else 409
        return JsonResponse(
            {"accepted": outcome.accepted, "status": outcome.status, "message": message}, status=status
        )
    (messages.success if outcome.counted else messages.error)(request, message)
    return _back(request)


def _back(request: HttpRequest) -> HttpResponse:
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = reverse("portal:home")
    return redirect(target)


# --- sign-in -------------------------------------------------------------------------------------

login = auth_views.LoginView.as_view(
    template_name="portal/login.html", redirect_authenticated_user=True, next_page=reverse_lazy("portal:home")
)
logout = auth_views.LogoutView.as_view(next_page=reverse_lazy("portal:login"))


# --- error pages (fimone.urls handler400/403/404/500) --------------------------------------------


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _error(request, 400, "That request could not be understood", "Go back and try again.")


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _error(
        request, 403, "You may not do that", "Your account does not allow this. Ask an administrator."
    )


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _error(request, 404, "Page not found", "This page does not exist, or it is not yours to see.")


def server_error(request: HttpRequest) -> HttpResponse:
    """The 500 page renders from a template that needs no database and no context processor:
    whatever broke the request may break them too."""
    template = loader.get_template("portal/500.html")
    return HttpResponse(template.render({}), status=500)


def _error(
    request: HttpRequest, status: int, title: str, detail: str, *, draft: str = "", retry_url: str = ""
) -> HttpResponse:
    """A friendly error page. ``draft``/``retry_url``: a message the user typed and where to send it
    again, shown in a form so that nothing they wrote is lost."""
    context = {"status": status, "title": title, "detail": detail, "draft": draft, "retry_url": retry_url}
    if not getattr(getattr(request, "user", None), "is_authenticated", False):
        # A signed-out visitor has no agents to go back to: offer to sign in instead.
        context["login_url"] = reverse("portal:login")
    return render(request, "portal/error.html", context, status=status)
