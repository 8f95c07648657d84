"""Checking an eval case's output against its expectation."""

from __future__ import annotations

import re

from fimone.parsers import loads as json_loads


def expectation_errors(check: str, expected: str) -> list[str]:
    """Why ``expected`` cannot be used with ``check`` (an empty list when it can)."""
    if check == "regex":
        try:
            re.compile(expected)
        except re.error as exc:
            return [f"not a valid regular expression: {exc}"]
    elif check == "json_equals":
        try:
            json_loads(expected)
        except ValueError as exc:  # InvalidJSON: not JSON, or nested too deep
            return [f"not valid JSON: {exc}"]
    elif check != "contains":
        return ["the check must be contains, regex or json_equals"]
    return []


def grade(check: str, expected: str, output: str) -> tuple[bool, str]:
    """``(passed, why)`` for ``output`` under ``check``."""
    if check == "contains":
        ok = expected in output
        return ok, "" if ok else f"the output does not contain {expected!r}"
    if check == "regex":
        ok = re.search(expected, output) is not None
        return ok, "" if ok else f"the output does not match /{expected}/"
    try:
        got = json_loads(output)
    except ValueError:  # InvalidJSON: not JSON, or nested too deep to compare
        return False, "the output is not JSON"
    ok = got == json_loads(expected)
    return ok, "" if ok else "the output's JSON differs from the expected JSON"
