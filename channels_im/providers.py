"""Registry of IM providers by kind. A provider lives in ``channels_im/<kind>/transport.py`` and
registers its :class:`~channels_im.base.Channel` subclass with :func:`register_provider`."""

from __future__ import annotations

import contextlib
import importlib

from channels_im.base import Channel

_PROVIDERS: dict[str, type[Channel]] = {}


def register_provider(cls: type[Channel]) -> type[Channel]:
    _PROVIDERS[cls.kind] = cls
    return cls


def provider_class(kind: str) -> type[Channel]:
    if kind not in _PROVIDERS:
        with contextlib.suppress(ModuleNotFoundError):
            importlib.import_module(f"channels_im.{kind}.transport")
    try:
        return _PROVIDERS[kind]
    except KeyError:
        raise LookupError(f"no channel provider for {kind!r}") from None
