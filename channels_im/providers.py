"""Registry of IM providers by kind."""

from __future__ import annotations

from channels_im.base import Channel

_PROVIDERS: dict[str, type[Channel]] = {}


def register_provider(cls: type[Channel]) -> type[Channel]:
    _PROVIDERS[cls.kind] = cls
    return cls


def provider_class(kind: str) -> type[Channel]:
    try:
        return _PROVIDERS[kind]
    except KeyError:
        raise LookupError(f"no channel provider for {kind!r}") from None
