"""The approval record as CSV, streamed row by row.

The rows come from the database in chunks (``QuerySet.iterator(chunk_size=…)``, with the approver
snapshots prefetched per chunk), so exporting 100,000 requests holds one chunk in memory, never the
list. Cells are made safe for spreadsheets: a value that a spreadsheet would read as a formula
(``=``, ``+``, ``-``, ``@``, tab, carriage return first) is prefixed with an apostrophe — the
arguments were written by an LLM and may be hostile.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from typing import Any

from django.db.models import QuerySet

from approvals.models import ConfirmationRequest
from approvals.selectors import display_name

CHUNK_SIZE = 2000
HEADER = (
    "id",
    "created_at",
    "organization",
    "agent",
    "tool",
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
)
HEAVY_FIELDS = (
    "agent__model_config_json",
    "agent__secrets",
    "agent__instructions",
    "run__input",
    "run__output",
    "run__checkpoint",
    "run__hook_chain",
)
"""Columns of the related rows the export never reads (large, or secret)."""
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> str:
    """``value`` as a CSV cell a spreadsheet shows as text, never evaluates."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


class _Echo:
    """A file-like object whose ``write`` hands the line back (csv.writer writes one row at a time)."""

    def write(self, value: str) -> str:
        return value


def _row(request: ConfirmationRequest) -> tuple[Any, ...]:
    decided = request.responded_at
    approvers = "; ".join(sorted(display_name(user) for user in request.approvers.all()))
    if request.responded_by_id:
        decider = display_name(request.responded_by)
    else:
        decider = request.responded_by_external_id
    return (
        request.pk,
        request.created_at.isoformat(),
        request.organization.name,
        request.agent.name,
        request.tool_name,
        json.dumps(request.tool_args, ensure_ascii=False, sort_keys=True),
        request.status,
        display_name(request.requested_by),
        approvers,
        decider,
        decided.isoformat() if decided else "",
        round((decided - request.created_at).total_seconds()) if decided else "",
        request.reason,
        request.channel,
        request.run_id,
        "yes" if request.run.hooks_bypassed else "no",
        request.args_sha256,
    )


def history_csv_lines(requests: QuerySet[ConfirmationRequest]) -> Iterator[str]:
    """The CSV text of ``requests`` (header first), one line at a time."""
    writer = csv.writer(_Echo())
    yield writer.writerow(HEADER)
    rows: Iterable[ConfirmationRequest] = (
        requests.select_related("organization", "agent", "requested_by", "responded_by", "run")
        .defer(*HEAVY_FIELDS)
        .prefetch_related("approvers")
        .iterator(chunk_size=CHUNK_SIZE)
    )
    for request in rows:
        yield writer.writerow([safe_cell(cell) for cell in _row(request)])
