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
* A read calls only functions a report needs: every call anywhere in the tree (select list, WHERE,
  ORDER BY, CTEs, subqueries, table functions in FROM, LATERAL) must be on the dialect's list in
  :data:`READ_FUNCTIONS`, or the text is not a read. A read-only transaction does not stop a function
  from acting outside it (``pg_create_physical_replication_slot`` survives the rollback,
  ``pg_read_file`` returns server files, ``dblink`` opens another connection), and no list of the
  dangerous ones can be complete, so the list names what may run, not what may not. How a call's
  name is found: sqlglot records where the name token of every call it parsed by name sits in the
  text (typed nodes such as ``exp.Sum`` and unknown ``exp.Anonymous`` alike), so the guard reads the
  name as written there: unquoted names fold to lower case, a quoted PostgreSQL name is taken
  exactly (``"PG_READ_FILE"`` is another function than ``pg_read_file``), and a qualified name passes
  only under ``pg_catalog`` on PostgreSQL. Calls the grammar builds without a name (``CAST``, ``::``,
  ``CASE``, ``EXTRACT(… FROM …)``, ``->``, ``AND``, ``current_date``, …) are checked by kind against
  :data:`SYNTAX_FORMS`. Both lists refuse what they do not know.

The list is one layer among several: the read tool also sends one statement through the extended
query protocol, in a read-only transaction of a read-only session, ideally as a read-only role, which
alone covers what a function list cannot see (a view or an operator an administrator defined).

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


def _names(*groups: str) -> frozenset[str]:
    return frozenset(name for group in groups for name in group.split())


# What a report calls, in both dialects. A name earns its place by computing a value from its
# arguments and the rows alone: nothing here touches a file, a setting, a sequence, a lock, another
# session or another connection, or runs SQL of its own.
_COMMON_READ_FUNCTIONS = _names(
    "avg count max min sum",
    "row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value",
    "coalesce nullif",
    "char concat concat_ws format length lower ltrim octet_length replace rtrim substr substring trim upper",
    "abs acos asin atan atan2 ceil ceiling cos cot degrees exp floor ln log log10 mod pi power radians",
    "random round sign sin sqrt tan trunc",
    "date json_array_length json_object",
)

POSTGRES_READ_FUNCTIONS = _COMMON_READ_FUNCTIONS | _names(
    # grammar sqlglot reads as a call: ARRAY(SELECT …), ROW(…), x = ANY / SOME / ALL (…)
    "all any array row some",
    # aggregates
    "any_value array_agg bit_and bit_or bool_and bool_or corr covar_pop covar_samp every json_agg",
    "json_object_agg jsonb_agg jsonb_object_agg mode percentile_cont percentile_disc regr_avgx regr_avgy",
    "regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy stddev stddev_pop",
    "stddev_samp string_agg var_pop var_samp variance",
    # comparisons, and casts written as calls
    "greatest least num_nonnulls num_nulls",
    "bool float4 float8 int2 int4 int8 numeric text timestamp timestamptz",
    # text
    "ascii bit_length btrim char_length character_length chr decode encode initcap left lpad md5",
    "normalize overlay position quote_ident quote_literal quote_nullable regexp_count regexp_instr",
    "regexp_like regexp_match regexp_matches regexp_replace regexp_split_to_array regexp_split_to_table",
    "regexp_substr repeat reverse right rpad sha224 sha256 sha384 sha512 split_part starts_with",
    "string_to_array string_to_table strpos to_hex translate",
    # numbers
    "cbrt div gcd lcm scale to_number width_bucket",
    # dates and times
    "age clock_timestamp date_add date_bin date_part date_subtract date_trunc extract isfinite",
    "justify_days justify_hours justify_interval make_date make_interval make_time make_timestamp",
    "make_timestamptz now statement_timestamp timezone to_char to_date to_timestamp transaction_timestamp",
    # json and jsonb
    "array_to_json json_array_elements json_array_elements_text json_build_array json_build_object",
    "json_each json_each_text json_extract_path json_extract_path_text json_object_keys json_strip_nulls",
    "json_to_record json_to_recordset json_typeof jsonb_array_elements jsonb_array_elements_text",
    "jsonb_array_length jsonb_build_array jsonb_build_object jsonb_each jsonb_each_text",
    "jsonb_extract_path jsonb_extract_path_text jsonb_object jsonb_object_keys jsonb_path_exists",
    "jsonb_path_match jsonb_path_query jsonb_path_query_array jsonb_path_query_first jsonb_pretty",
    "jsonb_strip_nulls jsonb_to_record jsonb_to_recordset jsonb_typeof row_to_json to_json to_jsonb",
    # arrays, and rows made from a value (table functions in FROM)
    "array_append array_cat array_dims array_length array_lower array_ndims array_position",
    "array_positions array_prepend array_remove array_replace array_to_string array_upper cardinality",
    "generate_series generate_subscripts unnest",
    # full-text search
    "plainto_tsquery phraseto_tsquery to_tsquery to_tsvector ts_rank websearch_to_tsquery",
)
"""What a PostgreSQL read may call. Not here, on purpose: every other ``pg_*`` function (server
files, replication slots, backends, WAL, configuration), ``lo_*``, ``dblink*``, ``set_config`` and
``current_setting`` (a report has no use for the server's configuration, which names its paths),
``nextval`` / ``setval``, ``txid_*`` and advisory locks, ``pg_sleep``, and ``query_to_xml``-like
functions that run SQL of their own."""

