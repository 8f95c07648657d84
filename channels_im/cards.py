"""What every card shows, whatever the platform: the facts of a request, prepared once."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from approvals.presentation import title_of
from approvals.selectors import current_stage_votes, display_name, stages_of, tally_of, votes_of

#: Arguments longer than this (pretty-printed) are cut on cards, with a link to the full request in
#: the portal. Feishu cards must stay under 30 KB and Slack text blocks under 3,000 characters.
ARGS_CARD_LIMIT = 2000


@dataclass(frozen=True)
class CardFacts:
    request_id: str
    agent: str
    requester: str
    tool: str
    args_text: str
    args_truncated: bool
    link: str
    expires_at: str
    status: str
    decided_by: str | None
    decided_at: str | None
    reason: str
    #: The quorum's progress with who voted ("1 of 2 approvals: april approved 10:02 UTC — waiting
    #: for one more"); empty when one approval is enough.
    tally: str = ""
    #: More lines for a pending card (an escalation, where to edit the arguments).
    notes: tuple[str, ...] = ()
    #: The tool's internal name (``tool`` is its title, as people read it).
    tool_name: str = ""
    #: What the call is about, as "Label: value" lines (the request's context: the business
    #: fields its context action read, else its arguments with numbers written for people).
    about: tuple[str, ...] = ()
    #: A staged request's stages, a line each ("Stage 1 of 2 — Team lead (1 approval): approved — …").
    stages: tuple[str, ...] = ()

    @property
    def waiting_lines(self) -> list[str]:
        """What a pending card says under its arguments: what the call is about, the deadline,
        the tally, the notes."""
        return [
            *self.about,
            f"Expires at {self.expires_at}",
            *self.stages,
            *([self.tally] if self.tally else []),
            *self.notes,
        ]

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    @property
    def outcome_line(self) -> str:
        """One line for the updated card, e.g. "Approved by April Chen at 2026-11-30 10:02 UTC"."""
        if self.status == "expired":
            return f"Expired at {self.decided_at} — nobody decided in time"
        if self.status == "cancelled":
            return f"Cancelled at {self.decided_at}"
        line = f"{self.status.capitalize()} by {self.decided_by} at {self.decided_at}"
        return f"{line} — {self.reason}" if self.reason else line


def _when(value: Any) -> str | None:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value is not None else None


def card_facts(request: Any) -> CardFacts:
    """Facts of ``request`` (with ``agent``, ``requested_by`` and ``responded_by`` loadable)."""
    stages = stages_of(request=request) if getattr(request, "stage_plan", None) else []
    tally = tally_of(request=request) if getattr(request, "approvals_required", 1) > 1 else None
    # A staged request's tally counts its current stage's votes only.
    votes = current_stage_votes(request=request, stages=stages) if stages else None
    tally_text = tally.text_with(votes if votes is not None else votes_of(request=request)) if tally else ""
    text = json.dumps(request.tool_args, indent=2, ensure_ascii=False, sort_keys=True)
    truncated = len(text) > ARGS_CARD_LIMIT
    if truncated:
        text = text[:ARGS_CARD_LIMIT] + "\n…"
    link = f"{settings.SITE_URL}/approvals/{request.pk}/"
    return CardFacts(
        request_id=str(request.pk),
        agent=request.agent.name,
        requester=display_name(request.requested_by),
        tool=getattr(request, "tool_title", "") or title_of(request.tool_name),
        tool_name=request.tool_name,
        about=tuple(_about(request)),
        args_text=text,
        args_truncated=truncated,
        link=link,
        expires_at=_when(request.expires_at) or "",
        status=str(request.status),
        decided_by=display_name(request.responded_by) if request.responded_by_id else None,
        decided_at=_when(request.responded_at),
        reason=request.reason,
        tally=tally_text,
        notes=tuple(_notes(request, link)),
        stages=tuple(stage.text for stage in stages),
    )


#: Context lines on a card at most, and characters per line: a card is a glance, the inbox has it all.
ABOUT_LINES = 8
ABOUT_LINE_CHARS = 160


def _about(request: Any) -> list[str]:
    lines = []
    for item in (getattr(request, "context", None) or [])[:ABOUT_LINES]:
        if isinstance(item, dict) and item.get("label"):
            line = f"{item['label']}: {item.get('value', '')}"
            lines.append(line if len(line) <= ABOUT_LINE_CHARS else line[: ABOUT_LINE_CHARS - 1] + "…")
    return lines


def _notes(request: Any, link: str) -> list[str]:
    """Lines only a pending card shows. Buttons cannot edit arguments: the card says where to."""
    notes = []
    level = getattr(request, "escalation_level", 0)
    if level:
        notes.append(f"Escalated: nobody decided in time, so more approvers were asked (tier {level})")
    if getattr(request, "allow_edit_on_approve", False):
        notes.append(f"To change the arguments before approving, open the web inbox: {link}")
    return notes
