"""The chat pages: a new conversation with an agent, and a conversation (its earlier turns from
stored events, the current one live). Sending a message starts a run through
``agents.services.run_start``, counted against the per-user run rate (``RUN_START_RATE``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from agents.apis import RunStartThrottle
from agents.models import ExecutionPath
from agents.services import run_start
from fimone.errors import ServiceError
from portal import selectors
from portal.transcript import run_transcript
from portal.views.chat_forms import MAX_MESSAGE_LENGTH, MessageForm, RenameForm, form_problem
from portal.views.errors import error_page
from portal.views.responses import as_sentence, render_page, retry_after, wait_text
from portal.views.sign_in import signed_in


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
        messages.error(request, f"Not sent: {refused.message} Nothing was started; {wait_text(refused)}.")
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
                messages.error(request, as_sentence(error.message))
            else:
                return redirect("portal:conversation", conversation_id=run.conversation_id)
        else:
            messages.error(request, form_problem(form))
    status = 200
    if request.method == "POST":
        status = 403 if refusal is not None else 429 if refused is not None else 400
    page = render_page(
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
    return retry_after(page, refused) if refused is not None else page


def _agent_history_url(request: HttpRequest, agent: Any) -> str | None:
    """The approval history filtered to ``agent`` (the history's ``agent`` filter) for a user who
    reads its organisation's record, else ``None`` (the history would refuse that filter)."""
    if not selectors.reads_record_of(user=request.user, organization_id=agent.organization_id):
        return None
    return f"{reverse('approvals:history')}?{urlencode({'agent': agent.pk})}"


GATEWAY_CALL_NOTE = (
    "this conversation records the calls an MCP client made through the agent's gateway; "
    "chat with the agent in a new conversation"
)


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
            message = f"{refused.message} Your message was not sent; {wait_text(refused)}."
            page = error_page(
                request,
                429,
                "Too many runs started",
                message,
                draft=str(request.POST.get("message", ""))[:MAX_MESSAGE_LENGTH],
                retry_url=request.path,
            )
            return retry_after(page, refused)
        form = MessageForm(request.POST)
        if not form.is_valid():
            messages.error(request, form_problem(form))
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
    runs = list(selectors.conversation_runs(conversation=chat))
    turns = [run_transcript(run=run, user=request.user) for run in runs]
    busy = bool(turns) and not turns[-1]["terminal"]
    gateway_call = any(run.execution_path == ExecutionPath.MCP for run in runs)
    refusal = GATEWAY_CALL_NOTE if gateway_call else selectors.may_chat(user=request.user, agent=chat.agent)
    return render_page(
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
