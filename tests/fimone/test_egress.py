"""Outbound requests stay out of the platform's own networks (docs/design.md §1.14): HTTP connectors, http
hooks and agents' own model endpoints refuse loopback, link-local (cloud metadata), private,
unspecified and multicast addresses after DNS resolution, unless ``EGRESS_ALLOW`` lists them, and
connect only to the address they checked.

Tests run in development, where loopback is allowed: the production rule is ``EGRESS_ALLOW=[]``.
Host names resolve through a scripted DNS (:func:`dns`), so "a public name resolving to 127.0.0.1"
is a name the test makes up.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx2
import pytest

from agents.llm.base import LLMError
from agents.llm.openai_compat import OpenAICompatibleProvider
from agents.tools.base import ToolError
from agents.tools.http import HttpActionTool
from fimone import egress
from fimone.env import EnvError, env_host_list
from hooks import HookContext, HookRegistry
from hooks.catalog import build_item
from tests.fimone.test_settings import start_django
from tests.personas import Personas, make_action, make_http_connector

PRODUCTION_RULE: list[str] = []
"""``EGRESS_ALLOW`` as production has it by default: nothing beyond public addresses."""


# --- a service on this machine, and a scripted DNS ---------------------------------------------------


class Service:
    """An HTTP service on 127.0.0.1 that records every request and answers ``{"ok": true}``."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                service.seen.append(
                    {
                        "path": self.path,
                        "host": self.headers.get("Host", ""),
                        "authorization": self.headers.get("Authorization", ""),
                    }
                )
                body = b'{"ok": true}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_port


