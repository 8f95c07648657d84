"""Validating a Slack channel's configuration (:class:`~channels_im.models.ChannelConfig`)::

    secrets       = {"bot_token": "xoxb-…", "signing_secret": "…"}
    settings_json = {"channel": "C…", "api_url": "https://slack.com/api/", "timeout": 5}

and the message references the provider stores (``"<channel id>:<ts>"``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from approvals.channel_contract import DeliveryError
from channels_im.verification import secure_origin

DEFAULT_API_URL = "https://slack.com/api/"
DEFAULT_TIMEOUT = 5.0
MAX_TIMEOUT = 30.0
_MESSAGE_REF = re.compile(r"(?P<channel>[A-Z0-9]+):(?P<ts>[0-9]+\.[0-9]+)")


@dataclass(frozen=True)
class SlackSettings:
    """What an outbound call needs, validated."""

    bot_token: str
    channel: str
    api_url: str
    timeout: float


def _misconfigured(config: Any, problem: str) -> DeliveryError:
    # Retrying cannot fix a configuration: the request stays pending (and expires) until an
    # operator repairs the channel in the admin and sends a test card.
    return DeliveryError(f"Slack channel {config.name!r} is misconfigured: {problem}", retryable=False)


def slack_settings(config: Any) -> SlackSettings:
    """The outbound settings of ``config``; raises ``DeliveryError(retryable=False)`` naming the
    first missing or invalid value (never echoing a secret)."""
    secrets = config.secrets if isinstance(config.secrets, dict) else {}
    options = config.settings_json if isinstance(config.settings_json, dict) else {}
    token = secrets.get("bot_token")
    if not isinstance(token, str) or not token.strip():
        raise _misconfigured(config, 'secrets need "bot_token" (the bot token, xoxb-…)')
    channel = options.get("channel")
    if not isinstance(channel, str) or not channel.strip():
        raise _misconfigured(config, 'settings need "channel" (a channel id such as C0123ABCD)')
    api_url = options.get("api_url") or DEFAULT_API_URL
    if not isinstance(api_url, str):
        raise _misconfigured(config, '"api_url" must be a URL')
    # The bot token travels in a header: plain http is allowed only to this machine (test fakes).
    if not secure_origin(api_url, allow_path=True):
        raise _misconfigured(config, '"api_url" must be an https:// URL')
    timeout = options.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT:
        raise _misconfigured(config, f'"timeout" must be a number of seconds in (0, {MAX_TIMEOUT:g}]')
    return SlackSettings(
        bot_token=token.strip(),
        channel=channel.strip(),
        api_url=api_url if api_url.endswith("/") else api_url + "/",
        timeout=float(timeout),
    )


def parse_message_ref(ref: str) -> tuple[str, str] | None:
    """``(channel, ts)`` of a reference made by :meth:`SlackChannel.send_interactive_card`
    (``None`` for anything else, e.g. an empty reference or another provider's)."""
    match = _MESSAGE_REF.fullmatch(ref or "")
    return (match["channel"], match["ts"]) if match else None


def signing_secret(config: Any) -> str | None:
    """The channel's signing secret, or ``None`` when it has none."""
    secrets = config.secrets if isinstance(config.secrets, dict) else {}
    secret = secrets.get("signing_secret")
    return secret if isinstance(secret, str) and secret else None
