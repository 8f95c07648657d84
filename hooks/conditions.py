"""Conditions on a call's arguments, judged in three values (docs/design.md §1.16, doubt goes to a person).

One ``{field, op, value}`` row is read by ``confirm_when`` (met: ask a person), by a standing
approval (met: approve without asking) and by an approval stage (met: this stage asks). A
condition that cannot decide — a value that is not a number where one is compared, a type it did
not expect, a field the tool declares but the call leaves out without a default — is neither met
nor unmet: it is in :attr:`Verdict.DOUBT`, with the reason in words, and each reader turns doubt
towards a person (``confirm_when`` asks, a grant does not cover the call, a stage applies). No
reader ever treats doubt as "allow".

Whether a value is a number follows :mod:`fimone.numbers`: a JSON number, or a string the tool's
schema declares numeric that spells a plain decimal exactly. "25,000.00" and "25000 USD" are not
numbers. Without the tool's schema (``schema=None``) no string is a number.

Conditions combine as in three-valued logic: ``all`` is unmet as soon as one condition is unmet
(whatever the doubtful ones hold, the whole cannot hold), met only when all are met, else in
doubt; ``any`` is met as soon as one is met, unmet only when all are unmet, else in doubt.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from fimone.numbers import declares_number, field_schema, number_of, threshold_of

ORDERING_OPS = (">", ">=", "<", "<=")
CONFIRM_OPS = (*ORDERING_OPS, "==", "!=", "in", "regex")
OP_WORDS = {
    ">": "more than",
    ">=": "at least",
    "<": "less than",
    "<=": "at most",
    "==": "is",
    "!=": "is not",
    "in": "is one of",
    "regex": "matches",
}
OP_PHRASES = {op: f"is {words}" if op in ORDERING_OPS else words for op, words in OP_WORDS.items()}
"""Each operator as it reads between a field and a value: "Amount *is at most* 900"."""
_MISSING: Any = object()
_NO_ITEM: Any = object()


class Verdict(enum.Enum):
    MET = "met"
    UNMET = "unmet"
    DOUBT = "doubt"


@dataclass(frozen=True, slots=True)
class Judgement:
    """A verdict and, in doubt, why in words ("amount is "25,000.00", which is not a number")."""

    verdict: Verdict
    why: str = ""

    @property
    def met(self) -> bool:
        return self.verdict is Verdict.MET

    @property
    def unmet(self) -> bool:
        return self.verdict is Verdict.UNMET

    @property
    def doubt(self) -> bool:
        return self.verdict is Verdict.DOUBT


MET = Judgement(Verdict.MET)
UNMET = Judgement(Verdict.UNMET)


def _doubt(why: str) -> Judgement:
    return Judgement(Verdict.DOUBT, why)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "…"


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "true or false"
    if value is None:
        return "empty (null)"
    return _shown(value)


def _lookup(args: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path``; :data:`_MISSING` when an object lacks the key, :data:`_NO_ITEM` when
    a list has no such item (the call has no such thing: nothing to judge), or a
    :class:`Judgement` in doubt when the path meets a value it cannot go into."""
    value = args
    for depth, part in enumerate(path):
        if isinstance(value, Mapping):
            value = value.get(part, _MISSING)
            if value is _MISSING:
                return _MISSING
        elif isinstance(value, list) and part.isdigit():
            if int(part) >= len(value):
                return _NO_ITEM
            value = value[int(part)]
        else:
            where = ".".join(path[:depth]) or "the arguments"
            return _doubt(f"{where} is {_kind(value)}, which has no {part}")
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


