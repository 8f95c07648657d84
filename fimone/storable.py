"""What no supported database stores, named in words: the one rule every edge asks (docs/design.md §1.16).

JSON from outside (an MCP client's arguments, a model's tool call, an API body) may hold values
that parse but that a database refuses: a float NaN or ±Infinity (invalid JSON: SQLite's
``JSON_VALID`` check and PostgreSQL ``jsonb`` refuse it; a JSON parser reads ``1e999`` as
Infinity too), a string or an object key holding ``\\x00`` (refused by ``jsonb`` and by PostgreSQL
text columns), a lone surrogate (not UTF-8: no driver can send it). Where such JSON enters and
would be stored, the edge asks :func:`unstorable` first and refuses with its sentence, so that the
sender reads which field is wrong rather than a database's message or a 500.

What the engine writes itself is cleaned rather than refused (``agents.engine.jsonsafe``, with
the same :data:`UNSTORABLE_CHARS`): a tool's result must be recorded whatever it holds.
"""

from __future__ import annotations

import math
import re
from typing import Any

UNSTORABLE_CHARS = re.compile("[\x00\ud800-\udfff]")
"""Characters no supported database stores in text or JSON: NUL and lone surrogates."""


def unstorable(value: Any, *, name: str = "the value") -> str | None:
    """``None`` when a database can store ``value`` (JSON as a parser builds it: dicts with text
    keys, lists, text, numbers, booleans, ``None``); otherwise the first part, in document order,
    that it cannot, said in words with its path as ``argument_errors`` writes one (keys and list
    indexes joined by dots): ``"amount is not a finite number"``, ``"lines.1.note contains a NUL
    character"``, ``"a key of meta contains a NUL character"``. ``name`` stands for ``value``
    itself where the path is empty (``"the message contains a NUL character"``). A key longer
    than :data:`MAX_SEGMENT` and a path deeper than :data:`MAX_SEGMENTS` are shown shortened.

    Pure and total: it never raises, and walks without recursion (any depth). Values of other
    types are not its concern (a JSON parser builds none) and pass."""
    # (path, item, is_key): an object's keys are looked at in turn with their values.
    stack: list[tuple[tuple[str, ...], Any, bool]] = [((), value, False)]
    while stack:
        path, item, is_key = stack.pop()
        if is_key:
            problem = _char_problem(item) if isinstance(item, str) else None
            if problem is not None:
                return f"a key of {_where(path, name)} {problem}"
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{_where(path, name)} is not a finite number"
        elif isinstance(item, str):
            problem = _char_problem(item)
            if problem is not None:
                return f"{_where(path, name)} {problem}"
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):  # popped in document order
                stack.append(((*path, str(key)), child, False))
                stack.append((path, key, True))
        elif isinstance(item, list | tuple):
            for index in range(len(item) - 1, -1, -1):
                stack.append(((*path, str(index)), item[index], False))
    return None


MAX_SEGMENT = 40
"""Longer keys are shown cut (a sentence, not an echo of what was sent)."""
MAX_SEGMENTS = 8
"""Deeper paths are shown by their first and last keys."""


def _where(path: tuple[str, ...], name: str) -> str:
    if not path:
        return name
    shown = [key if len(key) <= MAX_SEGMENT else key[: MAX_SEGMENT - 1] + "…" for key in path]
    if len(shown) > MAX_SEGMENTS:
        shown = [*shown[:3], "…", *shown[-(MAX_SEGMENTS - 4) :]]
    return ".".join(shown)


def _char_problem(text: str) -> str | None:
    found = UNSTORABLE_CHARS.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "contains a NUL character"
    return "contains a character that is not valid Unicode (a lone surrogate)"
