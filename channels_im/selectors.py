"""Reads of the callback path."""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, connections

from channels_im.models import ChannelConfig


def channel_config_for_callback(callback_key: str) -> ChannelConfig | None:
    """The active channel configuration a callback URL names, secrets decrypted. A plain
    statement rather than a compiled queryset: every callback, forged ones too, asks it first."""
    table = connections[DEFAULT_DB_ALIAS].ops.quote_name(ChannelConfig._meta.db_table)
    found = ChannelConfig.objects.raw(
        f"SELECT * FROM {table} WHERE callback_key = %s AND active = %s",  # noqa: S608 - our name
        [callback_key, True],
    )
    return next(iter(found), None)
