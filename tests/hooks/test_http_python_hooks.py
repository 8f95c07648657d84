"""The python kind (a dotted path, resolved when declared) and the http kind (a signed POST)."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from hooks import HookContext, HookRegistry
from hooks.catalog import HookDeclarationError, build_item
from hooks.kinds.http import SIGNATURE_HEADER

pytestmark = pytest.mark.once  # subprocesses and pure code: one stack is enough (pyproject.toml)

PAY = {"purchase_id": "PO-1001", "amount": 1250.5}
SECRET = "whsec-correct-horse-battery"


def ctx(args: dict[str, Any] | None = None) -> HookContext:
    return HookContext(
        tool_name="oa__purchase_pay",
        tool_args=dict(PAY if args is None else args),
        agent_id=7,
        user_id=3,
        metadata={"org_id": 1, "run_id": 42, "tool_call_id": "call_1"},
    )


# --- python ---------------------------------------------------------------------------------------


def python(path: str, point: str = "PreToolUse", **fields: Any):
    params = {"path": f"tests.hooks.declared_examples.{path}", **fields.pop("params", {})}
    return build_item({"kind": "python", "name": path, "point": point, "params": params, **fields})


async def test_a_python_hook_class_runs_with_its_params() -> None:
    hook = python("LimitAmount", params={"limit": 1000})

    out = await HookRegistry([hook]).run_pre_tool_use(ctx())

    assert not out.allow and out.error == "Amounts over 1000 are refused."


async def test_an_async_callable_runs_as_a_hook_of_the_declared_point() -> None:
    out = await HookRegistry([python("tag_reference")]).run_pre_tool_use(ctx())

    assert out.allow and out.tool_args == {**PAY, "reference": "run-42"}


async def test_a_python_hook_that_raises_fails_closed() -> None:
    out = await HookRegistry([python("broken")]).run_pre_tool_use(ctx())

    assert not out.allow and out.blocked_by == "broken"


@pytest.mark.parametrize(
    ("path", "point", "params", "message"),
    [
        ("tests.hooks.nowhere.Hook", "PreToolUse", {}, "module 'tests.hooks.nowhere' cannot be imported"),
        ("tests.hooks.declared_examples.Missing", "PreToolUse", {}, "has no 'Missing'"),
        ("tests.hooks.declared_examples.Shout", "PreToolUse", {}, "is a PostToolUse hook, not PreToolUse"),
        (
            "tests.hooks.declared_examples.LimitAmount",
            "PreToolUse",
            {"limit": "lots"},
            "limit must be a number",
        ),
        (
            "tests.hooks.declared_examples.LimitAmount",
            "PreToolUse",
            {"limit": 1, "rm": 1},
            "unexpected keyword",
        ),
        ("tests.hooks.declared_examples.tag_reference", "PreToolUse", {"x": 1}, "takes no params"),
        ("approvals.gate.ConfirmationGateHook", "PreToolUse", {}, "is a system hook"),
        ("os.system", "PreToolUse", {}, "neither a hook class nor a function"),
        ("tests.hooks.declared_examples.PAY_LIMIT", "PreToolUse", {}, "neither a hook class nor a function"),
        ("__import__('os')", "PreToolUse", {}, "must be a dotted path"),
    ],
)
def test_it_refuses_a_python_declaration_it_cannot_resolve_when_declared(
    path, point, params, message
) -> None:
    with pytest.raises(HookDeclarationError) as caught:
        build_item({"kind": "python", "name": "p", "point": point, "params": {"path": path, **params}})
    assert message in str(caught.value)


def test_python_paths_are_limited_to_the_configured_prefixes(settings) -> None:
    settings.HOOK_PYTHON_PREFIXES = ["company_hooks"]

    with pytest.raises(HookDeclarationError, match="outside HOOK_PYTHON_PREFIXES"):
        python("tag_reference")


# --- http -----------------------------------------------------------------------------------------


class Endpoint:
    """A local hook endpoint that checks the signature with its own copy of the secret."""

    def __init__(self) -> None:
        self.reply: Any = b""
        self.status = 200
        self.delay = 0.0
        self.received: list[dict[str, Any]] = []
        self.refused = 0
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
                if not hmac.compare_digest(self.headers.get(SIGNATURE_HEADER, ""), expected):
                    endpoint.refused += 1
                    self.send_response(401)
                    self.end_headers()
                    return
                endpoint.received.append(json.loads(body))
                time.sleep(endpoint.delay)
                reply = endpoint.reply
                if isinstance(reply, dict):
                    reply = json.dumps(reply).encode()
                self.send_response(endpoint.status)
                if endpoint.status in (301, 302, 307):
                    self.send_header("Location", "http://127.0.0.1:9/elsewhere")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client that gave up
                    self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    ep = Endpoint()
    thread = threading.Thread(target=ep.server.serve_forever, daemon=True)
    thread.start()
    yield ep
    ep.server.shutdown()
    ep.server.server_close()


def http(endpoint: Endpoint, *, secret: str = SECRET, point: str = "PreToolUse", **fields: Any):
    return build_item(
        {
            "kind": "http",
            "name": "policy",
            "point": point,
            "params": {"url": endpoint.url},
            "secret": secret,
            **fields,
        }
    )


async def test_a_signed_http_hook_receives_the_event_and_its_deny_blocks(endpoint) -> None:
    endpoint.reply = {
        "hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "Vendor is on hold."}
    }

    out = await HookRegistry([http(endpoint)]).run_pre_tool_use(ctx())

    assert not out.allow and out.error == "Vendor is on hold."
    [event] = endpoint.received
    assert event["hook_event_name"] == "PreToolUse" and event["tool_input"] == PAY
    assert event["tool_name"] == "oa__purchase_pay" and event["tool_use_id"] == "call_1"
    assert abs(event["fimone"]["sent_at"] - time.time()) < 60


async def test_an_http_hook_rewrites_input_and_an_empty_2xx_allows(endpoint) -> None:
    endpoint.reply = {"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"amount": 1}}}
    rewritten = await HookRegistry([http(endpoint)]).run_pre_tool_use(ctx())
    endpoint.reply, endpoint.status = b"", 204
    empty = await HookRegistry([http(endpoint)]).run_pre_tool_use(ctx())

    assert rewritten.allow and rewritten.tool_args == {"amount": 1}
    assert empty.allow and empty.tool_args == PAY


async def test_an_http_post_tool_use_hook_rewrites_the_result(endpoint) -> None:
    endpoint.reply = {"hookSpecificOutput": {"updatedMCPToolOutput": {"status": "paid", "card": "****"}}}
    context = ctx()
    context.tool_result = {"status": "paid", "card": "4111111111111111"}

    out = await HookRegistry([http(endpoint, point="PostToolUse")]).run_post_tool_use(context)

    assert out.result == {"status": "paid", "card": "****"}


async def test_a_wrong_secret_is_refused_by_the_endpoint_and_the_call_fails_closed(endpoint) -> None:
    endpoint.reply = {"hookSpecificOutput": {"permissionDecision": "allow"}}

    out = await HookRegistry([http(endpoint, secret="whsec-wrong-but-long-enough")]).run_pre_tool_use(ctx())

    assert endpoint.refused == 1 and endpoint.received == []
    assert not out.allow and "answered HTTP 401" in out.side_effects[0].message


@pytest.mark.parametrize(
    ("status", "reply", "message"),
    [
        (500, b"", "answered HTTP 500"),
        (302, b"", "answered HTTP 302"),
        (200, b"<html>ok</html>", "not JSON"),
        (200, b"[1, 2]", "not a JSON object"),
        (200, b'{"hookSpecificOutput": {"permissionDecision": "maybe"}}', "unknown permissionDecision"),
        (200, b'{"hookSpecificOutput": {"updatedInput": "rm -rf"}}', "updatedInput must be an object"),
        (200, b"\xff\xfe", "not UTF-8"),
    ],
)
async def test_an_http_hook_that_answers_outside_the_protocol_fails_closed(
    endpoint, status, reply, message
) -> None:
    endpoint.status, endpoint.reply = status, reply

    out = await HookRegistry([http(endpoint)]).run_pre_tool_use(ctx())

    assert not out.allow and out.blocked_by == "policy"
    assert message in out.side_effects[0].message


async def test_an_http_hook_past_its_timeout_fails_closed(endpoint) -> None:
    endpoint.delay = 2.0

    began = time.monotonic()
    out = await HookRegistry([http(endpoint, timeout=0.3)]).run_pre_tool_use(ctx())

    assert not out.allow and time.monotonic() - began < 1.5


async def test_an_unreachable_http_hook_fails_closed_unless_on_error_allow(endpoint) -> None:
    endpoint.server.server_close()

    closed = await HookRegistry([http(endpoint)]).run_pre_tool_use(ctx())
    opened = await HookRegistry([http(endpoint, on_error="allow")]).run_pre_tool_use(ctx())

    assert not closed.allow and "could not be reached" in closed.side_effects[0].message
    assert opened.allow


async def test_a_reply_past_the_cap_fails_closed(endpoint, settings) -> None:
    settings.HOOK_HTTP_MAX_REPLY = 2_000
    endpoint.reply = b'{"x": "' + b"a" * 5_000 + b'"}'

    out = await HookRegistry([http(endpoint)]).run_pre_tool_use(ctx())

    assert not out.allow and "more than 2000 bytes" in out.side_effects[0].message


@pytest.mark.parametrize(
    ("url", "secret", "message"),
    [
        ("ftp://hooks.example/x", SECRET, "must be an http:// or https:// URL"),
        ("https://user:pw@hooks.example/x", SECRET, "must not carry credentials"),
        ("https://hooks.example/x", None, "signing secret of at least 16 characters"),
        ("https://hooks.example/x", "short", "signing secret of at least 16 characters"),
    ],
)
def test_it_refuses_an_http_declaration_without_a_proper_url_or_secret(url, secret, message) -> None:
    with pytest.raises(HookDeclarationError) as caught:
        build_item(
            {"kind": "http", "name": "h", "point": "PreToolUse", "params": {"url": url}, "secret": secret}
        )
    assert message in str(caught.value)
    assert "short" not in str(caught.value) or secret != "short", "the secret is not echoed"


def test_the_http_hook_never_shows_its_secret() -> None:
    hook = build_item(
        {
            "kind": "http",
            "name": "h",
            "point": "PreToolUse",
            "params": {"url": "https://x.example/"},
            "secret": SECRET,
        }
    )

    assert SECRET not in repr(hook) and SECRET not in str(vars(hook).get("url"))
