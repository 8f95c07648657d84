"""The web inbox: the embedded default. The "card" is the request's row in the inbox page, so
sending and updating need no external call; decisions come through the inbox views."""

from __future__ import annotations

from typing import Any

from approvals.channel_contract import Channel
from approvals.channels import register_provider


@register_provider
class WebChannel(Channel):
    kind = "web"

    def send_interactive_card(self, request: Any, *, maybe_posted: bool = False) -> str:
        return f"inbox:{request.pk}"

    def update_card(self, request: Any) -> None:
        """Nothing to patch: the inbox reads the row."""
