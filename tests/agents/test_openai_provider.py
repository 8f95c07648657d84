"""The OpenAI-compatible provider, driven through the real SDK against a local fake server.

The fake speaks the chat-completions wire format: a JSON request in, server-sent events
(``data: {chunk}`` … ``data: [DONE]``) or a JSON error out. Each test scripts its responses
in order and reads back the requests the server received.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agents.llm.base import LLMConfigError, LLMError, ToolCall
from agents.llm.factory import provider_for
from agents.llm.openai_compat import OpenAICompatibleProvider

API_KEY = "sk-test-0123456789abcdef"
MESSAGES = [{"role": "user", "content": "hello"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "oa__purchase_list",
            "description": "List purchases",
            "parameters": {"type": "object", "properties": {"status": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "oa__purchase_pay",
            "description": "Pay a purchase",
            "parameters": {"type": "object", "properties": {"purchase_id": {"type": "integer"}}},
        },
    },
]


# --- the fake server ---------------------------------------------------------------------------


@dataclass
class Reply:
    """One scripted response.

    ``chunks`` → a 200 event stream of those chunks then ``[DONE]``; ``status`` ≠ 200 → that
    status with ``error`` as the JSON body. ``hang_before`` waits before answering at all;
    ``hang_after`` waits after that many chunks, holding the stream open.
    """

    chunks: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    error: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hang_before: bool = False
    hang_after: int | None = None


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeChatServer:
    """A chat-completions endpoint on 127.0.0.1 answering from a script, one reply per request."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.repeat_last = False
        self.requests: list[Received] = []
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        # A short poll interval: shutdown() waits up to one interval, on every test's teardown.
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.01,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *replies: Reply, repeat_last: bool = False) -> None:
        self.replies = list(replies)
        self.repeat_last = repeat_last

    def next_reply(self, received: Received) -> Reply:
        with self._lock:
            self.requests.append(received)
            if not self.replies:
                return Reply(status=500, error={"message": "the test scripted no more replies"})
            if self.repeat_last and len(self.replies) == 1:
                return self.replies[0]
            return self.replies.pop(0)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.release.set()  # let any hanging handler finish
        self._httpd.shutdown()
        self._httpd.server_close()


def _handler_for(server: FakeChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            headers = {name.lower(): value for name, value in self.headers.items()}
            reply = server.next_reply(Received(self.path, headers, body))
            # The client gives up on a hanging reply (timeout): writing to it then fails, as expected.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._answer(reply)

        def _answer(self, reply: Reply) -> None:
            if reply.hang_before:
                server.release.wait(10)
                return
            if reply.status != 200:
                self._send_error(reply)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for n, chunk in enumerate(reply.chunks):
                if n == reply.hang_after:
                    server.release.wait(10)
                    return
                self._event(json.dumps(chunk))
            self._event("[DONE]")

        def _send_error(self, reply: Reply) -> None:
            payload = json.dumps({"error": reply.error or {"message": "failed"}}).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        def _event(self, data: str) -> None:
            self.wfile.write(f"data: {data}\n\n".encode())
            self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep the test output clean

    return Handler


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    fake = FakeChatServer()
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def platform_server() -> Iterator[FakeChatServer]:
    """A second endpoint, standing for the platform's own (OPENAI_BASE_URL)."""
    fake = FakeChatServer()
    fake.start()
    yield fake
    fake.stop()


OPENAI_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ADMIN_KEY",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "OPENAI_CUSTOM_HEADERS",
)


@pytest.fixture(autouse=True)
def _no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The developer's own OPENAI_* settings must not leak into these tests.
    for name in OPENAI_ENV:
        monkeypatch.delenv(name, raising=False)


# --- helpers -----------------------------------------------------------------------------------


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def text_reply(*pieces: str) -> Reply:
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in pieces]
    return Reply(chunks=[*chunks, chunk({}, "stop")])


def tool_delta(index: int, *, id: str | None = None, name: str | None = None, args: str | None = None):
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    call: dict[str, Any] = {"index": index, "function": function}
    if id is not None:
        call.update(id=id, type="function")
    return chunk({"tool_calls": [call]})


def provider(server: FakeChatServer, **overrides: Any) -> OpenAICompatibleProvider:
    config: dict[str, Any] = {
        "provider": "openai",
        "model": "gpt-test",
        "base_url": server.base_url,
        "api_key": API_KEY,
        "max_retries": 3,
        "timeout": 2,
        "retry_base_delay": 0.01,
    }
    config.update(overrides)
    built = provider_for(config)
    assert isinstance(built, OpenAICompatibleProvider)
    return built


