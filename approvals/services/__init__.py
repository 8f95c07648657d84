"""The only writers of confirmation requests (docs/design.md §1.4, §5), one module per step of a request's
life, each importing only the steps below it:

- :mod:`~approvals.services.event_log`: the request's event log, which every step appends to;
- :mod:`~approvals.services.settling`: after a verdict or a vote, waking the waiter, resuming the
  run and telling the inboxes, the cards and the run's stream;
- :mod:`~approvals.services.opening`: opening a request for a gated call;
- :mod:`~approvals.services.editing`: an approver's edit of the arguments;
- :mod:`~approvals.services.deciding`: votes and verdicts, from the inbox, the API or a card;
- :mod:`~approvals.services.card_clicks`: the common card click, decided in two statements on the event loop;
- :mod:`~approvals.services.batches`: several requests decided at once, each as alone;
- :mod:`~approvals.services.deadlines`: escalation and expiry, as time passes;
- :mod:`~approvals.services.cancelling`: withdrawal when the run is cancelled.

What other apps call is re-exported here, as the package's API. A test that replaces one of these
functions patches the module that calls it (``approvals.services.deciding.verdict_follow_up``, say),
not this package: the modules look their neighbours up in their own namespace.
"""

from approvals.services.batches import (
    MAX_BATCH,
    BatchItem,
    BatchLine,
    BatchTooLarge,
    check_batch,
    confirmation_decide_batch,
)
from approvals.services.cancelling import confirmation_cancel
from approvals.services.card_clicks import (
    clicks_on_the_loop,
    confirmation_decide_click_async,
)
from approvals.services.deadlines import confirmation_escalate_due, confirmation_expire_due
from approvals.services.deciding import (
    ARGS_CHANGED,
    INVALID_EDIT,
    MAX_REASON_LENGTH,
    RECORDED,
    DecisionOutcome,
    clean_text,
    confirmation_decide,
)
from approvals.services.editing import edit_problem
from approvals.services.event_log import confirmation_log_executed, log_event
from approvals.services.opening import NoApprovers, Opened, confirmation_request_open
from approvals.services.settling import announce_settled, runs_resume_orphaned

__all__ = [
    "ARGS_CHANGED",
    "INVALID_EDIT",
    "MAX_BATCH",
    "MAX_REASON_LENGTH",
    "RECORDED",
    "BatchItem",
    "BatchLine",
    "BatchTooLarge",
    "DecisionOutcome",
    "NoApprovers",
    "Opened",
    "announce_settled",
    "check_batch",
    "clean_text",
    "clicks_on_the_loop",
    "confirmation_cancel",
    "confirmation_decide",
    "confirmation_decide_batch",
    "confirmation_decide_click_async",
    "confirmation_escalate_due",
    "confirmation_expire_due",
    "confirmation_log_executed",
    "confirmation_request_open",
    "edit_problem",
    "log_event",
    "runs_resume_orphaned",
]
