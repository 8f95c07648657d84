"""A request's event log as people read it: names, not user ids; moments with their zone; the
tally in words; a withdrawal's reason as one plain sentence. The exact details stay behind "Show
JSON".

The one reading of an event for people: the request page (``approvals.views``) and the admin's
event log (``approvals.admin``) both show these lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.utils.dateparse import parse_datetime

from approvals import presentation, selectors
from approvals.gate import pretty_arguments
from approvals.models import ConfirmationEvent, ConfirmationRequest
from approvals.selectors import display_name
from fimone.humanize import duration_text

User = get_user_model()


_STOPPED = re.compile(r"(?:the run was cancelled: )?cancelled by (?P<who>.+)", re.IGNORECASE)

_RUN_CANCELLED = re.compile(r"the run was cancelled(?:: (?P<why>.+))?", re.IGNORECASE | re.DOTALL)


def stopped_by(reason: str, *, request: ConfirmationRequest) -> str | None:
    """Who stopped the run, when ``reason`` (a withdrawn request's) says a person did: "cancelled
    by the user" is the run's own user, who asked for the call; "cancelled by oscar" names him."""
    stopped = _STOPPED.fullmatch((reason or "").strip().rstrip("."))
    if stopped is None:
        return None
    who = stopped["who"].strip()
    if who.lower() == "the user":
        return display_name(request.requested_by) if request.requested_by_id else None
    return who


def reason_for_people(reason: str, *, request: ConfirmationRequest) -> str:
    """A withdrawal's reason as one plain sentence: the services record "the run was cancelled:
    cancelled by the user", people read "alice stopped the run". Other reasons are unchanged."""
    text = (reason or "").strip()
    if _STOPPED.fullmatch(text.rstrip(".")):
        who = stopped_by(text, request=request)
        return f"{who} stopped the run." if who else "The person who started the run stopped it."
    cancelled = _RUN_CANCELLED.fullmatch(text.rstrip("."))
    if cancelled:
        why = (cancelled["why"] or "").strip()
        return f"The run was cancelled because {why}." if why else "The run was cancelled."
    return text


#: Event details shown under their own label, and how their values read.
_EVENT_LABELS = {
    "tool": "Tool",
    "approvers": "Could decide",
    "added_approvers": "Added approvers",
    "expires_at": "Deadline",
    "channel": "Channel",
    "via": "Through",
    "vote": "Vote",
    "wanted": "Wanted",
    "status": "Verdict",
    "tool_status": "Tool outcome",
    "approvals_required": "Approvals required",
    "any_rejection_rejects": "One rejection rejects",
    "escalation_after_seconds": "Escalation after",
    "timeout_seconds": "Timeout",
    "after_seconds": "After",
    "stages": "Stages",
    "stands_in_for": "In the place of",
    "until": "Until",
    "already_asked": "Already asked",
    "stage": "Stage",
    "name": "Stage name",
    "message_id": "Message ID",
    "grant": "Standing approval",
    "granted_by": "Granted by",
    "conditions": "Conditions",
    "scope": "For",
    "attempt": "Attempt",
}

#: Details kept for the record but not worth a line (hashes, ids, the verdict's copy): in the JSON.
_EVENT_HIDDEN = frozenset(
    {
        "args_sha256",
        "proposed_args_sha256",
        "approved_args_sha256",
        "verdict",
        "channel_config_id",
        "from_channel_config_id",
        "approvals",
        "rejections",
        "required",
    }
)

_USER_LISTS = ("approvers", "added_approvers", "stands_in_for", "granted_by")

#: Details for whoever traces a request through the systems (a platform's message id, ids of
#: records): under "Technical details", closed, with the JSON.
_EVENT_TECHNICAL = frozenset({"message_id", "tool_call_id", "request_id", "run_id", "attempt", "maybe_sent"})


@dataclass(frozen=True)
class EventLine:
    """An event of a request's log as people read it: names, not user ids; moments with their
    zone; the tally in words. The exact details stay behind "Technical details"."""

    event: ConfirmationEvent
    actor: str
    rows: list[tuple[str, str]]
    details: str
    #: ids and such (:data:`_EVENT_TECHNICAL`), shown with the JSON under "Technical details"
    technical: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def lines_of(cls, request: ConfirmationRequest, events: list[ConfirmationEvent]) -> list[EventLine]:
        """The lines of ``events`` (one query for the names of every person they mention)."""
        ids = {
            user_id
            for event in events
            for key in _USER_LISTS
            for user_id in (event.details or {}).get(key) or []
            if isinstance(user_id, int)
        }
        ids |= {
            user_id
            for event in events
            for stage in (event.details or {}).get("stages") or []
            if isinstance(stage, dict)
            for user_id in stage.get("approvers") or []
            if isinstance(user_id, int)
        }
        names = {user.pk: display_name(user) for user in User.objects.filter(pk__in=ids)}
        return [cls.of(event, request=request, names=names) for event in events]

    @classmethod
    def of(
        cls, event: ConfirmationEvent, *, request: ConfirmationRequest, names: dict[int, str]
    ) -> EventLine:
        # A click from a chat platform may carry only the platform's user id; sweeps carry none.
        actor = display_name(event.actor) if event.actor_id else event.actor_external_id or "system"
        details = event.details if isinstance(event.details, dict) else {}
        people = {key: value for key, value in details.items() if key not in _EVENT_TECHNICAL}
        if event.kind == ConfirmationEvent.Kind.CANCELLED and isinstance(details.get("reason"), str):
            # A withdrawal is recorded by the system on behalf of whoever stopped the run: when its
            # reason says who, that person did it, and the reason reads as one plain sentence.
            if not event.actor_id:
                actor = stopped_by(details["reason"], request=request) or actor
            people["reason"] = reason_for_people(details["reason"], request=request)
        technical = {key: value for key, value in details.items() if key in _EVENT_TECHNICAL}
        return cls(
            event=event,
            actor=actor,
            rows=_event_rows(people, request=request, names=names),
            details=pretty_arguments(event.details) if event.details else "",
            technical=_event_rows(technical, request=request, names=names),
        )


def _event_rows(
    details: dict[str, Any], *, request: ConfirmationRequest, names: dict[int, str]
) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    if {"approvals", "required"} <= details.keys():
        tally = selectors.Tally(
            approvals=int(details.get("approvals") or 0),
            rejections=int(details.get("rejections") or 0),
            required=int(details.get("required") or 1),
            eligible=0,
        )
        rows.append(("Tally", tally.count_text))
    for key, value in details.items():
        if key in _EVENT_HIDDEN or value in (None, "", []):
            continue
        if key == "any_rejection_rejects" and int(details.get("approvals_required") or 1) <= 1:
            continue  # with one approval to give, one rejection rejects anyway: nothing to say
        label = _EVENT_LABELS.get(key) or presentation.humanized_key(key)
        rows.append((label, _event_value(key, value, request=request, names=names)))
    return rows


def _event_value(key: str, value: Any, *, request: ConfirmationRequest, names: dict[int, str]) -> str:
    if key in _USER_LISTS and isinstance(value, list):
        return ", ".join(names.get(v, f"user {v}") if isinstance(v, int) else str(v) for v in value)
    if key == "tool" and value == request.tool_name:
        return request.tool_title or presentation.title_of(request.tool_name)
    if key == "stages" and isinstance(value, list):
        return "; ".join(_stage_text(number, stage, names) for number, stage in enumerate(value, start=1))
    if key in {"channel", "via"}:
        return _channel_text(value, request=request)
    if key == "grant" and isinstance(value, int):
        return f"#{value}"
    if key == "scope" and value in presentation.SCOPE_TEXT:
        return presentation.SCOPE_TEXT[value].capitalize()
    if key == "conditions" and isinstance(value, list):
        currency = presentation.call_currency(request.tool_args, request.context)
        return presentation.conditions_text(value, currency=currency) or "None: any arguments"
    if key in {"vote", "wanted", "status", "tool_status"} and isinstance(value, str):
        return value.capitalize()
    if key in {"expires_at", "until"} and isinstance(value, str):
        moment = parse_datetime(value)
        return presentation.moment_text(moment, full=True) if moment else value
    if key in {"timeout_seconds", "after_seconds"} and isinstance(value, int | float):
        return duration_text(value)
    if key == "escalation_after_seconds" and isinstance(value, list):
        return ", ".join(duration_text(v) for v in value if isinstance(v, int | float))
    return presentation.value_text(value, key=key)


def _channel_text(value: Any, *, request: ConfirmationRequest) -> str:
    """``"web"`` → "Web inbox"; a channel configuration's id → its name when it is the request's."""
    if value == "web":
        return "Web inbox"
    if value == "grant":
        return "A standing approval (nobody was asked)"
    if isinstance(value, int):
        config = request.channel_config if request.channel_config_id == value else None
        return str(getattr(config, "name", "") or f"channel #{value}")
    return str(value).capitalize()


def _stage_text(number: int, stage: Any, names: dict[int, str]) -> str:
    """A stage as the ``created`` event recorded it: "1. Team lead (1 approval): Lee Park"."""
    if not isinstance(stage, dict):
        return str(stage)
    required = int(stage.get("approvals_required") or 1)
    people = ", ".join(
        names.get(v, f"user {v}") if isinstance(v, int) else str(v) for v in stage.get("approvers") or []
    )
    return f"{number}. {stage.get('name', '')} ({required} approval{'s' if required > 1 else ''}): {people}"
