"""What the platform adds to an MCP tool call, as a connector and as a gateway, in one run.

The records server (tests/mcp_servers/records.py, written with the official SDK) serves
Streamable HTTP in a process of its own. Each round times, per call of its read-only ``lookup``:

* **direct**: the official SDK's client calling the server in one open session (the baseline);
* **connector**: the platform's MCP tool (``agents.tools.mcp_tools``) calling it from a long-lived
  loop, as a worker does (its session kept open between calls);
* **passthrough**: the SDK's client calling a server that only forwards each call to the records
  server (``bench/_passthrough.py``: served and forwarding as the gateway is, and nothing else):
  the floor under the gateway, what receiving an MCP call and making one cost in this stack;
* **gateway**: the SDK's client calling the platform's gateway (``/mcp/<key>/``) on an agent whose
  tool is that connector: every call a run of the agent through its hook chain, on PostgreSQL.
  The gateway is served as deployed (the Procfile's ``web``: Daphne, ``fimone.asgi``) in a process
  of its own, as the records server is: the client shares no interpreter with either.

Rounds alternate the four (``--rounds`` x ``--calls`` calls each, after a warm-up) and the
figures are the p50 / p99 of all calls, the ratios to direct, and what each adds at p50; the
platform's own work (what the gateway adds beyond the passthrough); then each server's own CPU
per call (median of its rounds, read from ``/proc`` on Linux), which a busy host moves less than
the wall clock.
Target: the gateway adds <= 3 ms p50 per ungated call.

    DATABASE_URL=postgres://… REDIS_URL=redis://… python bench/mcp_overhead.py [--calls 200] [--rounds 5]
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

from _django import ROOT, bench_database, test_database_url

RECORDS = ROOT / "tests" / "mcp_servers" / "records.py"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(
    name: str, argv: list[str], port: int, *, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``argv`` (the ``name`` server) started, once it accepts connections on ``port``."""
    process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import socket

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"the {name} server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    sys.exit(f"the {name} server did not start")


def start_records(port: int) -> subprocess.Popen[bytes]:
    return start("records", [sys.executable, str(RECORDS), "http", str(port)], port)


def start_gateway(port: int) -> subprocess.Popen[bytes]:
    """The web process of the Procfile (Daphne serving ``fimone.asgi``) on the benchmark's data."""
    from django.conf import settings

    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "REDIS_URL": settings.REDIS_URL or "",
        "DJANGO_SETTINGS_MODULE": "fimone.settings",
        "DEBUG": "false",  # as deployed: no query log kept per request
    }
    argv = [sys.executable, "-m", "daphne", "--bind", "127.0.0.1", "--port", str(port)]
    return start("gateway", [*argv, "fimone.asgi:application"], port, env=env)


def start_passthrough(port: int, upstream: str) -> subprocess.Popen[bytes]:
    """``bench/_passthrough.py`` served by Daphne, as the gateway is, forwarding to ``upstream``."""
    env = {**os.environ, "UPSTREAM": upstream, "PYTHONPATH": str(ROOT / "bench")}
    argv = [sys.executable, "-m", "daphne", "--bind", "127.0.0.1", "--port", str(port), "_passthrough:app"]
    return start("passthrough", argv, port, env=env)


def cpu_seconds(pid: int) -> float | None:
    """The CPU time (user + system) process ``pid`` has used so far; ``None`` off Linux."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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

    with bench_database(need_redis=True):
        import httpx2
        from django.contrib.auth import get_user_model
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from rest_framework.authtoken.models import Token

        from agents.mcp_connectors import connector_tools_refresh
        from agents.models import Agent, Connector
        from agents.tools.mcp_tools import keep_sessions_on
        from agents.tools.toolbox import action_tool
        from mcp_gateway.models import Gateway
        from tenancy.models import Membership, Organization, Role

        records_port, gateway_port, passthrough_port = free_port(), free_port(), free_port()
        server = start_records(records_port)
        endpoint = f"http://127.0.0.1:{records_port}/mcp"
        passthrough = start_passthrough(passthrough_port, endpoint)
        web = None
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

            web = start_gateway(gateway_port)
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
                "passthrough": lambda n: asyncio.run(
                    via_client(f"http://127.0.0.1:{passthrough_port}/mcp", {}, "lookup", n)
                ),
                "gateway": lambda n: asyncio.run(via_client(gateway_url, auth, "records__lookup", n)),
            }
            for measure in measures.values():
                measure(20)  # warm-up: imports, connections, caches
            times: dict[str, list[float]] = {name: [] for name in measures}
            # The serving process's CPU per call: steadier than wall time on a busy host.
            served_by = {"gateway": web.pid, "passthrough": passthrough.pid}
            server_cpu: dict[str, list[float]] = {name: [] for name in served_by}
            for round_ in range(opts.rounds):
                order = list(measures) if round_ % 2 == 0 else list(reversed(measures))
                for name in order:
                    pid = served_by.get(name)
                    before = cpu_seconds(pid) if pid is not None else None
                    times[name] += measures[name](opts.calls)
                    after = cpu_seconds(pid) if pid is not None else None
                    if before is not None and after is not None:
                        server_cpu[name].append((after - before) / opts.calls * 1000)
        finally:
            server.kill()
            passthrough.kill()
            if web is not None:
                web.kill()
                web.wait()

    direct50, direct99 = pct(times["direct"], 0.5), pct(times["direct"], 0.99)
    print(f"MCP tool call, {opts.rounds} rounds x {opts.calls} calls, records server over Streamable HTTP")
    print(f"{'':11} {'p50 ms':>8} {'p99 ms':>8} {'x direct p50':>13} {'adds p50 ms':>12}")
    for name, values in times.items():
        p50, p99 = pct(values, 0.5), pct(values, 0.99)
        print(f"{name:11} {p50:8.2f} {p99:8.2f} {p50 / direct50:13.2f} {p50 - direct50:12.2f}")
    added = pct(times["gateway"], 0.5) - direct50
    print(f"gateway adds {added:.2f} ms p50 (target <= 3 ms): {'met' if added <= 3 else 'NOT met'}")
    print(
        f"spread: direct p99/p50 {direct99 / direct50:.1f}; "
        f"mean gateway {statistics.mean(times['gateway']):.2f} ms"
    )
    floor = pct(times["passthrough"], 0.5) - direct50
    print(f"of which the passthrough's floor (receiving an MCP call and making one): {floor:.2f} ms p50")
    print(f"and the platform's own work (gateway - passthrough): {added - floor:.2f} ms p50")
    if floor > 3:
        # A gateway doing nothing at all would miss the target too: the host, not the code, decides it.
        print("the floor alone is over the 3 ms target on this host")
    for name, cpu in server_cpu.items():
        if cpu:
            print(f"{name} server CPU per call: {statistics.median(cpu):.2f} ms (median of the rounds)")
    os._exit(0)  # the servers' threads hold sessions open: nothing to wait for


async def _keep(enable) -> None:
    enable(asyncio.get_running_loop())


if __name__ == "__main__":
    main()
