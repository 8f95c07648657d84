"""Conditions on a call's arguments as a form, wherever people write them — a standing approval's,
an approval stage's: rows of a field (the call's arguments by their labels, or a name typed), an
operator in words ("at most") and a value (a number box for a number), with the conditions said
back in a sentence ("Amount is at most 4,800.00 USD").

The rows post as three lists, ``<name>-field``, ``<name>-op`` and ``<name>-value``; the widget
hands the form the JSON text of ``[{"field", "op", "value"}]`` — what the conditions' form fields
read (a ``JSONField``, or a text field parsed as JSON) — and :func:`hooks.conditions.conditions_of`
stays the one judge of what a row may say. A row left empty is dropped; a row with a field and no
value is kept, for the form to refuse in words (:func:`check_rows`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django import forms
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from approvals.presentation import conditions_text, humanized_key, is_money_key
from hooks.conditions import CONFIRM_OPS, OP_PHRASES, ORDERING_OPS

EMPTY_ROWS = 2
"""Blank rows offered below the written ones (more: save, and two more come)."""


@dataclass(frozen=True)
class Field:
    """An argument a condition may be on: its key, its label, whether it is a number."""

    key: str
    label: str
    number: bool = False


def fields_of_call(args: Any, labels: dict[str, str] | None = None) -> list[Field]:
    """The arguments of a call that conditions may be on (scalars), labelled as the card labels
    them (``labels``: key → label), numbers first."""
    if not isinstance(args, dict):
        return []
    labels = labels or {}
    fields = [
        Field(str(key), labels.get(str(key)) or humanized_key(str(key)), _is_number(value))
        for key, value in args.items()
        if value is not None and not isinstance(value, dict | list)
    ]
    return sorted(fields, key=lambda f: not f.number)


def suggested_rows(args: Any) -> list[dict[str, Any]]:
    """Where a standing approval starts: its sums of money at most this call's ("amount <=
    4800"), which covers later, smaller payments; never an id or a free text, which would pin
    the approval to this one call. No sum of money: no row (the approver adds what matters)."""
    if not isinstance(args, dict):
        return []
    return [
        {"field": key, "op": "<=", "value": value}
        for key, value in args.items()
        if is_money_key(key) and _is_number(value)
    ]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def check_rows(rows: Any) -> None:
    """Raise ``ValidationError`` in words for a row that names a field but gives no value."""
    for index, row in enumerate(rows if isinstance(rows, list) else [], start=1):
        if isinstance(row, dict) and row.get("field") and row.get("value") in ("", None, []):
            raise forms.ValidationError(f"Condition {index}: give a value for “{row['field']}”.")


def rows_in_words(rows: Any, *, fields: list[Field] | None = None, currency: str | None = None) -> str:
    """The conditions as people read them (:func:`approvals.presentation.conditions_text`), the
    fields by the labels the rows offer them under."""
    return conditions_text(rows, labels={f.key: f.label for f in fields or []}, currency=currency)


class ConditionRowsWidget(forms.Widget):
    """Rows of field, operator and value (module docstring). ``fields``: the arguments to pick
    from (a select); without them, the field is typed (stage conditions, for any tool).
    ``preview``: a line under the rows that says them in words ("When Amount is at least
    50,000"), kept up to date as they change (``approvals/condition_rows.js``); off where the page
    says them in a sentence of its own (a standing approval's)."""

    class Media:
        css = {"all": ("approvals/condition_rows.css",)}
        js = ("approvals/condition_rows.js",)

    def __init__(
        self, *, fields: list[Field] | None = None, preview: bool = True, currency: str | None = None
    ) -> None:
        super().__init__()
        self.fields = list(fields or [])
        self.preview = preview
        self.currency = currency

    def value_from_datadict(self, data: Any, files: Any, name: str) -> str:
        keys, ops, values = (data.getlist(f"{name}-{part}") for part in ("field", "op", "value"))
        # Which fields the page offered as numbers (the rows' own select says it; the server
        # judges numbers by the tool's schema whatever is stored, hooks.conditions).
        numbers = {f.key for f in self.fields if f.number} | set(data.get(f"{name}-numbers", "").split(","))
        rows = []
        for key, op, raw in zip(keys, ops, values, strict=False):
            key, raw = key.strip(), raw.strip()
            if not key and not raw:
                continue
            rows.append({"field": key, "op": op, "value": _typed(raw, op=op, number=key in numbers)})
        return json.dumps(rows, ensure_ascii=False)

    def render(
        self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None
    ) -> SafeString:
        rows = _rows_of(value)
        blank = {"field": "", "op": "==", "value": ""}
        shown = [*rows, *([blank] * EMPTY_ROWS)]
        numbers = ",".join(f.key for f in self.fields if f.number)
        preview = ""
        if self.preview:
            words = rows_in_words(rows, fields=self.fields, currency=self.currency)
            preview = format_html(
                '<p class="condition-words" aria-live="polite">{}</p>',
                f"When {words}." if words else "No condition: it always applies.",
            )
        return format_html(
            '<div class="condition-rows" data-name="{}" data-currency="{}" role="group" '
            'aria-label="Conditions"><input type="hidden" name="{}-numbers" value="{}">'
            '<div class="condition-head" aria-hidden="true"><span>Field</span><span>Condition</span>'
            "<span>Value</span></div>{}{}</div>",
            name,
            self.currency or "",
            name,
            numbers,
            format_html_join("", "{}", ((self._row(name, row, i),) for i, row in enumerate(shown, 1))),
            preview,
        )

    def _row(self, name: str, row: dict[str, Any], index: int) -> SafeString:
        key = str(row.get("field", ""))
        number = any(f.number for f in self.fields if f.key == key) or _is_number(row.get("value"))
        value = row.get("value", "")
        shown = ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)
        return format_html(
            '<div class="condition-row">{}{}<input name="{}-value" value="{}" aria-label="Value {}" '
            'inputmode="{}" autocomplete="off"></div>',
            self._field_input(name, key, index),
            self._op_select(name, str(row.get("op", "==")), index),
            name,
            shown,
            index,
            "decimal" if number else "text",
        )

    def _field_input(self, name: str, key: str, index: int) -> SafeString:
        if not self.fields:
            return format_html(
                '<input name="{}-field" value="{}" aria-label="Field {}" placeholder="e.g. amount" '
                'autocomplete="off">',
                name,
                key,
                index,
            )
        options = [("", "—", False), *((f.key, f.label, f.key == key) for f in self.fields)]
        if key and key not in {f.key for f in self.fields}:  # a field this call does not have
            options.append((key, humanized_key(key), True))
        return format_html(
            '<select name="{}-field" aria-label="Field {}">{}</select>',
            name,
            index,
            format_html_join(
                "",
                '<option value="{}"{}>{}</option>',
                ((k, mark_safe(" selected") if chosen else "", label) for k, label, chosen in options),
            ),
        )

    def _op_select(self, name: str, op: str, index: int) -> SafeString:
        return format_html(
            '<select name="{}-op" aria-label="Operator {}">{}</select>',
            name,
            index,
            format_html_join(
                "",
                '<option value="{}"{}>{}</option>',
                ((o, mark_safe(" selected") if o == op else "", OP_PHRASES[o]) for o in CONFIRM_OPS),
            ),
        )


def _rows_of(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except ValueError:  # what was typed could not be read: the form says so; start afresh
            return []
    return [row for row in value if isinstance(row, dict)] if isinstance(value, list) else []


_NUMBER_TYPED = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
"""A number as people type one: "50000", "50,000", "1,234.5" — commas only between groups of
three digits. "1,2" is not one (a decimal comma or a typo: read as 12 it would widen a standing
approval tenfold)."""


def _typed(raw: str, *, op: str, number: bool) -> Any:
    """What a value box holds, as the condition compares it: numbers for a number field or an
    ordering, when typed as one (:data:`_NUMBER_TYPED`); "in" a list of what the commas separate;
    text otherwise — a text where a number is compared is refused (``conditions_of``) or judged in
    doubt, never guessed at."""
    if op == "in":
        return [_typed(part.strip(), op="==", number=number) for part in raw.split(",") if part.strip()]
    if (number or op in ORDERING_OPS) and _NUMBER_TYPED.fullmatch(raw):
        parsed = Decimal(raw.replace(",", ""))
        return int(parsed) if parsed == parsed.to_integral_value() else float(parsed)
    return raw
