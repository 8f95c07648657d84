"""Feishu card JSON 2.0 for approval requests (see ``docs/protocols.md``).

A pending card shows the agent, the requester, the tool, the arguments pretty-printed in a code
block and the deadline, with Approve / Reject buttons whose callbacks carry the request id and the
decision. A settled card shows the same facts and the outcome line instead of buttons.

Every value that people or the LLM control (names, arguments, reasons) is shown as plain text or
inside a code block it cannot leave, so nothing on the card can be made to look like something
else: an approver must see exactly what they approve.
"""

from __future__ import annotations

import json
from typing import Any

from channels_im.cards import ARGS_CARD_LIMIT, CardFacts

#: Feishu refuses interactive messages over 30 KB; sizes are measured on the JSON we send.
CARD_MAX_BYTES = 30 * 1024

#: Header colour per status: orange asks for attention, grey means nothing happened.
HEADER_TEMPLATES = {
    "pending": "orange",
    "approved": "green",
    "rejected": "red",
    "expired": "grey",
    "cancelled": "grey",
}

#: (button ``name``, label, style). The names must be unique on the card (else Feishu error 200340)
#: and are also the ``decision`` the callback carries.
BUTTONS = (("approve", "Approve", "primary_filled"), ("reject", "Reject", "danger_filled"))


def _plain(text: str) -> dict[str, str]:
    return {"tag": "plain_text", "content": text}


def _div(text: str) -> dict[str, Any]:
    return {"tag": "div", "text": _plain(text)}


def _code_safe(args_text: str) -> str:
    # In JSON text a backtick can only occur inside a string, where \u0060 means the same
    # character; escaping it means no argument value can close the code block and write markup.
    return args_text.replace("`", "\\u0060")


def _button(request_id: str, name: str, label: str, style: str) -> dict[str, Any]:
    return {
        "tag": "button",
        "name": name,
        "text": _plain(label),
        "type": style,
        "behaviors": [{"type": "callback", "value": {"request_id": request_id, "decision": name}}],
    }


def _card(*, title: str, template: str, elements: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "schema": "2.0",
        # update_multi: the card is shared by everyone in the chat, and PATCHing it after a verdict
        # must change it for all of them.
        "config": {"update_multi": True},
        "header": {"title": _plain(title), "template": template},
        "body": {"elements": elements},
    }


def card_json(card: dict[str, Any]) -> str:
    """The ``content`` string of a message carrying ``card``."""
    return json.dumps(card, ensure_ascii=False, separators=(",", ":"))


def card_size(card: dict[str, Any]) -> int:
    return len(card_json(card).encode("utf-8"))


def _request_card(facts: CardFacts, *, args_text: str, truncated: bool) -> dict[str, Any]:
    elements: list[dict[str, Any]] = [
        _div(f"Agent: {facts.agent}\nRequested by: {facts.requester}\nTool: {facts.tool}"),
        {"tag": "markdown", "content": f"**Arguments**\n```json\n{_code_safe(args_text)}\n```"},
    ]
    if truncated:
        elements.append(
            {
                "tag": "markdown",
                "content": f"The arguments are cut on this card: [see the full request]({facts.link})",
            }
        )
    if facts.pending:
        elements.append(_div("\n".join(facts.waiting_lines)))
        elements.append({"tag": "hr"})
        elements.append(
            {
                "tag": "column_set",
                "columns": [
                    {"tag": "column", "width": "auto", "elements": [_button(facts.request_id, *button)]}
                    for button in BUTTONS
                ],
            }
        )
        title = f"Approval needed: {facts.tool}"
    else:
        elements.append({"tag": "hr"})
        elements.append(_div(facts.outcome_line))
        title = f"{facts.status.capitalize()}: {facts.tool}"
    return _card(title=title, template=HEADER_TEMPLATES.get(facts.status, "grey"), elements=elements)


def request_card(facts: CardFacts) -> dict[str, Any]:
    """The card for a request in its current state, under :data:`CARD_MAX_BYTES`.

    ``facts.args_text`` is already cut at ``ARGS_CARD_LIMIT`` characters, but characters can take
    four bytes and escaping adds more: if the card is still too big the arguments are cut further
    (the link to the full request is then always shown).
    """
    args_text, truncated = facts.args_text, facts.args_truncated
    budget = min(len(args_text), ARGS_CARD_LIMIT)
    while True:
        card = _request_card(facts, args_text=args_text, truncated=truncated)
        if budget == 0 or card_size(card) <= CARD_MAX_BYTES:
            return card
        budget //= 2
        args_text, truncated = facts.args_text[:budget] + "\n…", True


def connection_check_card() -> dict[str, Any]:
    """A harmless card proving that the app can post to the chat (the admin "send test card")."""
    return _card(
        title="FIM One: test card",
        template="blue",
        elements=[
            _div(
                "This chat is connected to FIM One. Approval requests will be posted here as cards "
                "with Approve and Reject buttons. This card needs no action."
            )
        ],
    )
