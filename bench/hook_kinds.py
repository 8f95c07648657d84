"""Per-call cost of one PreToolUse hook of each declared kind, through the registry.

- class:   a catalog hook (``deny_tools`` on another tool: the cheapest real work)
- python:  an ``async def`` and a plain ``def`` named by their dotted paths (run in a hook thread,
           :mod:`hooks.kinds.offloop`)
- http:    a signed POST to a local server that checks the HMAC-SHA256 signature and answers allow
- command: a shell script reading the event on stdin (``cat``), and one parsing it with ``jq`` as a
           Claude Code hook script would

- audit_log: the built-in PostToolUse hook writing one ConnectorCallLog row per call, on
           PostgreSQL (only when DATABASE_URL names one: it runs on a throw-away test database)

Printed as a table (median and p95 per call, calls per second).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/fimone python bench/hook_kinds.py [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import logging
import os
import stat
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fimone.settings")

import django

django.setup()

from bench._django import bench_database, percentile  # noqa: E402
from hooks import HookContext, HookRegistry, HookResult  # noqa: E402
from hooks.catalog import build_item  # noqa: E402
from hooks.kinds.http import SIGNATURE_HEADER  # noqa: E402

SECRET = "bench-secret-0123456789"


async def allow_all(ctx: HookContext) -> HookResult:
    return HookResult()


def allow_all_sync(ctx: HookContext) -> HookResult:
    return HookResult()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        ok = hmac.compare_digest(self.headers.get(SIGNATURE_HEADER, ""), expected)
        reply = b'{"hookSpecificOutput": {"permissionDecision": "allow"}}' if ok else b""
        self.send_response(200 if ok else 401)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


def script(directory: Path, name: str, text: str) -> str:
    path = directory / name
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


async def measure(registry: HookRegistry, calls: int) -> list[float]:
    ctx = HookContext(
        tool_name="oa__purchase_pay",
        tool_args={"purchase_id": "PO-1", "amount": 10},
        metadata={"run_id": 1, "tool_call_id": "call_1"},
    )
    for _ in range(min(20, calls)):  # warm up
        out = await registry.run_pre_tool_use(ctx)
        assert out.allow, out.side_effects
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        out = await registry.run_pre_tool_use(ctx)
        times.append(time.perf_counter() - start)
        assert out.allow, out.side_effects
    return times


def audit_fixture() -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from agents.models import Agent, Conversation, Run
    from tenancy.models import Organization

    org = Organization.objects.create(name="Bench")
    user = get_user_model().objects.create_user("bench")
    agent = Agent.objects.create(organization=org, owner=user, name="bench")
    conversation = Conversation.objects.create(organization=org, agent=agent, user=user)
    run = Run.objects.create(conversation=conversation, agent=agent, user=user, input="pay")
    return {"org_id": org.pk, "agent_id": agent.pk, "user_id": user.pk, "run_id": run.pk}


async def measure_audit(calls: int) -> list[float]:
    """audit_log as the engine calls it: PostToolUse, one new tool call (one row) each time."""
    from asgiref.sync import sync_to_async

    ids = await sync_to_async(audit_fixture, thread_sensitive=True)()
    registry = HookRegistry([build_item({"kind": "class", "name": "audit_log"})])
    times = []
    for n in range(calls + 20):
        ctx = HookContext(
            tool_name="oa__purchase_pay",
            tool_args={"purchase_id": f"PO-{n}", "amount": 10, "api_key": "sk-masked"},
            agent_id=ids["agent_id"],
            user_id=ids["user_id"],
            metadata={
                "org_id": ids["org_id"],
                "run_id": ids["run_id"],
                "tool_call_id": f"call_{n}",
                "duration_ms": 3.0,
                "tool_status": "succeeded",
            },
            tool_result={"status": "paid", "purchase_id": f"PO-{n}"},
        )
        start = time.perf_counter()
        out = await registry.run_post_tool_use(ctx)
        if n >= 20:  # the first calls warm the connection up
            times.append(time.perf_counter() - start)
        assert not out.failed_hooks, out.side_effects
    return times


def row(label: str, times: list[float]) -> str:
    median = percentile(times, 50)
    return (
        f"| {label:22} | {len(times):>6} | {fmt(median):>10} | {fmt(percentile(times, 95)):>10} | "
        f"{1 / median:>9,.0f} |"
    )


async def main(opts: argparse.Namespace, *, postgres: bool) -> None:

    logging.getLogger("httpx").setLevel(logging.WARNING)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    workdir = Path(tempfile.mkdtemp(prefix="hook-kinds-"))
    cat = script(workdir, "cat.sh", "#!/bin/sh\ncat > /dev/null\n")
    jq = script(
        workdir,
        "jq.sh",
        "#!/bin/sh\njq 'if .tool_input.amount >= 50000 then "
        '{hookSpecificOutput: {permissionDecision: "deny"}} else empty end\'\n',
    )
    pre = {"point": "PreToolUse"}
    cases = [
        (
            "class (deny_tools)",
            {"kind": "class", "name": "deny_tools", "params": {"tools": "oa__other"}},
            100,
        ),
        (
            "python (async def)",
            {"kind": "python", "name": "py", "params": {"path": "__main__.allow_all"}, **pre},
            100,
        ),
        (
            "python (def)",
            {"kind": "python", "name": "py_sync", "params": {"path": "__main__.allow_all_sync"}, **pre},
            100,
        ),
        (
            "http (local, signed)",
            {
                "kind": "http",
                "name": "http",
                "params": {"url": f"http://127.0.0.1:{server.server_port}/hook"},
                "secret": SECRET,
                **pre,
            },
            1,
        ),
        ("command (sh: cat)", {"kind": "command", "name": "cat", "params": {"argv": [cat]}, **pre}, 1),
        ("command (sh + jq)", {"kind": "command", "name": "jq", "params": {"argv": [jq]}, **pre}, 1),
    ]
    print(f"one PreToolUse hook per call, through HookRegistry.run_pre_tool_use; {os.cpu_count()} CPUs\n")
    print(f"| {'kind':22} | {'calls':>6} | {'median':>10} | {'p95':>10} | {'calls/s':>9} |")
    print(f"|{'-' * 24}|{'-' * 8}|{'-' * 12}|{'-' * 12}|{'-' * 11}|")
    for label, item, factor in cases:
        registry = HookRegistry([build_item(item)])
        print(row(label, await measure(registry, opts.calls * factor)))
    server.shutdown()
    if postgres:
        print(row("audit_log (PostgreSQL)", await measure_audit(opts.calls * 5)))
    else:
        print("| audit_log (PostgreSQL) | skipped: set DATABASE_URL=postgres://… to measure it |")


def fmt(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per kind (class/python: x100)")
    options = parser.parse_args()
    from django.db import connection

    if connection.vendor == "postgresql":
        with bench_database():
            asyncio.run(main(options, postgres=True))
    else:
        asyncio.run(main(options, postgres=False))
