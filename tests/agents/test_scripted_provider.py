"""The scripted model's ``delay``: a turn can answer as late as a slow model would."""

from __future__ import annotations

import time

import pytest

from agents.llm.base import LLMConfigError
from agents.llm.scripted import ScriptedProvider


async def test_a_turn_with_a_delay_answers_that_much_later() -> None:
    provider = ScriptedProvider({"turns": [{"content": "slow", "delay": 0.3}]})

    started = time.monotonic()
    answer = await provider.complete(messages=[{"role": "user", "content": "hi"}], tools=[])

    assert answer.content == "slow"
    assert time.monotonic() - started >= 0.3


async def test_a_turn_without_a_delay_answers_at_once() -> None:
    provider = ScriptedProvider({"turns": [{"content": "fast"}]})

    started = time.monotonic()
    await provider.complete(messages=[{"role": "user", "content": "hi"}], tools=[])

    assert time.monotonic() - started < 0.2


@pytest.mark.parametrize("delay", [-1, 61, "2", True])
def test_a_delay_that_is_not_a_sane_number_of_seconds_is_refused(delay: object) -> None:
    with pytest.raises(LLMConfigError, match="delay must be between 0 and 60 seconds"):
        ScriptedProvider({"turns": [{"content": "x", "delay": delay}]})


# --- reacting to what a tool answered ------------------------------------------------------------


def answered(observation: str, user: str = "pay") -> list[dict[str, object]]:
    """A conversation where the model called a tool once and ``observation`` came back."""
    call = {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
    return [
        {"role": "user", "content": user},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": observation},
    ]


PAID = '{"id": "PO-1001", "vendor": "Lumen", "amount": 1200.0, "currency": "USD", "paid_reference": "PAY-1"}'


async def test_content_names_fields_of_a_json_observation_and_formats_its_numbers() -> None:
    provider = ScriptedProvider(
        {
            "turns": [
                {"tool_calls": [{"name": "t"}]},
                {
                    "content": "Paid {last.id}: {last.amount:,.2f} {last.currency}, "
                    "reference {last.paid_reference}."
                },
            ]
        }
    )

    answer = await provider.complete(messages=answered(PAID), tools=[])

    assert answer.content == "Paid PO-1001: 1,200.00 USD, reference PAY-1."


async def test_a_choice_plays_the_first_case_whose_conditions_hold_and_names_what_they_matched() -> None:
    script = {
        "turns": [
            {"tool_calls": [{"name": "t"}]},
            {
                "choose": [
                    {"when": {"last": r"^\[\]$"}, "content": "Nothing is pending."},
                    {"when": {"last.paid_reference": "."}, "content": "Paid {last.id}."},
                    {
                        "when": {"last": r"^Rejected by (?P<who>.+?): (?P<why>.*?)\. "},
                        "content": "{match.who}: {match.why}",
                    },
                    {"content": "Something else: {last}"},
                ]
            },
        ]
    }
    provider = ScriptedProvider(script)

    async def says(observation: str) -> str:
        return (await provider.complete(messages=answered(observation), tools=[])).content

    assert await says("[]") == "Nothing is pending."
    assert await says(PAID) == "Paid PO-1001."
    assert await says("Rejected by april: over budget. The call was not executed.") == "april: over budget"
    assert await says("Tool error: down") == "Something else: Tool error: down"


async def test_a_choice_that_no_case_fits_ends_the_turns() -> None:
    provider = ScriptedProvider(
        {"turns": [{"tool_calls": [{"name": "t"}]}, {"choose": [{"when": {"last.id": "x"}, "content": "x"}]}]}
    )

    answer = await provider.complete(messages=answered("[]"), tools=[])

    assert (answer.content, answer.tool_calls) == ("I have nothing more to do.", [])


async def test_each_renders_one_line_per_listed_object() -> None:
    provider = ScriptedProvider(
        {
            "turns": [
                {"tool_calls": [{"name": "t"}]},
                {
                    "content": "Purchases:\n{each}",
                    "each": {"line": "- {item.id}: {item.amount:,.2f} ({item.missing})"},
                },
            ]
        }
    )
    listed = '[{"id": "A", "amount": 5}, {"id": "B", "amount": 1234.5}]'

    answer = await provider.complete(messages=answered(listed), tools=[])

    assert answer.content == "Purchases:\n- A: 5.00 ()\n- B: 1,234.50 ()"


async def test_the_groups_of_the_rule_that_matched_fill_arguments_and_content() -> None:
    provider = ScriptedProvider(
        {
            "rules": [
                {
                    "match": r"order (?P<amount>[\d,.]+) from (?P<vendor>\w+)",
                    "turns": [
                        {
                            "content": "Ordering from {match.vendor}.",
                            "tool_calls": [
                                {
                                    "name": "create",
                                    "arguments": {
                                        "vendor": "$match.vendor",
                                        "amount": "$match.amount|number",
                                        "cents": "$match.nothing|number",
                                        "kept": "$literally",
                                    },
                                }
                            ],
                        }
                    ],
                }
            ]
        }
    )

    answer = await provider.complete(
        messages=[{"role": "user", "content": "Order 60,000 from Contoso"}], tools=[]
    )

    assert answer.content == "Ordering from Contoso."
    assert answer.tool_calls[0].arguments == {
        "vendor": "Contoso",
        "amount": 60000,
        "cents": None,
        "kept": "$literally",
    }


@pytest.mark.parametrize(
    ("turn", "problem"),
    [
        ({"choose": []}, "choose needs a non-empty list of cases"),
        ({"choose": [{"when": {"last": "("}, "content": "x"}]}, "bad pattern for last"),
        ({"choose": [{"when": {"somewhere": "x"}, "content": "x"}]}, "is not"),
        ({"when": {"last": "x"}, "content": "x"}, "when belongs to a case of choose"),
        ({"content": "x", "each": {"in": "last"}}, 'each needs "line"'),
    ],
)
def test_a_choice_or_list_that_cannot_be_played_is_refused(turn: dict[str, object], problem: str) -> None:
    with pytest.raises(LLMConfigError, match=problem):
        ScriptedProvider({"turns": [turn]})
