"""The approval record as CSV, streamed row by row.

The rows come from the database in chunks (``QuerySet.iterator(chunk_size=…)`` over plain
tuples, with the approver snapshots and the votes read once per chunk), so exporting 100,000
requests holds one chunk in memory, never the list. Cells are made safe for spreadsheets: a
value that a spreadsheet would read as a formula (``=``, ``+``, ``-``, ``@``, tab, carriage return
first) is prefixed with an apostrophe — the arguments were written by an LLM and may be hostile.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast

from agents.tools.base import readable_tool_name
from approvals.models import ConfirmationApprover, ConfirmationRequest, ConfirmationVote
from approvals.presentation import summary_of

CHUNK_SIZE = 2000
HEADER = (
    "id",
    "created_at",
    "organization",
    "agent",
    "tool",
    "title",
    "about",
    "arguments",
    "status",
    "requested_by",
    "approvers",
    "decided_by",
    "decided_at",
    "seconds_to_decision",
    "reason",
    "channel",
    "run",
    "hooks_bypassed",
    "args_sha256",
    "votes",
)
"""``title``: the tool as people read it; ``about``: what the call was about in one line, as the
history page's "What" column says it ("PO-1001 · Lumen Office Supplies · 1,200.00 USD",
:func:`approvals.presentation.summary_of`); ``decided_by``: everyone who voted on the request, in
the order they voted (a quorum's every approver, not only the last), else whoever settled it;
``seconds_to_decision``: never below 0 (a standing approval's is 0); ``votes``: each vote with its moment and
reason ("april approved 2026-11-30T10:02:00+00:00; …")."""
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> str:
    """``value`` as a CSV cell a spreadsheet shows as text, never evaluates."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


class _Echo:
    """A file-like object whose ``write`` hands the line back (csv.writer writes one row at a time)."""

    def write(self, value: str) -> str:
        return value


_COLUMNS = (
    "pk",
    "created_at",
    "organization__name",
    "agent__name",
    "tool_name",
    "tool_title",
    "tool_args",
    "context",
    "status",
    "requested_by__username",
    "requested_by__first_name",
    "requested_by__last_name",
    "responded_by__username",
    "responded_by__first_name",
    "responded_by__last_name",
    "responded_by_external_id",
    "responded_at",
    "reason",
    "channel",
    "run_id",
    "run__hooks_bypassed",
    "args_sha256",
)
"""Read as plain tuples: 100,000 rows never become 700,000 model instances."""
_JSON_COLUMNS = ("tool_args", "context")
"""Read as the database's JSON text: the arguments are written out as they are, without decoding
and encoding them again."""


def _about(args: str | None, context: str | None) -> str:
    """The one line a history row says the call was about, from the stored JSON texts."""
    try:
        return summary_of(json.loads(args or "null"), json.loads(context or "null"))
    except ValueError:  # stored JSON is valid; a cell is not worth failing an export over
        return ""


def _name(username: str | None, first: str | None, last: str | None) -> str:
    """What :func:`approvals.selectors.display_name` shows, from the columns."""
    full = f"{first or ''} {last or ''}".strip()
    return full or username or ""


def _approvers_of(request_ids: list[Any]) -> dict[Any, str]:
    names: dict[Any, list[str]] = {}
    snapshot = ConfirmationApprover.objects.filter(request_id__in=request_ids).values_list(
        "request_id", "user__username", "user__first_name", "user__last_name"
    )
    for request_id, username, first, last in snapshot:
        names.setdefault(request_id, []).append(_name(username, first, last))
    return {request_id: "; ".join(sorted(people)) for request_id, people in names.items()}


def _votes_of(request_ids: list[Any]) -> dict[Any, tuple[str, str]]:
    """``{request_id: (voters, votes)}``: the voters' names, and each vote in words."""
    voters: dict[Any, list[str]] = {}
    votes: dict[Any, list[str]] = {}
    rows = (
        ConfirmationVote.objects.filter(request_id__in=request_ids)
        .order_by("created_at", "pk")
        .values_list(
            "request_id",
            "user__username",
            "user__first_name",
            "user__last_name",
            "approve",
            "created_at",
            "reason",
        )
    )
    for request_id, username, first, last, approve, at, reason in rows:
        name = _name(username, first, last)
        voters.setdefault(request_id, []).append(name)
        said = f"{name} {'approved' if approve else 'rejected'} {at.isoformat()}" + (
            f": {reason}" if reason else ""
        )
        votes.setdefault(request_id, []).append(said)
    return {
        request_id: ("; ".join(voters[request_id]), "; ".join(votes[request_id])) for request_id in voters
    }


def _chunks(rows: Iterator[tuple[Any, ...]], size: int) -> Iterator[list[tuple[Any, ...]]]:
    chunk: list[tuple[Any, ...]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def history_csv_lines(requests: QuerySet[ConfirmationRequest]) -> Iterator[str]:
    """The CSV text of ``requests`` (header first), one line at a time; the approver snapshots
    are read once per chunk."""
    writer = csv.writer(_Echo())
    yield writer.writerow(HEADER)
    columns = [Cast(c, TextField()) if c in _JSON_COLUMNS else c for c in _COLUMNS]
    rows = requests.values_list(*columns).iterator(chunk_size=CHUNK_SIZE)
    for chunk in _chunks(rows, CHUNK_SIZE):
        approvers = _approvers_of([row[0] for row in chunk])
        votes = _votes_of([row[0] for row in chunk])
        for (
            pk, created, organization, agent, tool, title, args, context, status, r_user, r_first, r_last,
            d_user, d_first, d_last, d_external, decided, reason, channel, run_id, bypassed, sha,
        ) in chunk:  # fmt: skip
            voters, said = votes.get(pk, ("", ""))
            decider = voters or (_name(d_user, d_first, d_last) if d_user else d_external)
            cells = (
                pk,
                created.isoformat(),
                organization,
                agent,
                tool,
                title or readable_tool_name(tool),
                _about(args, context),
                args,
                status,
                _name(r_user, r_first, r_last),
                approvers.get(pk, ""),
                decider,
                decided.isoformat() if decided else "",
                max(0, round((decided - created).total_seconds())) if decided else "",
                reason,
                channel,
                run_id,
                "yes" if bypassed else "no",
                sha,
                said,
            )
            yield writer.writerow([safe_cell(cell) for cell in cells])


TOOL_CALL_HEADER = (
    "at",
    "tool",
    "status",
    "run",
    "tool_call_id",
    "agent",
    "organization",
    "requested_by",
    "duration_ms",
    "blocked_by_and_message",
    "hooks_bypassed",
)


def tool_calls_csv_lines(rows: QuerySet[Any]) -> Iterator[str]:
    """The CSV text of tool-call rows (``approvals.selectors.tool_calls_for``), streamed."""
    writer = csv.writer(_Echo())
    yield writer.writerow(TOOL_CALL_HEADER)
    for row in rows.iterator(chunk_size=CHUNK_SIZE):
        at = row["at"]
        took = row["took_ms"]
        cells = (
            at.isoformat() if at else "",
            row["tool"],
            row["state"],
            row["run_ref"],
            row["call_id"],
            row["agent_name"],
            row["organization_name"],
            row["requester"],
            "" if took is None else round(took),
            row["detail"],
            "yes" if row["bypassed"] else "no",
        )
        yield writer.writerow([safe_cell(cell) for cell in cells])
