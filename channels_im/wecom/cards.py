"""WeCom template cards (``button_interaction``) built from :class:`channels_im.cards.CardFacts`.

WeCom cuts nothing itself: it refuses a card whose fields are too long, so every field is cut
here to its documented limit (main title 36 characters, its description 44, the sub-title 112, a
horizontal key 5 and value 30, a button 10). The full arguments are one tap away: the card opens
the request in the portal.
"""

from __future__ import annotations

import re
from typing import Any

from channels_im.cards import CardFacts

APPROVE, REJECT = "approve", "reject"
BUTTON_KEY = re.compile(r"(?P<decision>approve|reject):(?P<request_id>[0-9a-f-]{36})")
TASK_ID_PREFIX = "fimone-"


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())  # one line: WeCom shows no line breaks in these fields
    return text if len(text) <= limit else text[: limit - 1] + "…"


def task_id(request_id: str) -> str:
    """The card's ``task_id``: unique per app, letters, digits and ``_-@`` only, ≤ 128 bytes."""
    return TASK_ID_PREFIX + request_id.replace("-", "")


def button_key(decision: str, request_id: str) -> str:
    return f"{decision}:{request_id}"


def _card(facts: CardFacts, *, sub_title: str) -> dict[str, Any]:
    return {
        "card_type": "button_interaction",
        "source": {"desc": "FIM One"},
        "main_title": {"title": _cut(f"Approve {facts.tool}?", 36), "desc": _cut(f"Agent {facts.agent}", 44)},
        "sub_title_text": _cut(sub_title, 112),
        "horizontal_content_list": [
            {"keyname": "By", "value": _cut(facts.requester, 30)},
            {"keyname": "Tool", "value": _cut(facts.tool, 30)},
            {"keyname": "Until", "value": _cut(facts.expires_at, 30)},
            *([{"keyname": "Votes", "value": _cut(facts.tally, 30)}] if facts.tally else []),
        ],
        "card_action": {"type": 1, "url": facts.link},
        "task_id": task_id(facts.request_id),
        "button_list": [
            {"text": "Approve", "style": 1, "key": button_key(APPROVE, facts.request_id)},
            {"text": "Reject", "style": 2, "key": button_key(REJECT, facts.request_id)},
        ],
    }


def request_card(facts: CardFacts) -> dict[str, Any]:
    """The card of a pending request: what would run, and Approve / Reject buttons."""
    return _card(facts, sub_title=f"Arguments: {facts.args_text}")


def settled_card(facts: CardFacts) -> dict[str, Any]:
    """The card once decided (or expired, cancelled): the outcome line, the buttons greyed out
    under ``replace_text`` (``update_template_card``)."""
    card = _card(facts, sub_title=facts.outcome_line)
    card["replace_text"] = _cut(facts.status.capitalize(), 10)
    return card


def connection_check_card(name: str, *, link: str) -> dict[str, Any]:
    """A card without buttons proving the app may post to its recipients."""
    return {
        "card_type": "text_notice",
        "source": {"desc": "FIM One"},
        "main_title": {"title": "FIM One test card", "desc": _cut(f"Channel {name}", 44)},
        "sub_title_text": "Approval cards of this channel will be sent here.",
        "card_action": {"type": 1, "url": link},
    }
