"""A local fake chat-completions endpoint for the OpenAI-compatible provider tests: it answers each
request from a script (server-sent ``data: {chunk}`` events then ``data: [DONE]``, or a JSON error) and
keeps the requests it received. Also the helpers that build replies, chunks and the provider."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agents.llm.factory import provider_for
from agents.llm.openai_compat import OpenAICompatibleProvider

API_KEY = "sk-test-0123456789abcdef"
MESSAGES = [{"role": "user", "content": "hello"}]


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
