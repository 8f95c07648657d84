"""The chat page's controls: stop the run in progress, send the last message again, rename,
archive and restore a conversation. Each answers JSON to the page's script, or redirects back
with a flash message without it; another user's conversation is a 404."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from agents.apis import RunStartThrottle
from agents.models import Conversation
from agents.services import (
    conversation_archive,
    conversation_rename,
    conversation_unarchive,
    run_cancel,
    run_retry,
)
from fimone.errors import ServiceError
from portal import selectors
from portal.views.chat_forms import RenameForm, form_problem
from portal.views.errors import error_page
from portal.views.responses import as_sentence, retry_after, wait_text, wants_json
from portal.views.sign_in import signed_in


def _own_conversation(request: HttpRequest, conversation_id: int) -> Conversation:
    chat = selectors.conversation_for_chat(conversation_id=conversation_id, user=request.user)
    if chat is None:
        raise Http404("No such conversation.")
    return chat


def _done(
    request: HttpRequest, chat: Conversation, *, ok: bool, message: str, status: int = 200
) -> HttpResponse:
    """Answer JSON to the page's script, else go back to the conversation with a flash message."""
    if wants_json(request):
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
        return _done(request, chat, ok=False, message=as_sentence(error.message), status=409)
    return _done(request, chat, ok=True, message="Stopped: the agent does nothing more for this message.")


@signed_in
@require_POST
def conversation_retry(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Send the conversation's last message again, as a new run (counted like any message)."""
    chat = _own_conversation(request, conversation_id)
    refused = RunStartThrottle().refusal(request)
    if refused is not None:
        message = f"{refused.message} Nothing was started; {wait_text(refused)}."
        return retry_after(error_page(request, 429, "Too many runs started", message), refused)
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
        return _done(request, chat, ok=False, message=form_problem(form), status=400)
    try:
        renamed = conversation_rename(conversation=chat, user=request.user, title=form.cleaned_data["title"])
    except ServiceError as error:
        if error.code == "not_found":
            raise Http404("No such conversation.") from None
        return _done(request, chat, ok=False, message=f"Check the title: {error.message}.", status=400)
    if wants_json(request):
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
        messages.error(request, as_sentence(error.message))
    else:
        messages.success(request, "Restored: the conversation is back in your list.")
    return redirect("portal:conversation", conversation_id=chat.pk)
