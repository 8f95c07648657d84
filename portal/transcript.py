"""A run's stored events as the chat page's renderer reads them (``static/portal/chat.js``).

The page renders stored and live events with one renderer. Model text is never sent to it as
markup: the only HTML it inserts is what :func:`portal.markdown.render_markdown` produced, keyed
by the seq of the event it belongs to; everything else is set as text.
"""

from __future__ import annotations

import uuid
from typing import Any

from agents import events as ev
from agents.models import Run, RunEvent
from approvals import selectors as approval_selectors
from portal.markdown import render_markdown
from portal.selectors import request_states

MARKDOWN_EVENTS = {ev.LLM_MESSAGE: "content", ev.RUN_COMPLETED: "output"}
"""Events whose model text the page shows formatted, and the payload key holding it."""


def markdown_of(event: RunEvent) -> str | None:
    """The sanitised HTML of ``event``'s model text, or ``None`` if it carries none."""
    key = MARKDOWN_EVENTS.get(event.type)
    if key is None:
        return None
    text = event.payload.get(key) if isinstance(event.payload, dict) else None
    if not isinstance(text, str) or not text.strip():
        return None
    return render_markdown(text)


def run_transcript(*, run: Run, user: Any) -> dict[str, Any]:
    """One turn of a conversation for the page: the user's message (``path``: where it came from,
    e.g. an MCP client's call), the run's status, its stored
    events, the formatted text of its messages, where each of its approval requests stands now
    (``requests``: votes so far, a withdrawal the events do not record) and which of its pending
    approvals ``user`` may decide right there."""
    events = sorted(run.events.all(), key=lambda e: e.seq)
    html: dict[str, str] = {}
    request_ids: list[str] = []
    for event in events:
        rendered = markdown_of(event)
        if rendered is not None:
            html[str(event.seq)] = rendered
        if event.type == ev.APPROVAL_PENDING and isinstance(event.payload, dict):
            request_ids.append(str(event.payload.get("request_id")))
    return {
        "id": run.pk,
        "input": run.input,
        "path": run.execution_path,
        "status": run.status,
        "terminal": run.is_terminal,
        "events": [event.as_message() for event in events],
        "html": html,
        "requests": request_states(request_ids=request_ids),
        "decidable": [rid for rid in request_ids if _may_decide(request_id=rid, user=user)],
    }


def _may_decide(*, request_id: str, user: Any) -> bool:
    try:
        parsed = uuid.UUID(request_id)
    except ValueError:  # a malformed id in a payload is simply not decidable
        return False
    request = approval_selectors.request_get(request_id=parsed, user=user)
    return request is not None and approval_selectors.may_decide(request=request, user=user)
