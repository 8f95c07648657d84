"""Block Kit layout of an approval card: the facts every channel shows, within Slack's limits.

Limits (Block Kit reference): a header's text ≤ 150 characters, a section's text ≤ 3,000, each
section field ≤ 2,000. Text of ``mrkdwn`` objects must have ``&``, ``<`` and ``>`` escaped, and an
escaped entity counts with its full length, so text is cut *after* escaping, never inside an entity.
"""

from __future__ import annotations

from typing import Any

from channels_im.cards import CardFacts

ACTIONS_BLOCK_ID = "fimone_approval"
"""``block_id`` of the buttons; clicks come back with it."""
OUTCOME_BLOCK_ID = "fimone_outcome"
APPROVE = "approve"
REJECT = "reject"

HEADER_TEXT_LIMIT = 150
SECTION_TEXT_LIMIT = 3000
FIELD_TEXT_LIMIT = 2000

Block = dict[str, Any]

_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_ZERO_WIDTH_SPACE = "\u200b"
_OUTCOME_EMOJI = {
    "approved": ":white_check_mark:",
    "rejected": ":x:",
    "expired": ":hourglass:",
    "cancelled": ":no_entry_sign:",
}


def escape(text: str) -> str:
    """``text`` safe inside ``mrkdwn``: no mentions, links or entities can be smuggled in."""
    return "".join(_ESCAPES.get(char, char) for char in text)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _escaped_within(text: str, budget: int, *, code: bool = False) -> tuple[str, bool]:
    """``text`` escaped for ``mrkdwn`` and cut to at most ``budget`` characters, never inside an
    entity. Returns the text and whether it was cut.

    With ``code`` (the body of a ```` ``` ```` block), two backticks in a row get a zero-width
    space between them, so an argument containing ```` ``` ```` cannot close the code block early
    and format the rest of the card, while the approver still reads the same characters.
    """
    pieces: list[str] = []
    used = 0
    previous = ""
    for char in text:
        piece = _ESCAPES.get(char, char)
        if code and char == "`" and previous == "`":
            piece = _ZERO_WIDTH_SPACE + piece
        if used + len(piece) > budget:
            return "".join(pieces), True
        pieces.append(piece)
        used += len(piece)
        previous = char
    return "".join(pieces), False


def _link(facts: CardFacts, label: str) -> str:
    return f"<{facts.link}|{label}>"


def arguments_text(facts: CardFacts) -> str:
    """The arguments section: pretty-printed JSON in a code block, cut to fit one section with a
    link to the full request when it does not (or when :func:`card_facts` already cut it)."""
    head = "*Arguments*\n```\n"
    cut_note = f"\n…\n```\n_Cut to fit: {_link(facts, 'see the full request')}_"
    whole, cut = _escaped_within(facts.args_text, SECTION_TEXT_LIMIT - len(head) - len("\n```"), code=True)
    if not cut and not facts.args_truncated:
        return f"{head}{whole}\n```"
    body, _ = _escaped_within(facts.args_text, SECTION_TEXT_LIMIT - len(head) - len(cut_note), code=True)
    # card_facts ends a cut text with "\n…"; do not print the ellipsis twice.
    body = body.removesuffix("\n…")
    return f"{head}{body}{cut_note}"


def fallback_text(facts: CardFacts) -> str:
    """The plain ``text`` Slack shows in notifications and where blocks cannot be rendered."""
    if not facts.pending:
        return escape(facts.outcome_line)
    return escape(f"Approval needed: {facts.agent} wants to run {facts.tool}, asked by {facts.requester}")


def _fact_blocks(facts: CardFacts) -> list[Block]:
    def field(label: str, value: str) -> Block:
        text, _ = _escaped_within(value, FIELD_TEXT_LIMIT - len(label) - 3)
        return {"type": "mrkdwn", "text": f"*{label}*\n{text}"}

    title = f"Approval needed: {facts.tool}"
    return [
        {"type": "header", "text": {"type": "plain_text", "text": _clip(title, HEADER_TEXT_LIMIT)}},
        {
            "type": "section",
            "fields": [
                field("Agent", facts.agent),
                field("Requested by", facts.requester),
                field("Tool", facts.tool),
            ],
        },
        {"type": "section", "text": {"type": "mrkdwn", "text": arguments_text(facts)}},
    ]


def approval_blocks(facts: CardFacts) -> list[Block]:
    """The card while the request is pending: its facts, its deadline and the two buttons, each
    carrying the request id as ``value``."""
    return [
        *_fact_blocks(facts),
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": " · ".join([*map(escape, facts.waiting_lines), _link(facts, "Open in FIM One")]),
                }
            ],
        },
        {
            "type": "actions",
            "block_id": ACTIONS_BLOCK_ID,
            "elements": [
                {
                    "type": "button",
                    "action_id": APPROVE,
                    "text": {"type": "plain_text", "text": "Approve"},
                    "style": "primary",
                    "value": facts.request_id,
                },
                {
                    "type": "button",
                    "action_id": REJECT,
                    "text": {"type": "plain_text", "text": "Reject"},
                    "style": "danger",
                    "value": facts.request_id,
                },
            ],
        },
    ]


def decided_blocks(facts: CardFacts) -> list[Block]:
    """The card once the request left ``pending``: the same facts, the buttons replaced by the
    outcome line (who decided, when)."""
    if facts.pending:
        return approval_blocks(facts)
    emoji = _OUTCOME_EMOJI.get(facts.status, ":grey_question:")
    outcome, _ = _escaped_within(facts.outcome_line, SECTION_TEXT_LIMIT - len(emoji) - 4)
    line = f"{emoji} *{outcome}*"
    return [
        *_fact_blocks(facts),
        {"type": "section", "block_id": OUTCOME_BLOCK_ID, "text": {"type": "mrkdwn", "text": line}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": _link(facts, "Open in FIM One")}]},
    ]
