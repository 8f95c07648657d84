"""The portal's pages (mounted at ``/``): home, conversations, the chat page and its small JSON
endpoints, sign-in, and the friendly error pages.

Thin views: validate, one selector or service call, render. Another user's conversation, run or
request answers 404 — the same page as an unknown id, so ids reveal nothing across organisations.
Writes go through the services of the apps below (``agents.services.run_start``,
``approvals.services.confirmation_decide``); no rule of theirs is re-implemented here. Run starts
and decisions count against the same per-user rates as the API's (``RUN_START_RATE``,
``DECISION_RATE``): past them a 429 with ``Retry-After``, and nothing is started or decided.

Its modules, the pages first, then what they share (none imports a module listed before it):

- :mod:`~portal.views.home_pages`: home, the agents page, the conversation list and search;
- :mod:`~portal.views.chat`: a new conversation with an agent, and a conversation's chat page;
- :mod:`~portal.views.chat_controls`: stop, send again, rename, archive, restore;
- :mod:`~portal.views.runs`: a run's transcript page and the formatted text of its events;
- :mod:`~portal.views.approval_requests`: a request's state and a decision from the chat page;
- :mod:`~portal.views.chat_forms`: the chat page's forms and their problems in words;
- :mod:`~portal.views.errors`: the friendly error pages (``fimone.urls``'s handlers);
- :mod:`~portal.views.responses`: a page with the layout's context, JSON answers, refusals;
- :mod:`~portal.views.sign_in`: sign-in, sign-out and the ``signed_in`` decorator.

The views are importable from the package itself too (``fimone.urls`` names the error handlers
as ``portal.views.<handler>``).
"""

from __future__ import annotations

from portal.views.approval_requests import request_decide, request_state
from portal.views.chat import agent_chat, conversation
from portal.views.chat_controls import (
    conversation_archive_view,
    conversation_rename_view,
    conversation_restore,
    conversation_retry,
    conversation_stop,
)
from portal.views.chat_forms import (
    MAX_MESSAGE_LENGTH,
    MAX_REASON_LENGTH,
    DecisionForm,
    MessageForm,
    RenameForm,
)
from portal.views.errors import bad_request, page_not_found, permission_denied, server_error
from portal.views.home_pages import agents_page, conversation_list, home
from portal.views.runs import event_html, run_page
from portal.views.sign_in import LOGIN_URL, login, logout, signed_in

__all__ = [
    "LOGIN_URL",
    "MAX_MESSAGE_LENGTH",
    "MAX_REASON_LENGTH",
    "DecisionForm",
    "MessageForm",
    "RenameForm",
    "agent_chat",
    "agents_page",
    "bad_request",
    "conversation",
    "conversation_archive_view",
    "conversation_list",
    "conversation_rename_view",
    "conversation_restore",
    "conversation_retry",
    "conversation_stop",
    "event_html",
    "home",
    "login",
    "logout",
    "page_not_found",
    "permission_denied",
    "request_decide",
    "request_state",
    "run_page",
    "server_error",
    "signed_in",
]
