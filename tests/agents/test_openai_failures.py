"""The OpenAI-compatible provider when the model service fails: which failures it retries and how
often, and the errors it reports at once without revealing the key."""

from __future__ import annotations

import time

import pytest

from agents.llm.base import LLMError
from tests.agents.openai_kit import (
    API_KEY,
    MESSAGES,
    Deltas,
    FakeChatServer,
    Reply,
    _no_openai_env,
    chunk,
    provider,
    server,
    text_reply,
)

__all__ = ["_no_openai_env", "server"]


# --- retries -----------------------------------------------------------------------------------


async def test_it_retries_a_rate_limit_and_a_server_error_then_succeeds(server: FakeChatServer) -> None:
    server.script(
        Reply(status=429, error={"message": "slow down"}),
        Reply(status=500, error={"message": "oops"}),
        text_reply("finally"),
    )
    deltas = Deltas()

    response = await provider(server).complete(messages=MESSAGES, tools=[], on_delta=deltas)

    assert response.content == "finally"
    assert deltas.seen == ["finally"]
    assert len(server.requests) == 3


async def test_its_retries_are_bounded_by_max_retries(server: FakeChatServer) -> None:
    server.script(Reply(status=503, error={"message": "overloaded"}), repeat_last=True)

    with pytest.raises(LLMError) as failure:
        await provider(server, max_retries=2).complete(messages=MESSAGES, tools=[])

    assert len(server.requests) == 3
    assert str(failure.value) == "the model service failed after 3 attempts: server error (503)"


async def test_it_honours_retry_after_but_caps_it(server: FakeChatServer) -> None:
    server.script(
        Reply(status=429, headers={"Retry-After": "0.2"}),
        Reply(status=429, headers={"Retry-After": "3600"}),
        text_reply("ok"),
    )
    started = time.monotonic()

    await provider(server, retry_max_delay=0.25).complete(messages=MESSAGES, tools=[])

    elapsed = time.monotonic() - started
    # 0.2 s as asked, then 3600 s capped to 0.25 s; the 0.01 s back-off alone would be far quicker.
    assert 0.45 <= elapsed < 3
    assert len(server.requests) == 3


async def test_it_retries_a_server_that_hangs_past_the_timeout_then_gives_up(
    server: FakeChatServer,
) -> None:
    server.script(Reply(hang_before=True), repeat_last=True)

    with pytest.raises(LLMError) as failure:
        await provider(server, timeout=0.2, max_retries=1).complete(messages=MESSAGES, tools=[])

    assert len(server.requests) == 2
    assert str(failure.value) == "the model service failed after 2 attempts: the request timed out"


async def test_it_does_not_retry_once_text_was_streamed(server: FakeChatServer) -> None:
    reply = text_reply("Half an ans", "wer")
    reply.hang_after = 2  # the role chunk and "Half an ans" go out, then the stream stalls
    server.script(reply, text_reply("a different answer"))
    deltas = Deltas()

    with pytest.raises(LLMError, match="not retried because part of the answer was already shown"):
        await provider(server, timeout=0.2).complete(messages=MESSAGES, tools=[], on_delta=deltas)

    assert deltas.seen == ["Half an ans"]
    assert len(server.requests) == 1


# --- errors that are not retried ---------------------------------------------------------------


async def test_it_fails_at_once_on_401_without_revealing_the_key(server: FakeChatServer) -> None:
    server.script(
        Reply(
            status=401,
            error={"message": f"Incorrect API key provided: {API_KEY}", "code": "invalid_api_key"},
        )
    )

    with pytest.raises(LLMError) as failure:
        await provider(server).complete(messages=MESSAGES, tools=[])

    assert str(failure.value) == "the model service rejected the API key (401)"
    assert API_KEY not in str(failure.value)
    assert API_KEY not in repr(failure.value.__cause__) + repr(failure.value.__context__)
    assert len(server.requests) == 1


async def test_it_fails_at_once_on_a_bad_request_with_the_servers_reason(server: FakeChatServer) -> None:
    server.script(
        Reply(status=400, error={"message": f"context too long for key {API_KEY}", "type": "invalid"})
    )

    with pytest.raises(LLMError) as failure:
        await provider(server).complete(messages=MESSAGES, tools=[])

    assert str(failure.value) == "the model service rejected the request (400): context too long for key ***"
    assert len(server.requests) == 1


async def test_it_reports_an_error_event_sent_inside_the_stream(server: FakeChatServer) -> None:
    server.script(Reply(chunks=[chunk({"role": "assistant"}), {"error": {"message": "model crashed"}}]))

    with pytest.raises(LLMError) as failure:
        await provider(server).complete(messages=MESSAGES, tools=[])

    assert str(failure.value) == "the model service reported an error: model crashed"
    assert len(server.requests) == 1


async def test_it_rejects_a_stream_without_any_chunk(server: FakeChatServer) -> None:
    server.script(Reply(chunks=[]))

    with pytest.raises(LLMError, match="sent no streamed chunks"):
        await provider(server).complete(messages=MESSAGES, tools=[])
