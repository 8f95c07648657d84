"""The web inbox of approvers and the auditor's record (mounted at ``/approvals/``), one module per
audience:

- :mod:`~approvals.views.inbox`: the approver's pages (the inbox, one request, deciding);
- :mod:`~approvals.views.history`: the auditor's record of requests and tool calls;
- :mod:`~approvals.views.downloads`: that record as CSV;
- :mod:`~approvals.views.queue_health`: the queue's health (times to decision, what waits, expiry,
  approver load), as a page and as CSV;
- :mod:`~approvals.views.absences`: an approver's absence and stand-in, an admin's reassignment;
- :mod:`~approvals.views.grants`: the standing approvals in force, and revoking one;
- :mod:`~approvals.views.sign_in`: the answer to a locked-out sign-in.

They share :mod:`~approvals.views.layout` (the page frame) and :mod:`~approvals.views.cards` (a
request as pages show it). Arguments shown here were produced by an LLM: they are rendered as
text (autoescaped) inside ``<pre>``, never as markup.

The views ``approvals.urls`` routes to, and the lockout answer the settings name
(``AXES_LOCKOUT_CALLABLE``), are re-exported here.
"""

from approvals.views.absences import away
from approvals.views.downloads import history_export, tool_calls_export
from approvals.views.grants import grants
from approvals.views.history import history, tool_calls
from approvals.views.inbox import inbox, inbox_live, request_decide, request_decide_batch, request_detail
from approvals.views.queue_health import queue_health_export, queue_health_page
from approvals.views.sign_in import login_locked_out

__all__ = [
    "away",
    "grants",
    "history",
    "history_export",
    "inbox",
    "inbox_live",
    "login_locked_out",
    "queue_health_export",
    "queue_health_page",
    "request_decide",
    "request_decide_batch",
    "request_detail",
    "tool_calls",
    "tool_calls_export",
]
