"""The hook editor's picker lists each hook once: a hook's other names (a former name, another
product's) are not offered, but a saved row that uses one keeps it."""

from __future__ import annotations

from console.hook_editor.catalog_choices import hook_choices


def offered(choices) -> list[str]:
    return [value for _group, items in choices[1:] for value, _label in items]


def test_the_picker_offers_no_second_name_of_a_hook() -> None:
    names = offered(hook_choices())

    assert "result_truncate" in names and "confirm_when" in names
    assert "truncate_result" not in names and "feishu_gate" not in names


def test_a_saved_row_keeps_the_name_it_was_declared_with() -> None:
    names = offered(hook_choices(keep="truncate_result"))

    assert "truncate_result" in names and "feishu_gate" not in names
