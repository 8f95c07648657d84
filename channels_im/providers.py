"""Registry of IM providers by kind, and the channel a configuration is served by.

A provider lives in ``channels_im/<kind>/transport.py`` and registers its
:class:`~channels_im.base.Channel` subclass with :func:`register_provider`; the web inbox
(``channels_im/web/transport.py``) is the provider of kind ``"web"``. A provider's module is
imported the first time its kind is asked for, so a platform's SDK is loaded only by a process that
serves that platform. This module sits below the models: it knows configurations only by their
``kind``.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import TYPE_CHECKING

from channels_im.base import Channel

if TYPE_CHECKING:
    from channels_im.models import ChannelConfig

_PROVIDERS: dict[str, type[Channel]] = {}


def register_provider(cls: type[Channel]) -> type[Channel]:
    _PROVIDERS[cls.kind] = cls
    return cls


def provider_class(kind: str) -> type[Channel]:
    """The channel class of ``kind``, its module imported on first use. Raises ``LookupError``
    for a kind no provider serves."""
    if kind not in _PROVIDERS:
        with contextlib.suppress(ModuleNotFoundError):
            importlib.import_module(f"channels_im.{kind}.transport")
    try:
        return _PROVIDERS[kind]
    except KeyError:
        raise LookupError(f"no channel provider for {kind!r}") from None


def channel_for(config: ChannelConfig | None) -> Channel:
    """The channel serving ``config``; the web inbox for ``None`` (a request sent to no
    configuration). Raises ``LookupError`` for a kind no provider serves."""
    kind = "web" if config is None else config.kind
    return provider_class(kind)(config)
