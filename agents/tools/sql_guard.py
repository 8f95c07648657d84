"""Which SQL a read tool may run: a parser's verdict (sqlglot), never a keyword or a hand-made split.

Contract of :func:`classify_sql`:

* The text is parsed in the database's own dialect (``postgres`` or ``sqlite``). Text the parser
  cannot read is not a read: a dialect feature the parser does not know is refused by the read tool
  and left to the write tool, whose every call a person confirms.
* A read is **exactly one** statement whose root is a ``SELECT``, a set operation (``UNION`` /
  ``INTERSECT`` / ``EXCEPT``) or a parenthesised one of those, and whose whole tree holds no write:
  no INSERT / UPDATE / DELETE / MERGE (in a CTE or anywhere else), no ``SELECT … INTO``, no
  ``FOR UPDATE`` / ``FOR SHARE`` row locks, no DDL, COPY, CALL, DO, SET, PRAGMA, ATTACH or
  transaction control. sqlglot's generic ``Command`` (its fallback for statements it only
  recognises by their first word: CALL, DO, EXPLAIN, SHOW, …) counts as a write.
* A read also calls none of :data:`SIDE_EFFECT_FUNCTIONS`: functions that act outside the
  read-only transaction (session settings, other sessions, other connections, server files,
  advisory locks, sequences). The list cannot be complete — a user-defined function may do anything —
  so it is one layer among several: the read tool also sends one statement through the extended
  query protocol, in a read-only transaction of a read-only session, ideally as a read-only role.

The verdict is about the text; the database's own checks still run on what is sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

Dialect = Literal["postgres", "sqlite"]

READ_ROOTS: tuple[type[exp.Expression], ...] = (exp.Select, exp.SetOperation)

WRITE_NODES: tuple[type[exp.Expression], ...] = (
    exp.DML,  # INSERT, UPDATE, DELETE, MERGE, COPY
    exp.DDL,  # CREATE (and INSERT again)
    exp.Insert,
    exp.Update,
    exp.Delete,
    exp.Merge,
    exp.Copy,
    exp.LoadData,
    exp.Export,
    exp.Into,  # SELECT … INTO creates a table
    exp.Lock,  # SELECT … FOR UPDATE / FOR SHARE takes row locks
    exp.Create,
    exp.Drop,
    exp.Alter,
    exp.TruncateTable,
    exp.Comment,
    exp.Command,  # CALL, DO, EXPLAIN (ANALYZE runs the statement), LOCK, SHOW, …
    exp.Execute,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
    exp.Set,
    exp.Use,
    exp.Pragma,
    exp.Attach,
    exp.Detach,
    exp.Grant,
    exp.Revoke,
    exp.Kill,
    exp.Analyze,
    exp.NextValueFor,
)

SIDE_EFFECT_FUNCTIONS = frozenset(
    {
        "set_config",  # may change a session default, e.g. default_transaction_read_only
        "nextval",
        "setval",
        "pg_terminate_backend",
        "pg_cancel_backend",
        "pg_reload_conf",
        "pg_rotate_logfile",
        "pg_switch_wal",
        "pg_notify",
        "pg_logical_emit_message",
        "load_extension",  # SQLite
    }
)
SIDE_EFFECT_PREFIXES = ("dblink", "lo_", "pg_advisory_", "pg_try_advisory_")

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :func:`classify_sql` found.

    ``statements`` is how many statements the text holds (0 for an empty text or comments only),
    ``None`` when it could not be parsed. ``write`` names what makes it something other than a
    read (``"DELETE"``, ``"3 statements"``, ``"SQL that could not be parsed (…)"``), ``None`` for a read.
    """

    statements: int | None
    write: str | None

    @property
    def is_read(self) -> bool:
        return self.write is None and self.statements == 1


def classify_sql(sql: str, *, dialect: Dialect) -> Verdict:
    """Whether ``sql`` is exactly one read statement, in ``dialect`` (see the module docstring)."""
    try:
        parsed = _statements(sql, dialect)
    except SqlglotError as exc:
        return Verdict(statements=None, write=f"SQL that could not be parsed ({_parse_reason(exc)})")
    except RecursionError:  # the parser recurses per nesting level: 5,000 parentheses defeat it
        return Verdict(statements=None, write="SQL nested too deeply to be parsed")
    if not parsed:
        return Verdict(statements=0, write="no statement")
    if len(parsed) > 1:
        return Verdict(statements=len(parsed), write=f"{len(parsed)} statements")
    return Verdict(statements=1, write=_write_in(parsed[0]))


def count_statements(sql: str, *, dialect: Dialect) -> int | None:
    """How many statements ``sql`` holds, ``None`` when the parser cannot read it."""
    try:
        return len(_statements(sql, dialect))
    except (SqlglotError, RecursionError):
        return None


def _statements(sql: str, dialect: Dialect) -> list[exp.Expression]:
    # Empty pieces (";;") parse to None and a trailing comment to a bare Semicolon: neither runs.
    return [
        statement
        for statement in sqlglot.parse(sql, read=dialect)
        if statement is not None and not isinstance(statement, exp.Semicolon)
    ]


def _write_in(statement: exp.Expression) -> str | None:
    root = statement
    while isinstance(root, exp.Subquery | exp.Paren):
        root = root.this
    if not isinstance(root, READ_ROOTS):
        return _label(root)
    for node in statement.walk():
        if isinstance(node, WRITE_NODES):
            return f"{_label(node)} inside the query"
        if isinstance(node, exp.Func) and _has_side_effects(node):
            return f"a call to {_function_name(node)}() inside the query"
    return None


def _label(node: exp.Expression) -> str:
    if isinstance(node, exp.Command):
        return str(node.this).upper() or "a command"
    if isinstance(node, exp.Into):
        return "SELECT … INTO"
    if isinstance(node, exp.Lock):
        return "FOR UPDATE" if node.args.get("update") else "FOR SHARE"
    if isinstance(node, exp.Transaction):
        return "BEGIN"
    return node.key.upper().replace("TRUNCATETABLE", "TRUNCATE")


def _function_name(node: exp.Func) -> str:
    return (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()


def _has_side_effects(node: exp.Func) -> bool:
    name = _function_name(node)
    return name in SIDE_EFFECT_FUNCTIONS or name.startswith(SIDE_EFFECT_PREFIXES)


def _parse_reason(exc: SqlglotError) -> str:
    errors = getattr(exc, "errors", None)
    if errors:
        first = errors[0]
        return f"{first.get('description')}, line {first.get('line')}, column {first.get('col')}"
    text = _ANSI.sub("", str(exc)).splitlines()
    return text[0][:120] if text else type(exc).__name__
