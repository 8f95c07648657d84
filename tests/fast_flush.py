"""A faster way to empty the test database between transactional tests, on both databases.

Django empties the database after every ``django_db(transaction=True)`` test, then sends
``post_migrate`` to fill again what a migration made: every content type, every model permission
(``create_permissions`` for each app) and, through ``tenancy``, the role groups on their first
use. Measured here, the refill was 0.21 s of each transactional test, more than the test itself
for most; on PostgreSQL Django's one ``TRUNCATE`` of every table cost 0.4 s more.

So the flush keeps the reference rows a migration made (:data:`KEPT`: content types,
permissions, the role groups and their permissions) and sends no ``post_migrate``: nothing it
would make is missing. What a test may have added there goes: groups other than the role groups
(``tenancy.roles.GROUP_NAMES``) with their permissions. Every other table is emptied, as before.
Where the flush asks for more than emptying (sequences reset, cascade), Django's own flush runs,
``post_migrate`` included.

On PostgreSQL the emptying is a ``DELETE`` of each table, which costs next to nothing on the few
tables a test filled. The append-only triggers (the audit record, its chain heads) and the
foreign-key checks are triggers, so the deletes run with ``session_replication_role = replica``
for the flush's own transaction only (``SET LOCAL``), which needs a superuser: as another role,
Django's own ``TRUNCATE`` is used. Sequences are not reset (as ``TRUNCATE`` without ``RESTART
IDENTITY`` leaves them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

KEPT = frozenset({"django_content_type", "auth_permission", "auth_group", "auth_group_permissions"})
"""Tables whose migrated rows every flush keeps (module docstring)."""

_superuser: dict[str, bool] = {}
_kept_this_flush: list[bool] = []
"""Not empty while a flush that kept :data:`KEPT` is being carried out (no ``post_migrate``)."""


def _is_superuser(operations: Any) -> bool:
    alias = operations.connection.alias
    if alias not in _superuser:
        with operations.connection.cursor() as cursor:
            cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
            row = cursor.fetchone()
        _superuser[alias] = bool(row and row[0])
    return _superuser[alias]


def _postgresql_deletes(truncate: Callable[..., list[str]]) -> Callable[..., list[str]]:
    def sql_flush(
        self: Any, style: Any, tables: Any, *, reset_sequences: bool = False, allow_cascade: bool = False
    ) -> list[str]:
        if reset_sequences or allow_cascade or not tables or not _is_superuser(self):
            return truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        # The tables are Django's own (introspection of the test database), quoted.
        deletes = "; ".join(f"DELETE FROM {self.quote_name(table)}" for table in tables)  # noqa: S608
        return ["SET LOCAL session_replication_role = replica", deletes]

    return sql_flush


def _keeping_reference_rows(flush: Callable[..., list[str]]) -> Callable[..., list[str]]:
    def sql_flush(
        self: Any, style: Any, tables: Any, *, reset_sequences: bool = False, allow_cascade: bool = False
    ) -> list[str]:
        _kept_this_flush.clear()
        if reset_sequences or allow_cascade or not set(tables) >= KEPT:
            return flush(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        from tenancy.roles import GROUP_NAMES  # a plugin loads before Django's apps are ready

        emptied = [table for table in tables if table not in KEPT]
        roles = ", ".join("'" + name.replace("'", "''") + "'" for name in GROUP_NAMES.values())
        others = f"SELECT id FROM auth_group WHERE name NOT IN ({roles})"  # noqa: S608 - our constants
        _kept_this_flush.append(True)
        return [
            *flush(self, style, emptied),
            f"DELETE FROM auth_group_permissions WHERE group_id IN ({others})",  # noqa: S608
            f"DELETE FROM auth_group WHERE id IN ({others})",  # noqa: S608
        ]

    return sql_flush


@pytest.fixture(autouse=True, scope="session")
def _fast_flush() -> Any:
    from django.core.management.commands import flush
    from django.db.backends.postgresql.operations import DatabaseOperations as PostgreSQL
    from django.db.backends.sqlite3.base import DatabaseOperations as SQLite

    originals = {PostgreSQL: PostgreSQL.sql_flush, SQLite: SQLite.sql_flush}
    PostgreSQL.sql_flush = _keeping_reference_rows(_postgresql_deletes(originals[PostgreSQL]))  # type: ignore[method-assign]
    SQLite.sql_flush = _keeping_reference_rows(originals[SQLite])  # type: ignore[method-assign]
    emit = flush.emit_post_migrate_signal

    def post_migrate_unless_kept(*args: Any, **kwargs: Any) -> None:
        if _kept_this_flush:
            _kept_this_flush.clear()
            return  # what post_migrate would make again was kept
        emit(*args, **kwargs)

    flush.emit_post_migrate_signal = post_migrate_unless_kept
    yield
    flush.emit_post_migrate_signal = emit
    for operations, sql_flush in originals.items():
        operations.sql_flush = sql_flush  # type: ignore[method-assign]
