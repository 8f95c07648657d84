"""Reads of the callback path."""

from __future__ import annotations

import functools

from django.db import DEFAULT_DB_ALIAS, connections
from psycopg import AsyncConnection

from approvals.models import ChannelConfig
from fimone import adb, rows


def channel_config_for_callback(callback_key: str) -> ChannelConfig | None:
    """The active channel configuration a callback URL names, secrets decrypted. A plain
    statement rather than a compiled queryset: every callback, forged ones too, asks it first."""
    found = ChannelConfig.objects.raw(_channel_sql(), [callback_key, True])
    return next(iter(found), None)


async def channel_config_for_callback_async(db: AsyncConnection, callback_key: str) -> ChannelConfig | None:
    """:func:`channel_config_for_callback` on the event loop, on ``db`` (:mod:`fimone.adb`)."""
    row = await adb.fetchone(db, _channel_sql(), [callback_key, True])
    return None if row is None else rows.instance(ChannelConfig, rows.all_fields(ChannelConfig), row)


@functools.cache  # our table and column names: the text never changes
def _channel_sql() -> str:
    table = connections[DEFAULT_DB_ALIAS].ops.quote_name(ChannelConfig._meta.db_table)
    columns = rows.columns(ChannelConfig, table, rows.all_fields(ChannelConfig))
    return f"SELECT {columns} FROM {table} WHERE callback_key = %s AND active = %s"  # noqa: S608 - our names
