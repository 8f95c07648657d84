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
