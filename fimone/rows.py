"""Model instances from hand-written statements, for the few hot paths that skip the ORM's query
compiler (compiling a query cost a card click more than the database took to answer it).

The statement names the columns (:func:`columns`); :func:`instance` turns its values into an
instance exactly as a queryset would (each field's ``from_db_value``, e.g. decryption), with the
model's other fields deferred: touching one loads it.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import Model, QuerySet


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


# --- a queryset's statement, compiled once ---------------------------------------------------------


@dataclass(frozen=True)
class Compiled:
    """A queryset's SQL, compiled once by the ORM, to run on the event loop with other values.

    The rules of a read (its filters, its order, its locks) stay in the one queryset the ORM
    runs elsewhere: ``build(**values)`` makes that queryset, and :meth:`of` compiles it once with
    a stand-in for each named value (an id, a text or a time no row has); :meth:`bind` puts the
    real values where the stand-ins are. :meth:`of` refuses a queryset in which a stand-in does
    not come out as a parameter of its own (a value the ORM changed on its way)."""

    sql: str
    params: tuple[Any, ...]
    slots: dict[int, str]

    @classmethod
    def of(cls, build: Callable[..., QuerySet[Any]], **kinds: type) -> Compiled:
        """``kinds``: each value's type (``int``, ``str`` or ``datetime.datetime``). Synchronous:
        compiling asks Django's connection whether it is in a transaction (a locking read must
        be), so call it in a thread (once: cache what it returns), never on an event loop."""
        stand_ins = {name: _stand_in(kind, number) for number, (name, kind) in enumerate(kinds.items())}
        with transaction.atomic():  # compiled as the read will run: in a transaction
            sql, params = build(**stand_ins).query.sql_with_params()
        slots = {
            index: name for index, value in enumerate(params) for name, v in stand_ins.items() if value == v
        }
        missing = set(kinds) - set(slots.values())
        if missing:
            raise ValueError(f"not parameters of the compiled query: {', '.join(sorted(missing))}")
        return cls(sql=sql, params=tuple(params), slots=slots)

    def bind(self, **values: Any) -> list[Any]:
        """The parameters with ``values`` in place of the stand-ins."""
        params = list(self.params)
        for index, name in self.slots.items():
            params[index] = values[name]
        return params


def _stand_in(kind: type, number: int) -> Any:
    if kind is int:
        return -7_300_000_000_000 - number  # an id no row has
    if kind is str:
        return f"«stand-in {number}»"
    if kind is dt.datetime:
        return dt.datetime(1901, 1, 1, 0, 0, 0, number + 1, tzinfo=dt.UTC)
    raise TypeError(f"no stand-in for {kind.__name__}")


# --- rows written by hand ---------------------------------------------------------------------------


def insert_columns(model: type[Model]) -> tuple[str, ...]:
    """The fields an insert of ``model`` writes: every concrete field but an automatic primary key."""
    meta = model._meta
    return tuple(
        f.attname for f in meta.local_concrete_fields if f is not meta.auto_field and not f.generated
    )


def insert_values(obj: Model, attnames: tuple[str, ...]) -> list[Any]:
    """``obj``'s values for an insert, as the ORM's insert prepares them (each field's
    ``pre_save``, e.g. ``auto_now_add``, then its ``get_db_prep_save``, e.g. encryption)."""
    connection = connections[DEFAULT_DB_ALIAS]
    fields = [obj._meta.get_field(name) for name in attnames]
    return [field.get_db_prep_save(field.pre_save(obj, True), connection) for field in fields]


def inserted(obj: Model, pk: Any) -> Model:
    """``obj``, now a saved row with primary key ``pk`` (as ``save()`` leaves it)."""
    obj.pk = pk
    obj._state.adding = False
    obj._state.db = DEFAULT_DB_ALIAS
    return obj


def insert_chain(chain: list[Model]) -> tuple[str, list[Any]]:
    """One statement inserting ``chain``'s new rows (PostgreSQL), each after the first pointing
    at the one before it (a conversation, its run, the run's call record: the field of each that
    points at the previous one's model), answering their ids in order (:func:`chain_inserted`)."""
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    parts: list[str] = []
    params: list[Any] = []
    for number, obj in enumerate(chain):
        model = type(obj)
        columns = insert_columns(model)
        link = _link_to(model, type(chain[number - 1])).attname if number else None
        values = []
        for column, value in zip(columns, insert_values(obj, columns), strict=True):
            if column == link:
                values.append(f"(SELECT id FROM i{number - 1})")  # noqa: S608 - no value in it
            else:
                values.append("%s")
                params.append(value)
        names = ", ".join(quote(model._meta.get_field(c).column) for c in columns)
        table = quote(model._meta.db_table)
        placeholders = ", ".join(values)
        parts.append(f"i{number} AS (INSERT INTO {table} ({names}) VALUES ({placeholders}) RETURNING id)")  # noqa: S608
    ids = ", ".join(f"(SELECT id FROM i{number})" for number in range(len(chain)))  # noqa: S608
    # Our table and column names only: every value is a parameter.
    return f"WITH {', '.join(parts)} SELECT {ids}", params


def chain_inserted(chain: list[Model], ids: tuple[Any, ...]) -> None:
    """``chain``'s rows saved with ``ids`` (:func:`insert_chain`), each pointing at the one before."""
    for number, (obj, pk) in enumerate(zip(chain, ids, strict=True)):
        inserted(obj, pk)
        if number:  # the previous row's id was not known when this one was made
            setattr(obj, _link_to(type(obj), type(chain[number - 1])).name, chain[number - 1])


def _link_to(model: type[Model], previous: type[Model]) -> Any:
    """The field of ``model`` that points at a ``previous`` row."""
    for field in model._meta.concrete_fields:
        if field.is_relation and field.related_model is previous:
            return field
    raise ValueError(f"{model.__name__} does not point at {previous.__name__}")