class Condition:
    """One ``{field, op, value}`` row, parsed once, then :meth:`judge`\\ d on a call's arguments.
    Raises ``ValueError`` naming ``where`` for a bad row."""

    __slots__ = ("field", "op", "path", "regex", "threshold", "value")

    def __init__(self, raw: dict[str, Any], where: str) -> None:
        self.field, self.op, self.value = raw["field"], raw["op"], raw["value"]
        self.path = tuple(self.field.split("."))
        self.regex: re.Pattern[str] | None = None
        self.threshold: Decimal | None = None
        if self.op in ORDERING_OPS:
            self.threshold = threshold_of(self.value)
            if self.threshold is None:
                raise ValueError(f"{where}.value must be a number for {self.op!r}")
        if self.op == "in" and not isinstance(self.value, list):
            raise ValueError(f"{where}.value must be a list for 'in'")
        if self.op == "regex":
            if not isinstance(self.value, str):
                raise ValueError(f"{where}.value must be a regular expression")
            try:
                self.regex = re.compile(self.value)
            except re.error as exc:
                raise ValueError(f"{where}.value is not a valid regular expression: {exc}") from None

    def judge(self, args: Any, schema: Mapping[str, Any] | None = None) -> Judgement:
        """Whether ``args`` meet the condition, fail to, or leave it in doubt. ``schema``: the
        tool's parameters (a JSON schema) when known: it says which strings are numbers and which
        fields the tool has. A field the call leaves out is unmet when the tool does not declare
        it (the condition is not about this tool); when it does, its declared ``default`` is
        judged, and without one the condition is in doubt (what the tool does then is unknown)."""
        node = field_schema(schema, self.path) if schema else None
        actual = _lookup(args, self.path)
        if actual is _NO_ITEM:
            return UNMET
        if isinstance(actual, Judgement):
            return actual
        if actual is _MISSING:
            if node is None:
                return UNMET
            if "default" not in node:
                return _doubt(f"{self.field} is not given, and what the tool then does is not known")
            actual = node["default"]
        numeric_text = declares_number(node)
        op = self.op
        if op in ORDERING_OPS:
            number = number_of(actual, numeric_text=numeric_text)
            if number is None:
                return _doubt(f"{self.field} is {_kind(actual)}, which is not a number")
            assert self.threshold is not None
            held = {
                ">": number > self.threshold,
                ">=": number >= self.threshold,
                "<": number < self.threshold,
                "<=": number <= self.threshold,
            }[op]
            return MET if held else UNMET
        if op in ("==", "!="):
            same = self._equal(actual, self.value, numeric_text)
            if same.doubt or op == "==":
                return same
            return UNMET if same.met else MET
        if op == "in":
            judged = [self._equal(actual, option, numeric_text) for option in self.value]
            if any(j.met for j in judged):
                return MET
            doubt = next((j for j in judged if j.doubt), None)
            return doubt if doubt is not None else UNMET
        assert self.regex is not None
        return MET if self.regex.search(_text(actual)) is not None else UNMET

    def _equal(self, actual: Any, expected: Any, numeric_text: bool) -> Judgement:
        """``actual == expected`` in three values: numbers compare as numbers; a value of a kind
        the expected one cannot be compared with (a text that is not a number where a number is
        expected, an object or list where a scalar is, a boolean where something else is) is in
        doubt."""
        want = threshold_of(expected) if not isinstance(expected, bool) else None
        if isinstance(expected, int | float) and not isinstance(expected, bool):
            number = number_of(actual, numeric_text=numeric_text)
            if number is None:
                return _doubt(f"{self.field} is {_kind(actual)}, which is not a number")
            return MET if number == want else UNMET
        if isinstance(actual, Mapping | list) and not isinstance(expected, Mapping | list):
            return _doubt(f"{self.field} is {_kind(actual)}, not a single value")
        if isinstance(actual, bool) != isinstance(expected, bool):
            return _doubt(f"{self.field} is {_kind(actual)}, not comparable with {_shown(expected)}")
        number = number_of(actual, numeric_text=numeric_text)
        if number is not None and want is not None:
            return MET if number == want else UNMET
        return MET if actual == expected else UNMET

    def describe(self) -> str:
        return f"{self.field} {self.op} {json.dumps(self.value, ensure_ascii=False)}"


def conditions_of(rows: Any, *, where: str = "conditions") -> tuple[Condition, ...]:
    """Parse a list of ``{field, op, value}`` rows (possibly empty). Raises ``ValueError`` saying
    which row is wrong and why."""
    if not isinstance(rows, list):
        raise ValueError(f"{where} must be a list of {{field, op, value}}")
    parsed = []
    for index, raw in enumerate(rows):
        at = f"{where}[{index}]"
        if not isinstance(raw, dict) or not {"field", "op", "value"} <= set(raw):
            raise ValueError(f"{at} must be an object with field, op and value")
        if not isinstance(raw["field"], str) or not raw["field"] or raw["op"] not in CONFIRM_OPS:
            raise ValueError(f"{at}: field must be a name and op one of {', '.join(CONFIRM_OPS)}")
        parsed.append(Condition(raw, at))
    return tuple(parsed)


def judge(
    conditions: Sequence[Condition],
    args: Any,
    *,
    schema: Mapping[str, Any] | None = None,
    any_: bool = False,
) -> Judgement:
    """The conditions combined (``all``, or ``any`` with ``any_``) in three-valued logic (module
    docstring). No conditions: met (nothing restricts)."""
    doubt: Judgement | None = None
    for condition in conditions:
        judged = condition.judge(args, schema)
        if judged.met and any_:
            return MET
        if judged.unmet and not any_:
            return UNMET
        if judged.doubt and doubt is None:
            doubt = judged
    if doubt is not None:
        return doubt
    return UNMET if any_ and conditions else MET
