"""JSON request bodies, parsed so that no body can turn into a 500.

Python's ``json`` recurses once per level of nesting: a body of 100,000 ``[`` raises
``RecursionError``, which is not a ``ValueError`` and slips past every ``except ValueError`` around
``json.loads``. Everything that parses a request body as JSON goes through here instead:

* :func:`loads` for hand-written views and callback transports: ``json.loads`` that raises
  :class:`InvalidJSON` (a ``ValueError``) for anything that is not JSON, is not text, or nests
  deeper than :data:`MAX_JSON_DEPTH`, and never ``RecursionError``;
* :class:`JSONParser` for Django REST framework (``DEFAULT_PARSER_CLASSES``): the same failures are
  a ``ParseError``, so a 400 with a message.

The depth bound keeps the values that get through shallow enough for whatever recurses over them
later (serializers, ``json.dumps`` into a column, the database's own JSON parser), whatever the
stack depth at which that happens. No request this platform accepts comes near it.
"""

from __future__ import annotations

import json
from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from fimone.storable import unstorable

MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays and objects accepted in a request body (``[[1]]`` is depth 2)."""


class InvalidJSON(ValueError):
    """The body is not JSON this platform accepts; the message says why, without quoting it."""


def loads(data: str | bytes | bytearray, **kwargs: Any) -> Any:
    """``json.loads(data, **kwargs)``, raising :class:`InvalidJSON` for text that is not JSON,
    bytes that are not UTF-8/16/32, and nesting deeper than :data:`MAX_JSON_DEPTH`."""
    try:
        value = json.loads(data, **kwargs)
    except RecursionError:
        raise InvalidJSON(f"nested more than {MAX_JSON_DEPTH} levels deep") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        raise InvalidJSON(f"not valid JSON ({_reason(exc)})") from None
    check_depth(value)
    return value


def check_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise :class:`InvalidJSON` if ``value`` nests lists and dicts deeper than ``limit``.

    Iterative, so it cannot itself run out of stack; it stops at the first level past the limit.
    """
    level: list[Any] = [value]
    depth = 0
    while level:
        containers = [item for item in level if isinstance(item, list | dict)]
        if not containers:
            return
        depth += 1
        if depth > limit:
            raise InvalidJSON(f"nested more than {limit} levels deep")
        level = [
            child
            for container in containers
            for child in (container.values() if isinstance(container, dict) else container)
        ]


def _reason(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        # The message and position only: ``str(exc)`` is the same, but the document stays out.
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    return type(exc).__name__


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, whose failures are all a ``ParseError`` (400), never a 500: besides
    what DRF refuses itself (not JSON, not in the request's charset), a body nested deeper than
    :data:`MAX_JSON_DEPTH` (``json`` itself raises ``RecursionError`` past about 1,000 levels),
    and a body holding a value no database stores (NaN, ±Infinity, NUL: :mod:`fimone.storable`),
    refused naming its field — "The request holds a value that cannot be stored: arguments.amount
    is not a finite number." — whatever the endpoint does with it (docs/design.md §1.16)."""

    # NaN and Infinity are parsed so that the refusal can name their field (DRF's strict parser
    # would refuse them without saying where); ``1e999`` parses as Infinity either way.
    strict = False

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested more than {MAX_JSON_DEPTH} levels deep") from None
        try:
            check_depth(data)
        except InvalidJSON as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        problem = unstorable(data, name="the request body")
        if problem is not None:
            raise ParseError(f"The request holds a value that cannot be stored: {problem}.")
        return data
