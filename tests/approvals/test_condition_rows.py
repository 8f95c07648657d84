"""The condition editor's rows as the form reads them: numbers as people type them, never a
guess — a value that is not plainly a number stays text, for the form to refuse or the condition
to judge in doubt (docs/design.md §1.16)."""

from __future__ import annotations

import json

import pytest
from django.http import QueryDict

from approvals.condition_rows import ConditionRowsWidget, Field, check_rows, rows_in_words, suggested_rows


def posted(*rows: tuple[str, str, str]) -> list[dict]:
    data = QueryDict(mutable=True)
    for field, op, value in rows:
        data.appendlist("c-field", field)
        data.appendlist("c-op", op)
        data.appendlist("c-value", value)
    widget = ConditionRowsWidget(fields=[Field("amount", "Amount", number=True), Field("vendor", "Vendor")])
    return json.loads(widget.value_from_datadict(data, {}, "c"))


@pytest.mark.parametrize(
    ("typed", "read"),
    [("50000", 50000), ("50,000", 50000), ("1,234.5", 1234.5), ("-3", -3), ("0.25", 0.25)],
)
def test_a_number_reads_as_people_type_it(typed, read) -> None:
    assert posted(("amount", "<=", typed)) == [{"field": "amount", "op": "<=", "value": read}]


@pytest.mark.parametrize("typed", ["1,2", "1.200,50", "25000 USD", "lots", "1,23,456"])
def test_a_value_that_is_not_plainly_a_number_stays_text_never_a_guess(typed) -> None:
    assert posted(("amount", "<=", typed)) == [{"field": "amount", "op": "<=", "value": typed}]


def test_blank_rows_are_dropped_one_of_splits_on_commas_and_text_stays_text() -> None:
    rows = posted(("", "==", ""), ("vendor", "in", "Lumen, Contoso"), ("vendor", "!=", "Bolt, Inc"))

    assert rows == [
        {"field": "vendor", "op": "in", "value": ["Lumen", "Contoso"]},
        {"field": "vendor", "op": "!=", "value": "Bolt, Inc"},
    ]


def test_a_field_with_no_value_is_refused_in_words() -> None:
    from django import forms

    with pytest.raises(forms.ValidationError, match="Condition 2: give a value for “vendor”"):
        check_rows(posted(("amount", "<=", "5"), ("vendor", "==", "")))


def test_a_standing_approval_starts_from_sums_of_money_never_an_id_or_a_note() -> None:
    args = {"purchase_id": "PO-1002", "amount": 4800, "note": "paid from the chat", "qty": 2}

    assert suggested_rows(args) == [{"field": "amount", "op": "<=", "value": 4800}]
    words = rows_in_words(suggested_rows(args), fields=[Field("amount", "Amount", True)], currency="USD")
    assert words == "Amount is at most 4,800.00 USD"