@pytest.fixture
def service() -> Iterator[Service]:
    running = Service()
    thread = threading.Thread(target=running.server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield running
    running.server.shutdown()
    running.server.server_close()


class ScriptedDns:
    """Answers for made-up names: each lookup of a name takes the next answer of its script (the
    last one repeats); other names (IP addresses included) resolve as usual."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.answers: dict[str, list[list[str]]] = {}
        self.lookups: dict[str, int] = {}
        real = socket.getaddrinfo

        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            name = host.decode() if isinstance(host, bytes) else host
            if name not in self.answers:
                return real(host, port, *args, **kwargs)
            self.lookups[name] = self.lookups.get(name, 0) + 1
            script = self.answers[name]
            addresses = script.pop(0) if len(script) > 1 else script[0]
            return [
                (
                    socket.AF_INET6 if ipaddress.ip_address(a).version == 6 else socket.AF_INET,
                    socket.SOCK_STREAM,
                    6,
                    "",
                    (a, int(port or 0)),
                )
                for a in addresses
            ]

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)

    def __setitem__(self, name: str, addresses: list[str]) -> None:
        self.answers[name] = [addresses]

    def script(self, name: str, *answers: list[str]) -> None:
        self.answers[name] = list(answers)


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> ScriptedDns:
    return ScriptedDns(monkeypatch)


def connector_tool(personas: Personas, base_url: str, *, slug: str = "oa") -> HttpActionTool:
    connector = make_http_connector(
        personas.org,
        base_url,
        slug=slug,
        secrets={"headers": {"Authorization": "Bearer oa-token"}},
        timeout_seconds=3,
    )
    return HttpActionTool(action=make_action(connector, "purchase_list", path="purchases"))


def call(tool: HttpActionTool) -> Any:
    return asyncio.run(tool.run({}))


# --- what is refused ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "a loopback address"),
        ("::1", "a loopback address"),
        ("169.254.169.254", "the cloud metadata address"),
        ("169.254.10.1", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("10.0.0.5", "a private address"),
        ("172.16.4.2", "a private address"),
        ("192.168.1.20", "a private address"),
        ("100.64.0.7", "a private address"),
        ("fd12:3456::1", "a private address"),
        ("0.0.0.0", "an unspecified address"),  # noqa: S104 - an address checked, not bound
        ("::", "an unspecified address"),
        ("224.0.0.251", "a multicast address"),
        ("ff02::1", "a multicast address"),
        ("::ffff:10.0.0.5", "a private address"),
        ("::ffff:169.254.169.254", "the cloud metadata address"),
    ],
)
def test_addresses_outside_the_public_internet_are_refused_by_kind(address: str, kind: str) -> None:
    assert egress.refused_kind(ipaddress.ip_address(address)) == kind
    with pytest.raises(egress.EgressRefused) as refused:
        egress.check_address("svc.example.test", ipaddress.ip_address(address), egress.parse_allow([]))
    assert str(refused.value) == (
        f"refused: svc.example.test resolves to {kind} ({ipaddress.ip_address(address)}); "
        "allow it with EGRESS_ALLOW"
    )


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700::1111"])
def test_public_addresses_pass(address: str) -> None:
    assert egress.refused_kind(ipaddress.ip_address(address)) is None


def test_egress_allow_lets_through_host_names_addresses_and_networks() -> None:
    allowed = egress.parse_allow(["Payments.Internal", "10.1.2.3", "192.168.0.0/16", "fd00::/8"])

    assert allowed.allows("payments.internal", ipaddress.ip_address("10.9.9.9"))
    assert allowed.allows("x.example.test", ipaddress.ip_address("10.1.2.3"))
    assert allowed.allows("x.example.test", ipaddress.ip_address("192.168.7.7"))
    assert allowed.allows("x.example.test", ipaddress.ip_address("fd00::7"))
    assert not allowed.allows("x.example.test", ipaddress.ip_address("10.1.2.4"))
    assert egress.parse_allow(["*"]).allows("x", ipaddress.ip_address("169.254.169.254"))


@pytest.mark.parametrize("value", ["10.0.0.0/33", "http://payments.internal", "300.1.2.3", "127.0.0.1:8000"])
def test_a_bad_egress_allow_fails_loudly_naming_the_variable(value: str) -> None:
    with pytest.raises(EnvError, match="EGRESS_ALLOW must list host names, IP addresses or CIDR networks"):
        env_host_list("EGRESS_ALLOW", [], environ={"EGRESS_ALLOW": f"payments.internal, {value}"})


@pytest.mark.once
def test_development_allows_loopback_by_default_and_production_nothing() -> None:
    show = "import django; django.setup(); from django.conf import settings; print(settings.EGRESS_ALLOW)"
    development = start_django(show)
    production = start_django(
        show,
        FIMONE_ENV="production",
        SECRET_KEY="x" * 50,
        ALLOWED_HOSTS="fimone.example.com",
        SITE_URL="https://fimone.example.com",
        FIELD_ENCRYPTION_KEY="k" * 44,
        AUDIT_CHAIN_KEY="a" * 32,
    )
    configured = start_django(show, EGRESS_ALLOW="10.20.0.0/16, payments.internal")
    refused = start_django(EGRESS_ALLOW="10.20.0.0/16, http://payments.internal")

    assert development.stdout.strip() == "['127.0.0.0/8', '::1']", development.stderr
    assert production.stdout.strip() == "[]", production.stderr
    assert configured.stdout.strip() == "['10.20.0.0/16', 'payments.internal']", configured.stderr
    assert refused.returncode != 0 and len(refused.stderr.strip().splitlines()) == 1
    assert "EGRESS_ALLOW" in refused.stderr and "Traceback" not in refused.stderr


# --- HTTP connectors ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_connector_whose_host_resolves_to_a_private_address_is_refused_before_sending(
    personas: Personas, dns: ScriptedDns
) -> None:
    dns["oa.example.test"] = ["10.0.0.5"]
    tool = connector_tool(personas, "http://oa.example.test/api/")

    with pytest.raises(ToolError) as refused:
        call(tool)

    assert str(refused.value) == (
        "GET purchases: refused: oa.example.test resolves to a private address (10.0.0.5); "
        "allow it with EGRESS_ALLOW; nothing was sent"
    )


@pytest.mark.django_db
def test_in_production_a_public_name_resolving_to_loopback_reaches_nothing(
    personas: Personas, dns: ScriptedDns, service: Service, settings
) -> None:
    settings.EGRESS_ALLOW = PRODUCTION_RULE
    dns["payments.example.test"] = ["127.0.0.1"]
    tool = connector_tool(personas, f"http://payments.example.test:{service.port}/api/")

    with pytest.raises(ToolError, match=r"resolves to a loopback address \(127\.0\.0\.1\)"):
        call(tool)
    with pytest.raises(ToolError, match=r"refused: 127\.0\.0\.1 is a loopback address"):
        call(connector_tool(personas, f"http://127.0.0.1:{service.port}/api/", slug="direct"))

    assert service.seen == []


@pytest.mark.django_db
def test_one_refused_address_among_public_ones_refuses_the_name(personas: Personas, dns: ScriptedDns) -> None:
    dns["mixed.example.test"] = ["93.184.216.34", "169.254.169.254"]

    with pytest.raises(ToolError, match="resolves to the cloud metadata address"):
        call(connector_tool(personas, "http://mixed.example.test/api/"))


@pytest.mark.django_db
def test_even_in_development_the_metadata_address_is_refused(personas: Personas) -> None:
    with pytest.raises(ToolError, match=r"refused: 169\.254\.169\.254 is the cloud metadata address"):
        call(connector_tool(personas, "http://169.254.169.254/latest/meta-data/"))


@pytest.mark.django_db
@pytest.mark.parametrize("allowed", [["127.0.0.1"], ["127.0.0.0/8"], ["payments.example.test"]])
def test_a_host_egress_allow_lists_is_reached_by_its_name(
    personas: Personas, dns: ScriptedDns, service: Service, settings, allowed: list[str]
) -> None:
    settings.EGRESS_ALLOW = allowed
    dns["payments.example.test"] = ["127.0.0.1"]

    assert call(connector_tool(personas, f"http://payments.example.test:{service.port}/api/")) == {"ok": True}
    assert service.seen == [
        {
            "path": "/api/purchases",
            "host": f"payments.example.test:{service.port}",
            "authorization": "Bearer oa-token",
        }
    ]


@pytest.mark.django_db
def test_a_dns_answer_changed_after_the_check_is_never_connected_to(
    personas: Personas, dns: ScriptedDns, service: Service, settings
) -> None:
    # The first answer passes the check (127.0.0.2 is allowed, nothing listens there); a second
    # lookup would answer the internal service's address. The connection uses the checked one.
    settings.EGRESS_ALLOW = ["127.0.0.2"]
    dns.script("rebind.example.test", ["127.0.0.2"], ["127.0.0.1"])

    with pytest.raises(ToolError, match="could not connect to the service"):
        call(connector_tool(personas, f"http://rebind.example.test:{service.port}/api/"))

    assert service.seen == [] and dns.lookups["rebind.example.test"] == 1


# --- http hooks ----------------------------------------------------------------------------------------


def hook_context() -> HookContext:
    return HookContext(
        tool_name="oa__purchase_pay",
        tool_args={"purchase_id": "PO-1001", "amount": 1250},
        agent_id=7,
        user_id=3,
        metadata={"org_id": 1, "run_id": 42, "tool_call_id": "call_1"},
    )


async def test_an_http_hook_at_a_refused_address_fails_closed_naming_the_refusal(
    dns: ScriptedDns, service: Service, settings
) -> None:
    settings.EGRESS_ALLOW = PRODUCTION_RULE
    dns["policy.example.test"] = ["127.0.0.1"]
    hook = build_item(
        {
            "kind": "http",
            "name": "policy",
            "point": "PreToolUse",
            "params": {"url": f"http://policy.example.test:{service.port}/hook"},
            "secret": "whsec-correct-horse-battery",
        }
    )

    out = await HookRegistry([hook]).run_pre_tool_use(hook_context())

    assert not out.allow
    assert (
        "refused: policy.example.test resolves to a loopback address (127.0.0.1); allow it with EGRESS_ALLOW"
        in out.side_effects[0].message
    )
    assert "Traceback" not in out.side_effects[0].message and service.seen == []


# --- model endpoints ----------------------------------------------------------------------------------


def model_provider(base_url: str) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider.from_config(
        {
            "provider": "openai",
            "model": "gpt-test",
            "base_url": base_url,
            "api_key": "sk-agent-own-key-0123456789",
            "max_retries": 3,
            "timeout": 2,
            "retry_base_delay": 0.01,
        }
    )


async def test_an_agents_own_model_endpoint_at_a_refused_address_fails_at_once_without_retries(
    dns: ScriptedDns, service: Service, settings
) -> None:
    settings.EGRESS_ALLOW = PRODUCTION_RULE
    dns["llm.example.test"] = ["10.0.0.5"]

    with pytest.raises(LLMError) as refused:
        await model_provider("http://llm.example.test/v1").complete(messages=[], tools=[])
    with pytest.raises(LLMError, match=r"^refused: 127\.0\.0\.1 is a loopback address"):
        await model_provider(f"http://127.0.0.1:{service.port}/v1").complete(messages=[], tools=[])

    assert str(refused.value) == (
        "refused: llm.example.test resolves to a private address (10.0.0.5); allow it with EGRESS_ALLOW"
    )
    assert dns.lookups["llm.example.test"] == 1 and service.seen == []


async def test_the_platforms_own_model_endpoint_is_the_deployments_and_not_checked(
    service: Service, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.EGRESS_ALLOW = PRODUCTION_RULE
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{service.port}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-platform-key-0123456789")
    platform = OpenAICompatibleProvider.from_config(
        {"provider": "openai", "model": "gpt-test", "max_retries": 0}
    )

    with pytest.raises(LLMError, match="no streamed chunks"):  # the fake answers plain JSON
        await platform.complete(messages=[{"role": "user", "content": "hi"}], tools=[])

    assert [seen["path"] for seen in service.seen] == ["/v1/chat/completions"]


def test_every_outbound_call_verifies_with_the_one_tls_context_of_the_process() -> None:
    """A connector, model or MCP call builds its transport per call; the CA bundle is read once."""
    first, second = egress.async_transport(), egress.async_transport()
    context = first._pool._ssl_context
    assert context is second._pool._ssl_context is egress.shared_tls()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert egress.async_transport(http=httpx2)._pool._ssl_context is egress.shared_tls(httpx2)
    assert egress.shared_tls(httpx2) is not context
