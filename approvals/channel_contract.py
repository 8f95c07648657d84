"""The channel contract (docs/design.md §6): how an approval card reaches people and how clicks come back.

The approval gate never knows which platform it talks to; :mod:`channels_im.delivery` picks the
request's channel, :mod:`approvals.channels` the class serving it, and
:mod:`channels_im.services` calls :meth:`Channel.send_interactive_card` / :meth:`Channel.update_card`,
and :mod:`channels_im.views` hands inbound callbacks to :meth:`Channel.parse_callback` (which
verifies before it parses) and answers with :meth:`Channel.callback_response`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, ClassVar

from django.http import HttpRequest, HttpResponse, JsonResponse


class DeliveryError(Exception):
    """A send or update failed. ``retryable`` says whether trying again may help; ``maybe_sent``
    that the platform may have taken the message even so (the answer was lost: a timeout, a
    dropped connection)."""

    def __init__(self, message: str, *, retryable: bool = True, maybe_sent: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.maybe_sent = maybe_sent


@dataclass(frozen=True)
class CallbackResult:
    """What ``parse_callback`` made of an HTTP request.

    - ``decision``: a verified click: ``request_id``, ``approve``, ``external_user_id``;
    - ``challenge``: a URL-verification handshake to answer with ``challenge``;
    - ``refusal``: anything else, with the HTTP status to answer and a ``reason`` (when the
      refusal is tied to a request, ``request_id`` is set and the refusal is logged on it).
    """

    kind: str
    http_status: int = 200
    request_id: str | None = None
    approve: bool | None = None
    external_user_id: str = ""
    reason: str = ""
    challenge: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def refuse(
        cls,
        reason: str,
        *,
        status: int = 400,
        request_id: str | None = None,
        external_user_id: str = "",
        **extra: Any,
    ) -> CallbackResult:
        return cls(
            kind="refusal",
            http_status=status,
            reason=reason,
            request_id=request_id,
            external_user_id=external_user_id,
            extra=extra,
        )


class Channel(abc.ABC):
    """One provider, built per :class:`channels_im.models.ChannelConfig` (``None`` for the web)."""

    kind: ClassVar[str]
    callback_methods: ClassVar[frozenset[str]] = frozenset({"POST"})
    """HTTP methods the callback URL takes for this provider (WeCom checks the URL with a GET)."""
    updates_pending_cards: ClassVar[bool] = True
    """Whether :meth:`update_card` may be called while the request is still pending (to show a
    quorum's tally) as well as once after its verdict. A platform that lets a card be updated only
    once keeps that update for the verdict."""
    secrets_address_setting: ClassVar[tuple[str, str | None]] = ("", None)
    """``(setting, default)``: the key of ``settings_json`` naming the URL the secrets are sent to,
    and the URL used when it is not set (the configuration's secrets are bound to its origin:
    ``ChannelConfig.secrets_address``). The web inbox sends no secrets anywhere."""

    def __init__(self, config: Any = None) -> None:
        self.config = config

    @abc.abstractmethod
    def send_interactive_card(self, request: Any, *, maybe_posted: bool = False) -> str:
        """Post the card for ``request``; return the platform's message reference.

        Raises :class:`DeliveryError`. Must be safe to call again for the same request (the
        platform de-duplicates by the request id, or the caller checks the stored reference).
        ``maybe_posted``: an earlier attempt may have posted the card though its answer was lost;
        a platform without idempotent sends looks for that card before posting another.
        """

    @abc.abstractmethod
    def update_card(self, request: Any) -> None:
        """Show the request's current state on the card it was sent as: its outcome (who decided,
        when) once settled; while pending, the card with its buttons and the quorum's tally. Must
        be safe to call again: it renders the row as it is, never a delta."""

    def check_config(self) -> None:
        """Raise ``ValueError`` naming what is missing or invalid in the configuration (admin
        validation). The web inbox needs none."""
        return None

    def send_test_card(self) -> str:
        """Post a harmless card proving the configuration works (admin action)."""
        raise DeliveryError(f"{self.kind} channels have no test card", retryable=False)

    def parse_callback(self, http_request: HttpRequest) -> CallbackResult:
        """Verify, then parse, an inbound callback. Never raises on hostile input."""
        return CallbackResult.refuse("this channel takes no callbacks", status=404)

    async def parse_callback_async(self, http_request: HttpRequest) -> CallbackResult | None:
        """:meth:`parse_callback` on the server's event loop, for a provider whose verification
        can run there without blocking it (``channels_im.quick``); ``None``: this provider's
        callbacks are parsed in a thread, by :meth:`parse_callback`."""
        return None

    def callback_response(self, result: CallbackResult, outcome: Any | None) -> HttpResponse:
        """The HTTP answer to a callback. ``outcome`` is the ``DecisionOutcome`` for decisions
        (``None`` for challenges and refusals)."""
        if result.kind == "challenge":
            return JsonResponse({"challenge": result.challenge})
        if outcome is None:
            return JsonResponse({"error": result.reason}, status=result.http_status)
        return JsonResponse({"status": outcome.status, "message": outcome.message})
