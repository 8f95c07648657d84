"""The channel contract (DESIGN §6): how an approval card reaches people and how clicks come back.

The approval gate never knows which platform it talks to; it asks :mod:`channels_im.delivery`,
which picks the request's channel and calls these three methods.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, ClassVar

from django.http import HttpRequest


class DeliveryError(Exception):
    """A send or update failed. ``retryable`` says whether trying again may help."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class CallbackResult:
    """What ``parse_callback`` made of an HTTP request: a verified click, a URL challenge, or a
    refusal with the HTTP status to answer."""

    kind: str  # "decision" | "challenge" | "refusal"
    http_status: int = 200
    request_id: str | None = None
    approve: bool | None = None
    external_user_id: str = ""
    reason: str = ""
    challenge: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class Channel(abc.ABC):
    """One provider. Instances are built per :class:`ChannelConfig` (or without one for web)."""

    kind: ClassVar[str]

    def __init__(self, config: Any = None) -> None:
        self.config = config

    @abc.abstractmethod
    def send_interactive_card(self, request: Any) -> str:
        """Post the card for ``request``; return the platform's message reference."""

    @abc.abstractmethod
    def update_card(self, request: Any) -> None:
        """Show the request's outcome on the card it was sent as."""

    def parse_callback(self, http_request: HttpRequest) -> CallbackResult:
        """Verify, then parse, a click callback. Providers without callbacks refuse."""
        return CallbackResult(kind="refusal", http_status=404, reason="this channel takes no callbacks")