SQLITE_READ_FUNCTIONS = _COMMON_READ_FUNCTIONS | _names(
    # aggregates and conditionals
    "group_concat string_agg total",
    "ifnull iif likelihood likely unlikely",
    # text, numbers, values
    "glob hex instr like printf quote soundex unhex unicode",
    "log2 pow randomblob typeof",
    # dates and times
    "datetime julianday strftime time timediff unixepoch",
    # json
    "json json_array json_each json_extract json_group_array json_group_object json_insert json_patch",
    "json_quote json_remove json_replace json_set json_tree json_type json_valid",
    "jsonb jsonb_array jsonb_extract jsonb_object",
    # the schema, through the pragmas SQLite offers as table functions (those have no side effects)
    "pragma_foreign_key_list pragma_index_info pragma_index_list pragma_table_info pragma_table_list",
    "pragma_table_xinfo",
)
"""What a SQLite read may call. Not here, on purpose: ``load_extension`` (runs native code),
``readfile`` / ``writefile`` / ``edit`` (files, where an extension defines them), ``fts3_tokenizer``,
``zeroblob`` and the ``sqlite_*`` introspection functions."""

READ_FUNCTIONS: dict[Dialect, frozenset[str]] = {
    "postgres": POSTGRES_READ_FUNCTIONS,
    "sqlite": SQLITE_READ_FUNCTIONS,
}

SYNTAX_FORMS: tuple[type[exp.Func], ...] = (
    # logic and conditionals
    exp.Connector,  # AND, OR, XOR
    exp.Case,
    exp.If,  # a CASE branch, IIF
    exp.Exists,
    # casts and collations: CAST(… AS …), ::, DATE '…', COLLATE
    exp.Cast,
    exp.Collate,
    # keyword forms of functions on the lists
    exp.Extract,  # EXTRACT(… FROM …), date_part
    exp.Trim,
    exp.Substring,
    exp.StrPosition,  # POSITION(… IN …)
    exp.Overlay,
    exp.Ceil,
    exp.Floor,
    exp.Initcap,
    exp.Chr,
    exp.Decode,
    exp.Normalize,
    exp.GroupConcat,  # string_agg, group_concat
    exp.JSONArrayAgg,  # json_agg
    exp.JSONObject,  # json_object
    exp.TsOrDsToTimestamp,  # built inside SQLite's strftime
    exp.Unnest,  # unnest(…) in FROM, which sqlglot parses by a rule of its own
    # values of the session and the clock
    exp.CurrentDate,
    exp.CurrentTime,
    exp.CurrentTimestamp,
    exp.Localtime,
    exp.Localtimestamp,
    exp.CurrentUser,
    exp.CurrentRole,
    exp.SessionUser,
    exp.CurrentSchema,
    exp.CurrentCatalog,
    # operators
    exp.Array,  # ARRAY[…]
    exp.Pow,  # ^
    exp.Sqrt,  # |/
    exp.RegexpLike,  # ~, REGEXP
    exp.RegexpILike,  # ~*
    exp.StartsWith,  # ^@
    exp.MatchAgainst,  # @@
    exp.JSONExtract,  # ->
    exp.JSONExtractScalar,  # ->>
    exp.JSONBExtract,  # #>
    exp.JSONBExtractScalar,  # #>>
    exp.JSONBContainsTopKey,  # ?
    exp.JSONBContainsAnyTopKeys,  # ?|
    exp.JSONBContainsAllTopKeys,  # ?&
    exp.JSONBDeleteAtPath,  # #-
    exp.ArrayContainsAll,  # @>
    exp.ArrayContainedBy,  # <@
    exp.ArrayOverlaps,  # &&
)
"""Calls sqlglot builds from the grammar rather than from a name written in the text (operators,
keyword forms, the builders' own inner nodes): checked by kind, since there is no name to read."""

ALLOWED_SCHEMA: dict[Dialect, str] = {"postgres": "pg_catalog"}
"""The one schema a read may name before a function: where PostgreSQL's built-ins live."""

