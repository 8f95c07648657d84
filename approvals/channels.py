"""Where a request's card goes and which provider serves a channel, answered by the app that
knows channels.

The approvals app decides *when* to ask a human; the channel app knows *how* to reach one
(docs/design.md §6). It sits above this app, so it registers its answers here at start-up, all in
``channels_im.apps``, rather than being imported: import down, signal up (docs/design.md §2).

- :func:`register_channel_resolver`: which configuration a new request is sent on;
- :func:`register_provider_modules`: for each channel kind, the module of its provider, imported
  the first time that kind is asked for (so a platform's SDK is loaded only by a process that
  serves that platform); importing it registers the provider's class (:func:`register_provider`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from approvals.channel_contract import Channel

if TYPE_CHECKING:
    from approvals.models import ChannelConfig

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


_PROVIDERS: dict[str, type[Channel]] = {}
_PROVIDER_MODULES: dict[str, str] = {}


def register_provider_modules(modules: dict[str, str]) -> None:
    """``{kind: dotted module}``: where the provider of each kind is (registering again is harmless)."""
    _PROVIDER_MODULES.update(modules)


def register_provider(cls: type[Channel]) -> type[Channel]:
    """Class decorator of a provider's :class:`~approvals.channel_contract.Channel` subclass."""
    _PROVIDERS[cls.kind] = cls
    return cls


def provider_class(kind: str) -> type[Channel]:
    """The channel class of ``kind``, its module imported on first use. Raises ``LookupError``
    for a kind no provider serves."""
    if kind not in _PROVIDERS and kind in _PROVIDER_MODULES:
        importlib.import_module(_PROVIDER_MODULES[kind])
    try:
        return _PROVIDERS[kind]
    except KeyError:
        raise LookupError(f"no channel provider for {kind!r}") from None


def channel_for(config: ChannelConfig | None) -> Channel:
    """The channel serving ``config``; the web inbox for ``None`` (a request sent to no
    configuration). Raises ``LookupError`` for a kind no provider serves."""
    kind = "web" if config is None else config.kind
    return provider_class(kind)(config)