class Deltas:
    """An ``on_delta`` that records what it was given."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, text: str) -> None:
        self.seen.append(text)


# --- streaming ---------------------------------------------------------------------------------


async def test_it_streams_text_deltas_in_order(server: FakeChatServer) -> None:
    server.script(text_reply("Hel", "lo, ", "wor", "ld."))
    deltas = Deltas()

    response = await provider(server).complete(messages=MESSAGES, tools=[], on_delta=deltas)

    assert deltas.seen == ["Hel", "lo, ", "wor", "ld."]
    assert response.content == "Hello, world."
    assert response.tool_calls == []


async def test_it_reassembles_parallel_tool_calls_split_over_chunks(server: FakeChatServer) -> None:
    server.script(
        Reply(
            chunks=[
                chunk({"role": "assistant", "content": None}),
                tool_delta(0, id="call_a", name="oa__purchase_list", args=""),
                tool_delta(0, args='{"sta'),
                tool_delta(1, id="call_b", name="oa__purchase_pay", args='{"purch'),
                tool_delta(0, args='tus": "open"}'),
                tool_delta(1, args='ase_id": '),
                tool_delta(1, args="42}"),
                chunk({}, "tool_calls"),
            ]
        )
    )

    response = await provider(server, params={"temperature": 0.2, "max_tokens": 50}).complete(
        messages=MESSAGES, tools=TOOLS
    )

    assert response.content == ""
    assert response.tool_calls == [
        ToolCall("call_a", "oa__purchase_list", {"status": "open"}, '{"status": "open"}'),
        ToolCall("call_b", "oa__purchase_pay", {"purchase_id": 42}, '{"purchase_id": 42}'),
    ]
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.body["model"] == "gpt-test"
    assert request.body["messages"] == MESSAGES
    assert request.body["tools"] == TOOLS
    assert request.body["stream"] is True
    assert request.body["temperature"] == 0.2
    assert request.body["max_tokens"] == 50


async def test_it_keeps_raw_arguments_when_tool_arguments_are_not_a_json_object(
    server: FakeChatServer,
) -> None:
    server.script(
        Reply(
            chunks=[
                tool_delta(0, id="call_a", name="oa__purchase_list", args="status: open"),
                tool_delta(1, id="call_b", name="oa__purchase_pay", args="[42]"),
                chunk({}, "tool_calls"),
            ]
        )
    )

    response = await provider(server).complete(messages=MESSAGES, tools=TOOLS)

    first, second = response.tool_calls
    assert (first.arguments, first.raw_arguments) == (None, "status: open")
    assert (second.arguments, second.raw_arguments) == (None, "[42]")


async def test_it_sends_no_tools_field_when_no_tools_are_offered(server: FakeChatServer) -> None:
    server.script(text_reply("ok"))

    await provider(server).complete(messages=MESSAGES, tools=[])

    assert "tools" not in server.requests[0].body


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


# --- configuration -----------------------------------------------------------------------------


def test_it_needs_an_api_key() -> None:
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY"):
        OpenAICompatibleProvider.from_config({"provider": "openai", "model": "gpt-test"})


async def test_it_falls_back_to_the_environment_for_key_and_base_url(
    server: FakeChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    server.script(text_reply("ok"))

    built = provider_for({"provider": "openai", "model": "gpt-test"})
    response = await built.complete(messages=MESSAGES, tools=[])

    assert response.content == "ok"
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"
    assert "sk-from-env" not in repr(built)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"params": {"model": "other"}}, "params may not set model"),
        ({"max_retries": -1}, "max_retries must be a whole number"),
        ({"max_retries": True}, "max_retries must be a whole number"),
        ({"timeout": 0}, "timeout must be a number of seconds > 0"),
        ({"retry_base_delay": "fast"}, "retry_base_delay must be a number of seconds"),
        ({"base_url": 42}, "base_url must be a string"),
    ],
)
def test_it_rejects_unusable_settings(overrides: dict[str, Any], message: str) -> None:
    config = {"provider": "openai", "model": "gpt-test", "api_key": API_KEY, **overrides}

    with pytest.raises(LLMConfigError, match=message):
        OpenAICompatibleProvider.from_config(config)


# --- the agent's encrypted key ------------------------------------------------------------------


@pytest.mark.django_db
def test_a_run_authenticates_with_the_agents_encrypted_key(server: FakeChatServer, personas) -> None:
    from asgiref.sync import async_to_sync
    from django.db import connection

    from agents.engine.runner import run_execute
    from agents.models import RunStatus
    from agents.services import run_start
    from tests.personas import make_agent

    config = {"provider": "openai", "model": "gpt-test", "base_url": server.base_url, "max_retries": 0}
    secrets = {"api_key": API_KEY}
    agent = make_agent(personas.org, personas.operator, model_config_json=config, secrets=secrets)
    server.script(text_reply("Hello from the model."))
    run = run_start(agent=agent, user=personas.member, input="hi")

    assert async_to_sync(run_execute)(run.pk) == RunStatus.COMPLETED
    assert server.requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    with connection.cursor() as cursor:
        cursor.execute("SELECT model_config_json, secrets FROM agents_agent WHERE id = %s", [agent.pk])
        stored = " ".join(str(column) for column in cursor.fetchone())
    assert API_KEY not in stored  # neither in the config nor in clear in the secrets column


# --- where the platform's key goes --------------------------------------------------------------

PLATFORM_KEY = "sk-platform-ENV-key-4242"


@pytest.fixture
def platform_env(platform_server: FakeChatServer, monkeypatch: pytest.MonkeyPatch) -> FakeChatServer:
    """The platform's endpoint and key, with every other OPENAI_* setting the SDK reads."""
    monkeypatch.setenv("OPENAI_API_KEY", PLATFORM_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", platform_server.base_url)
    monkeypatch.setenv("OPENAI_ORG_ID", "org-platform")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-platform")
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", "X-Gateway-Token: gw-secret\nAuthorization: Bearer gw-auth")
    return platform_server


def everything_received(*servers: FakeChatServer) -> str:
    return json.dumps([[r.path, r.headers, r.body] for server in servers for r in server.requests])


def test_it_refuses_to_send_the_platforms_key_to_an_agents_own_base_url(
    server: FakeChatServer, platform_env: FakeChatServer
) -> None:
    config = {"provider": "openai", "model": "gpt-test", "base_url": server.base_url}

    with pytest.raises(LLMConfigError, match='own "base_url" needs its own API key'):
        provider_for(config)

    assert server.requests == [] and platform_env.requests == []


async def test_it_still_sends_the_platforms_key_to_the_platforms_base_url(
    server: FakeChatServer, platform_env: FakeChatServer
) -> None:
    platform_env.script(text_reply("ok"))

    response = await provider_for({"provider": "openai", "model": "gpt-test"}).complete(
        messages=MESSAGES, tools=[]
    )

    assert response.content == "ok"
    (request,) = platform_env.requests
    assert request.headers["authorization"] == f"Bearer {PLATFORM_KEY}"
    assert request.headers["openai-organization"] == "org-platform"  # the platform's own settings
    assert server.requests == []


async def test_it_sends_an_agents_own_key_and_nothing_of_the_platforms_to_its_own_base_url(
    server: FakeChatServer, platform_env: FakeChatServer
) -> None:
    server.script(text_reply("ok"))
    config = {"provider": "openai", "model": "gpt-test", "base_url": server.base_url, "api_key": API_KEY}

    response = await provider_for(config).complete(messages=MESSAGES, tools=[])

    assert response.content == "ok"
    (request,) = server.requests
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    received = everything_received(server)
    for platform_value in (PLATFORM_KEY, "gw-secret", "gw-auth", "org-platform", "proj-platform"):
        assert platform_value not in received
    assert platform_env.requests == []


async def test_an_agents_own_key_may_go_to_the_platforms_base_url(
    server: FakeChatServer, platform_env: FakeChatServer
) -> None:
    platform_env.script(text_reply("ok"))

    await provider_for({"provider": "openai", "model": "gpt-test", "api_key": API_KEY}).complete(
        messages=MESSAGES, tools=[]
    )

    assert platform_env.requests[0].headers["authorization"] == f"Bearer {API_KEY}"


@pytest.mark.django_db
def test_a_run_of_an_agent_with_its_own_base_url_and_no_key_fails_before_calling_anyone(
    server: FakeChatServer, platform_env: FakeChatServer, personas
) -> None:
    from asgiref.sync import async_to_sync

    from agents.engine.runner import run_execute
    from agents.models import Run, RunStatus
    from agents.services import run_start
    from tests.personas import make_agent

    # Saved without validation, as an old row or a bulk import would be.
    config = {"provider": "openai", "model": "gpt-test", "base_url": server.base_url, "max_retries": 0}
    agent = make_agent(personas.org, personas.operator, model_config_json=config)
    server.script(text_reply("I have your key now."))
    run = run_start(agent=agent, user=personas.member, input="hi")

    assert async_to_sync(run_execute)(run.pk) == RunStatus.FAILED
    assert server.requests == [] and platform_env.requests == []
    error = Run.objects.get(pk=run.pk).error
    assert 'own "base_url" needs its own API key' in error
    assert PLATFORM_KEY not in error