_QUOTES = {'"': '"', "`": "`", "[": "]"}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :func:`classify_sql` found.

    ``statements`` is how many statements the text holds (0 for an empty text or comments only),
    ``None`` when it could not be parsed. ``write`` names what makes it something other than a
    read (``"DELETE"``, ``"3 statements"``, ``"SQL that could not be parsed (…)"``), ``None`` for a read.
    ``function`` is the call a read may not make, as written (``"pg_catalog.pg_read_file"``), when
    that is what makes it something other than a read.
    """

    statements: int | None
    write: str | None
    function: str | None = None

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
    write = _write_in(parsed[0])
    if write is not None:
        return Verdict(statements=1, write=write)
    function = _refused_call(parsed[0], sql, dialect)
    if function is not None:
        return Verdict(statements=1, write=f"a call to {function}()", function=function)
    return Verdict(statements=1, write=None)


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
    return None


def _refused_call(statement: exp.Expression, sql: str, dialect: Dialect) -> str | None:
    """The first call in ``statement`` that is not on the dialect's lists, as written; ``None``
    when every call is."""
    allowed = READ_FUNCTIONS[dialect]
    for node in statement.walk():
        if not isinstance(node, exp.Func):
            continue
        written = _written_name(node, sql)
        qualifier = _qualifier(node)
        # Built from the grammar rather than from a name, a call is judged by its kind.
        passes = (
            isinstance(node, SYNTAX_FORMS) if written is None else _normalised(written, dialect) in allowed
        )
        if qualifier and [_normalised(part, dialect) for part in qualifier] != [ALLOWED_SCHEMA.get(dialect)]:
            passes = False
        if not passes:
            return ".".join([*qualifier, written or _form_name(node, dialect)])
    return None


def _form_name(node: exp.Func, dialect: Dialect) -> str:
    """A name for a call the grammar built, as the dialect would write it (``json_table``)."""
    try:
        head = node.sql(dialect=dialect).split("(", 1)[0].strip()
    except (SqlglotError, RecursionError):
        head = ""
    return head.lower() if head.isidentifier() else node.key


def _written_name(node: exp.Func, sql: str) -> str | None:
    """The call's name as the text spells it (quotes included), ``None`` for a node the grammar
    built without one."""
    start, end = node.meta.get("start"), node.meta.get("end")
    if isinstance(start, int) and isinstance(end, int) and 0 <= start <= end < len(sql):
        return sql[start : end + 1]
    if isinstance(node, exp.Anonymous | exp.AnonymousAggFunc):
        # sqlglot always keeps these names; a quoted one stays an Identifier.
        this = node.args.get("this")
        return f'"{this.name}"' if isinstance(this, exp.Identifier) and this.quoted else node.name
    return None


def _qualifier(node: exp.Func) -> list[str]:
    """The schema (and anything else) written before the call's name: ``pg_catalog.lower(…)`` is
    parsed as a ``Dot`` whose right side is the call, ``FROM public.generate_series(…)`` as a
    ``Table`` whose ``db`` (and ``catalog``) name the schema."""
    parent = node.parent
    if isinstance(parent, exp.Dot) and parent.expression is node:
        return _path(parent.this)
    if isinstance(parent, exp.Table) and parent.this is node:
        parts = (parent.args.get("catalog"), parent.args.get("db"))
        return [name for part in parts if part is not None for name in _path(part)]
    return []


def _path(node: exp.Expression) -> list[str]:
    if isinstance(node, exp.Identifier):
        return [_spelled(node)]
    if isinstance(node, exp.Dot):
        return [*_path(node.this), *_path(node.expression)]
    if isinstance(node, exp.Column):
        return [_spelled(part) for part in node.parts]
    return [node.sql()]


def _spelled(identifier: exp.Identifier) -> str:
    return f'"{identifier.name}"' if identifier.quoted else identifier.name


def _normalised(written: str, dialect: Dialect) -> str:
    """How the database reads a name: unquoted, in lower case; quoted, exactly on PostgreSQL (where
    ``"LOWER"`` is not ``lower``) and in lower case on SQLite (whose names ignore case). Anything
    else (``U&"…"`` escapes, a doubled quote) stays as written, so it is on no list."""
    closing = _QUOTES.get(written[:1])
    if closing is None:
        return written.lower()
    inner = written[1:-1]
    if len(written) < 2 or written[-1] != closing or closing in inner:
        return written
    return inner if dialect == "postgres" else inner.lower()


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


def _parse_reason(exc: SqlglotError) -> str:
    errors = getattr(exc, "errors", None)
    if errors:
        first = errors[0]
        return f"{first.get('description')}, line {first.get('line')}, column {first.get('col')}"
    text = _ANSI.sub("", str(exc)).splitlines()
    return text[0][:120] if text else type(exc).__name__
