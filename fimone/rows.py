"""Model instances from hand-written statements, for the few hot paths that skip the ORM's query
compiler (compiling a query cost a card click more than the database took to answer it).

The statement names the columns (:func:`columns`); :func:`instance` turns its values into an
instance exactly as a queryset would (each field's ``from_db_value``, e.g. decryption), with the
model's other fields deferred: touching one loads it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model


@functools.cache
def all_fields(model: type[Model]) -> tuple[str, ...]:
    """Every concrete field of ``model`` (attribute names, in the model's order)."""
    return tuple(field.attname for field in model._meta.concrete_fields)


def in_field_order(model: type[Model], attnames: Iterable[str]) -> tuple[str, ...]:
    """``attnames`` in the model's field order, which :func:`instance` expects."""
    order = all_fields(model)
    return tuple(sorted(attnames, key=order.index))


def columns(model: type[Model], alias: str, attnames: tuple[str, ...]) -> str:
    """``alias."column", …`` for these fields, quoted for the default database."""
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    return ", ".join(f"{alias}.{quote(model._meta.get_field(name).column)}" for name in attnames)


def instance(model: type[Model], attnames: tuple[str, ...], values: Iterable[Any]) -> Any:
    """An instance of ``model`` with these fields (``attnames`` in the model's field order) as the
    database returned them, converted as the ORM converts them."""
    connection = connections[DEFAULT_DB_ALIAS]
    values = list(values)
    for index, column in _converted_columns(connection.vendor, model, attnames):
        # The backend's converters (SQLite's booleans and datetimes), then the field's own.
        value = values[index]
        for convert in connection.ops.get_db_converters(column) + column.get_db_converters(connection):
            value = convert(value, column, connection)
        values[index] = value
    return model.from_db(DEFAULT_DB_ALIAS, list(attnames), values)


@functools.cache
def _converted_columns(vendor: str, model: type[Model], attnames: tuple[str, ...]) -> list[tuple[int, Any]]:
    """The position and column of each field whose value the ORM converts on this database (most
    need nothing on PostgreSQL, whose driver returns Python values): which fields those are
    depends on the backend and the field's type only, so it is worked out once."""
    connection = connections[DEFAULT_DB_ALIAS]
    found = []
    for index, attname in enumerate(attnames):
        column = model._meta.get_field(attname).get_col(model._meta.db_table)
        if connection.ops.get_db_converters(column) or column.get_db_converters(connection):
            found.append((index, column))
    return found


def taker(row: Iterable[Any]) -> Any:
    """``take(n)``: the next ``n`` values of ``row`` (for a row that holds several models)."""
    values: Iterator[Any] = iter(row)

    def take(count: int) -> list[Any]:
        return [next(values) for _ in range(count)]

    return take
