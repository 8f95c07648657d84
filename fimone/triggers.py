"""PostgreSQL triggers that keep a record append-only (docs/design.md §1.15), as migration
operations: a trigger function that refuses every ``UPDATE`` and ``DELETE`` of a row and names
the record in its error. ``TRUNCATE`` fires no row trigger and dropping a trigger is left to the
table's owner; the keyed chains and their anchors (``audit_verify``) are what find such a rewrite.
Nothing is installed on SQLite, which has no roles to keep apart."""

from __future__ import annotations

from typing import Any

from django.db import migrations

HINT = "Audit rows are inserted, never updated or deleted (DESIGN 1.15)."


def append_only(*, function: str, says: str, triggers: dict[str, str]) -> migrations.RunPython:
    """A migration operation installing ``function``, which refuses the row saying why (``says``:
    "the sign-in record is append-only"), as a ``BEFORE UPDATE OR DELETE`` row trigger for each
    ``name: table`` of ``triggers``; reversed, it drops them."""
    body = f"""
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'fimone: % on % refused: {says}', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege',
              HINT = '{HINT}';
END;
$$ LANGUAGE plpgsql
"""
    return function_and_triggers(
        function=function, body=body, triggers=triggers, when="BEFORE UPDATE OR DELETE"
    )


def function_and_triggers(
    *, function: str, body: str, triggers: dict[str, str], when: str, each: str = "FOR EACH ROW"
) -> migrations.RunPython:
    """A migration operation creating the trigger function ``function`` from ``body`` (a
    ``CREATE OR REPLACE FUNCTION``) and, for each ``name: table`` of ``triggers``, a trigger
    ``when`` (``BEFORE UPDATE OR DELETE``, ``AFTER INSERT …``) ``each`` (row or statement) on it."""

    def install(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        schema_editor.execute(body, None)  # no parameters: its % are PL/pgSQL's
        for name, table in triggers.items():
            schema_editor.execute(
                f"CREATE TRIGGER {name} {when} ON {table} {each} EXECUTE FUNCTION {function}()", None
            )

    def uninstall(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        for name, table in triggers.items():
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}", None)
        schema_editor.execute(f"DROP FUNCTION IF EXISTS {function}()", None)

    return migrations.RunPython(install, uninstall, elidable=False)
