"""Which channel a new request's card goes to, answered by the app that knows channels.

The approvals app decides *when* to ask a human; the channel app knows *how* to reach one
(docs/design.md §6). It sits above this app, so it registers its answer here at start-up
(``channels_im.apps``) rather than being imported: import down, signal up (docs/design.md §2).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ChannelResolver = Callable[..., Any]
"""``resolver(agent=…, policy_channel_id=…)`` returns the ``ChannelConfig`` a request for the
agent's call goes to (its ``kind`` names the provider), or ``None`` for the web inbox."""

_resolver: ChannelResolver | None = None


def register_channel_resolver(resolver: ChannelResolver) -> None:
    """Install the resolver (the last registration wins; registering again is harmless)."""
    global _resolver  # one resolver per process, set once at start-up
    _resolver = resolver


def channel_config_for(*, agent: Any, policy_channel_id: int | None) -> Any | None:
    """The channel configuration a new request of ``agent`` is sent on, or ``None`` (the web
    inbox, which needs no configuration) when no channel app is installed."""
    if _resolver is None:
        return None
    return _resolver(agent=agent, policy_channel_id=policy_channel_id)
