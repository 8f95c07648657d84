"""Reads of confirmation requests, one module per question:

- :mod:`~approvals.selectors.requests`: one request, a user's inbox, an event log, a person's name;
- :mod:`~approvals.selectors.votes`: the votes on a request and its tally;
- :mod:`~approvals.selectors.access`: who may read, decide or audit what (and the runs behind);
- :mod:`~approvals.selectors.history`: the auditor's record of requests and tool calls.

Each imports only those above it in this list. Every read other apps make is re-exported here, as
the package's API.
"""

from approvals.selectors.absences import AbsencesOf, absences_of
from approvals.selectors.access import (
    AUDIT_ROLES,
    audited_organization_ids,
    may_decide,
    may_use_inbox,
    may_view_history,
    request_get,
    requests_get,
    requests_of_run,
    requests_visible_to,
    run_for_transcript,
    run_visible_to,
    runs_visible_to,
)
from approvals.selectors.grants import GrantOffer, grant_offers, grants_in_force
from approvals.selectors.history import (
    TOOL_CALL_COLUMNS,
    TOOL_CALL_STATUSES,
    HistoryFilters,
    history_channels,
    history_for,
    history_people,
    tool_calls_for,
)
from approvals.selectors.requests import (
    display_name,
    inbox_for,
    request_events,
    request_for_call,
    request_for_decision,
    request_status,
    stand_in_for,
)
from approvals.selectors.stages import (
    StageLine,
    current_stage_votes,
    stage_heading,
    stage_vote_summary,
    stages_of,
)
from approvals.selectors.votes import (
    Tally,
    VoteLine,
    has_voted,
    may_edit_arguments,
    seat_taken,
    tally_of,
    vote_summary,
    votes_by_request,
    votes_of,
)

__all__ = [
    "AUDIT_ROLES",
    "TOOL_CALL_COLUMNS",
    "TOOL_CALL_STATUSES",
    "AbsencesOf",
    "GrantOffer",
    "HistoryFilters",
    "StageLine",
    "Tally",
    "VoteLine",
    "absences_of",
    "audited_organization_ids",
    "current_stage_votes",
    "display_name",
    "grant_offers",
    "grants_in_force",
    "has_voted",
    "history_channels",
    "history_for",
    "history_people",
    "inbox_for",
    "may_decide",
    "may_edit_arguments",
    "may_use_inbox",
    "may_view_history",
    "request_events",
    "request_for_call",
    "request_for_decision",
    "request_get",
    "request_status",
    "requests_get",
    "requests_of_run",
    "requests_visible_to",
    "run_for_transcript",
    "run_visible_to",
    "runs_visible_to",
    "seat_taken",
    "stage_heading",
    "stage_vote_summary",
    "stages_of",
    "stand_in_for",
    "tally_of",
    "tool_calls_for",
    "vote_summary",
    "votes_by_request",
    "votes_of",
]
