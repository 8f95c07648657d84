"""What ``manage.py audit_verify`` checks besides the links of each chain (docs/design.md §1.15): that
every organisation whose history calls for a chain has one, and that every request's verdict is
the one its organisation's chain recorded. Selectors: they read, never write."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, TextField
from django.db.models.functions import Cast

from agents.models import ConnectorCallLog, Run, ToolExecution
from approvals.models import VERDICT_EVENT_KIND, ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from hooks.builtin import tool_matches

#: The kinds of the events that settle a request.
SETTLING_KINDS = frozenset(VERDICT_EVENT_KIND.values())


def organisations_owing_a_chain() -> dict[str, dict[int, str]]:
    """``{chain label: {organisation id: why it must have that chain}}``: every organisation with
    confirmation requests must have a chain of confirmation events (each request's ``created``
    event is a link), and every organisation whose runs executed a tool that an ``audit_log``
    hook recorded must have a chain of connector call logs. A chain missing there, head and all,
    was deleted."""
    requests = (
        ConfirmationRequest.objects.order_by()
        .values("organization_id")
        .annotate(count=Count("pk"))
        .values_list("organization_id", "count")
    )
    owing = {
        ConfirmationEvent._meta.label_lower: {
            organization_id: f"it has {count} confirmation request{'s' if count != 1 else ''}"
            for organization_id, count in requests
        },
        ConnectorCallLog._meta.label_lower: {
            organization_id: "its runs executed tool calls that an audit_log hook records"
            for organization_id in _organisations_with_audited_calls()
        },
    }
    return owing


def _audit_log_patterns(chain: Any) -> list[tuple[str, ...]]:
    """The tool patterns of each ``audit_log`` hook of a run's recorded hook chain (one that
    applies to every call of its patterns: a matcher narrows it in ways not read here)."""
    if not isinstance(chain, dict):
        return []
    patterns = []
    for record in chain.get("declared") or []:
        if not isinstance(record, dict) or record.get("name") != "audit_log" or record.get("matcher"):
            continue
        tools = (record.get("params") or {}).get("tools", "*")
        patterns.append((tools,) if isinstance(tools, str) else tuple(t for t in tools if isinstance(t, str)))
    return patterns


def _organisations_with_audited_calls() -> set[int]:
    found: set[int] = set()
    runs = (
        Run.objects.filter(tool_executions__isnull=False)
        .annotate(chain_text=Cast("hook_chain", TextField()))
        .filter(chain_text__contains='"audit_log"')
        .order_by()
        .values_list("pk", "agent__organization_id", "hook_chain")
        .distinct()
    )
    for run_id, organization_id, chain in runs.iterator(chunk_size=500):
        if organization_id in found:
            continue
        patterns = _audit_log_patterns(chain)
        if not patterns:
            continue
        names = ToolExecution.objects.filter(run_id=run_id).values_list("tool_name", flat=True)
        if any(tool_matches(name, group) for name in names for group in patterns):
            found.add(organization_id)
    return found


@dataclass(frozen=True)
class VerdictFinding:
    """A request whose verdict is not the one its organisation's chain recorded."""

    request_id: uuid.UUID
    problem: str

    def __str__(self) -> str:
        return f"request {self.request_id}: {self.problem}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def verdict_findings(*, organization_id: int) -> list[VerdictFinding]:
    """Every request of the organisation whose verdict columns differ from what the event that
    settled it recorded (``details["verdict"]``, :meth:`ConfirmationRequest.verdict_record`), and
    every request settled with no such event, with more than one, or set back to pending after
    one. Events written before verdicts were recorded are checked on what they hold (kind,
    status, decider, reason)."""
    settling: dict[uuid.UUID, list[tuple[int, str, int | None, dict[str, Any], Any]]] = defaultdict(list)
    events = (
        ConfirmationEvent.objects.filter(organization_id=organization_id, kind__in=SETTLING_KINDS)
        .order_by("chain_seq")
        .values_list("request_id", "chain_seq", "kind", "actor_id", "details", "created_at")
    )
    for request_id, seq, kind, actor_id, details, created_at in events.iterator(chunk_size=2000):
        settling[request_id].append(
            (seq, kind, actor_id, details if isinstance(details, dict) else {}, created_at)
        )
    requests = (
        ConfirmationRequest.objects.filter(organization_id=organization_id)
        .order_by("created_at", "pk")
        .only(
            "pk",
            "status",
            "responded_by_id",
            "responded_by_external_id",
            "responded_at",
            "reason",
            "args_sha256",
            "tool_args",
        )
    )
    findings = []
    for request in requests.iterator(chunk_size=1000):
        problem = _verdict_problem(request, settling.get(request.pk, []))
        if problem is not None:
            findings.append(VerdictFinding(request.pk, problem))
    return findings


def _verdict_problem(
    request: ConfirmationRequest, events: list[tuple[int, str, Any, dict[str, Any], Any]]
) -> str | None:
    status = str(request.status)
    if status == ConfirmationStatus.PENDING:
        if events:
            seq, kind = events[0][0], events[0][1]
            return f"it is pending, but link #{seq} settled it ({kind}): it was set back to pending"
        return None
    if not events:
        return (
            f"it is {status}, but no link of its organisation's chain settled it "
            "(settled behind the platform's back?)"
        )
    if len(events) > 1:
        links = ", ".join(f"#{event[0]}" for event in events)
        return f"links {links} each settled it: a request is settled once"
    seq, kind, actor_id, details, created_at = events[0]
    if kind != VERDICT_EVENT_KIND.get(status):
        return f"it is {status}, but link #{seq} settled it as {kind}"
    recorded = details.get("verdict")
    if isinstance(recorded, dict):
        current = request.verdict_record()
        changed = [
            f"{field} {_shown(recorded.get(field))} when settled, {_shown(current.get(field))} now"
            for field in sorted(set(recorded) | set(current))
            if recorded.get(field) != current.get(field)
        ]
    else:  # settled before verdicts were recorded: what the event holds
        changed = []
        if "status" in details and details["status"] != status:
            changed.append(f"status {_shown(details['status'])} when settled, {_shown(status)} now")
        if kind == "decided" and actor_id != request.responded_by_id:
            changed.append(
                f"responded_by {_shown(actor_id)} when settled, {_shown(request.responded_by_id)} now"
            )
        if "reason" in details and details["reason"] != request.reason:
            changed.append(f"reason {_shown(details['reason'])} when settled, {_shown(request.reason)} now")
    if changed:
        return f"its verdict differs from the one link #{seq} recorded (edited?): " + "; ".join(changed)
    if request.responded_at is None or request.responded_at > created_at:
        return f"its decision time {request.responded_at} is not before link #{seq} that settled it (edited?)"
    return None
