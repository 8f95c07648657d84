"""What the platform adds to an MCP tool call, as a connector and as a gateway, in one run.

The records server (tests/mcp_servers/records.py, written with the official SDK) serves
Streamable HTTP in a process of its own. Each round times, per call of its read-only ``lookup``:

* **direct**: the official SDK's client calling the server in one open session (the baseline);
* **connector**: the platform's MCP tool (``agents.tools.mcp_tools``) calling it from a long-lived
  loop, as a worker does (its session kept open between calls);
* **gateway**: the SDK's client calling the platform's gateway (``/mcp/<key>/``) on an agent whose
  tool is that connector: every call a run of the agent through its hook chain, on PostgreSQL.

Rounds alternate the three (``--rounds`` x ``--calls`` calls each, after a warm-up) and the
figures are the p50 / p99 of all calls, the ratios to direct, and what each adds at p50.
Target: the gateway adds <= 3 ms p50 per ungated call.

    DATABASE_URL=postgres://… python bench/mcp_overhead.py [--calls 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import threading
import time

os.environ.setdefault("RUN_START_RATE", "1000000/min")  # every gateway call starts a run

from _django import ROOT, bench_database

RECORDS = ROOT / "tests" / "mcp_servers" / "records.py"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_records(port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, str(RECORDS), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import socket

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    sys.exit("the records server did not start")


class Loop:
    """A long-lived event loop in a thread of its own (a worker's, or a server's)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    opts = parser.parse_args()

    with bench_database():
        import httpx2
        import uvicorn
        from django.contrib.auth import get_user_model
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from rest_framework.authtoken.models import Token

        from agents.executors import embedded
        from agents.mcp_connectors import connector_tools_refresh
        from agents.models import Agent, Connector, Membership, Organization, Role
        from agents.tools.mcp_tools import keep_sessions_on
        from agents.tools.toolbox import action_tool
        from mcp_gateway.models import Gateway
        from mcp_gateway.server import GatewayApp

        records_port, gateway_port = free_port(), free_port()
        server = start_records(records_port)
        endpoint = f"http://127.0.0.1:{records_port}/mcp"
        try:
            org = Organization.objects.create(name="Bench")
            user = get_user_model().objects.create_user("bench")
            Membership.objects.create(organization=org, user=user, role=Role.MEMBER)
            connector = Connector.objects.create(
                organization=org,
                slug="records",
                name="Records",
                kind=Connector.Kind.MCP,
                mcp_transport=Connector.Transport.HTTP,
                base_url=endpoint,
            )
            connector_tools_refresh(connector=connector, actor=None)
            lookup = connector.actions.get(remote_name="lookup")
            agent = Agent.objects.create(organization=org, owner=user, name="Desk")
            agent.actions.set([lookup])
            gateway = Gateway.objects.create(organization=org, agent=agent, name="Desk")
            token = Token.objects.create(user=user).key
            tool = action_tool(lookup, Connector.objects.get(pk=connector.pk))

            # The gateway's server: its own long-lived loop, bound as Daphne binds its loop.
            config = uvicorn.Config(GatewayApp(), host="127.0.0.1", port=gateway_port, log_level="warning")
            web = uvicorn.Server(config)

            def serve() -> None:
                loop = asyncio.new_event_loop()
                asyncio.set_event_loop(loop)
                embedded.bind_loop(loop)
                loop.run_until_complete(web.serve())

            threading.Thread(target=serve, daemon=True).start()
            while not web.started:
                time.sleep(0.02)
            worker = Loop()
            worker.run(_keep(keep_sessions_on))
            args = {"record_id": "r-1"}

            async def via_client(url: str, headers: dict[str, str], name: str, n: int) -> list[float]:
                http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30))
                async with Client(streamable_http_client(url, http_client=http), cache=None) as client:
                    times = []
                    for _ in range(n):
                        started = time.perf_counter()
                        result = await client.call_tool(name, args)
                        times.append((time.perf_counter() - started) * 1000)
                        assert not result.is_error, result
                    return times

            async def via_tool(n: int) -> list[float]:
                times = []
                for _ in range(n):
                    started = time.perf_counter()
                    await tool.run(args)
                    times.append((time.perf_counter() - started) * 1000)
                return times

            gateway_url = f"http://127.0.0.1:{gateway_port}{gateway.path}"
            auth = {"Authorization": f"Bearer {token}"}
            measures = {
                "direct": lambda n: asyncio.run(via_client(endpoint, {}, "lookup", n)),
                "connector": lambda n: worker.run(via_tool(n)),
                "gateway": lambda n: asyncio.run(via_client(gateway_url, auth, "records__lookup", n)),
            }
            for measure in measures.values():
                measure(20)  # warm-up: imports, connections, caches
            times: dict[str, list[float]] = {name: [] for name in measures}
            for round_ in range(opts.rounds):
                order = list(measures) if round_ % 2 == 0 else list(reversed(measures))
                for name in order:
                    times[name] += measures[name](opts.calls)
        finally:
            server.kill()

    direct50, direct99 = pct(times["direct"], 0.5), pct(times["direct"], 0.99)
    print(f"MCP tool call, {opts.rounds} rounds x {opts.calls} calls, records server over Streamable HTTP")
    print(f"{'':10} {'p50 ms':>8} {'p99 ms':>8} {'x direct p50':>13} {'adds p50 ms':>12}")
    for name, values in times.items():
        p50, p99 = pct(values, 0.5), pct(values, 0.99)
        print(f"{name:10} {p50:8.2f} {p99:8.2f} {p50 / direct50:13.2f} {p50 - direct50:12.2f}")
    added = pct(times["gateway"], 0.5) - direct50
    print(f"gateway adds {added:.2f} ms p50 (target <= 3 ms): {'met' if added <= 3 else 'NOT met'}")
    print(
        f"spread: direct p99/p50 {direct99 / direct50:.1f}; "
        f"mean gateway {statistics.mean(times['gateway']):.2f} ms"
    )
    os._exit(0)  # the servers' threads hold sessions open: nothing to wait for


async def _keep(enable) -> None:
    enable(asyncio.get_running_loop())


if __name__ == "__main__":
    main()
