"""The cost of a verified Feishu click, as a multiple of an empty request through the same stack.

For 1 and then 2 Daphne servers (PostgreSQL + Redis), in the same run and on the same servers:
an empty request (``GET /healthz``: Daphne, Django's handler and middleware, a JSON answer) for a
fixed time, then (after a few clicks to warm up: the click path's connection pool, prepared
statements, the organisation's audit-chain head) every click once: valid signed and encrypted
decisions on pending requests (approve / reject), then replays of half of them (same event) and
forgeries (bad signature). An outbox relay runs beside the servers, as in production, and sends
the clicks' follow-ups to the broker (no worker takes them: they are dropped at the end); its CPU
is printed too. The load comes from wrk (C, one wrk process per server, as a balancer would
spread it) driven by bench/wrk_bodies.lua, so the load generator costs less than the server it
loads. Prints requests/s (in all and per server), p50 / p99 latency, the servers' CPU per
request, 5xx, double decisions, and the click's cost as a multiple of the empty request (by
throughput at the same connections, and by server CPU; target <= 3x).

    apt-get install wrk
    DATABASE_URL=postgres://… REDIS_URL=redis://… python bench/callback_throughput.py \\
        [--requests 1000] [--connections 8] [--servers 1,2] [--empty-seconds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from _django import ROOT, bench_database, parked_runs, test_database_url

OPEN_ID = "ou_bench_approver"
LUA = str(ROOT / "bench" / "wrk_bodies.lua")
STALL_SECONDS = 15  # a wrk that hears no answer this long is stopped; its losses are reported
WARM_CLICKS = 50  # per server count: clicks sent before the measured ones (pools, prepared statements)


def _drop_queue(name: str) -> None:
    """Delete the Celery queue the servers sent to (kombu keeps it as Redis lists named after it)."""
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter(match=f"{name}*"):
        client.delete(key)


@dataclass
class Load:
    """What one phase measured, over every wrk process of it."""

    answered: int = 0
    seconds: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)
    latency_us: list[int] = field(default_factory=list)  # each answer's, from its request's send
    socket_errors: int = 0
    unanswered: int = 0
    server_cpu: float = 0.0  # seconds of CPU the servers used during the phase
    relay_cpu: float = 0.0  # seconds of CPU the outbox relay used during the phase
    machine_cpu: float = 0.0  # seconds of CPU the whole machine was busy during the phase
    database_cpu: float = 0.0  # of which PostgreSQL's processes
    left_in_outbox: int = 0  # follow-ups the relay had not sent a while after the phase

    @property
    def cpu_ms(self) -> float:
        """Server CPU per answered request."""
        return 1000 * self.server_cpu / self.answered if self.answered else float("nan")

    @property
    def rate(self) -> float:
        return self.answered / self.seconds if self.seconds else 0.0

    def percentile_ms(self, p: float) -> float:
        if not self.latency_us:
            return float("nan")
        ordered = sorted(self.latency_us)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] / 1000

    @property
    def server_errors(self) -> int:
        return sum(count for status, count in self.statuses.items() if int(status) >= 500)


def write_bodies(items: list[tuple[bytes, dict[str, str]]]) -> str:
    """One line per request for the Lua script: header, value, ..., body (tab-separated)."""
    handle, path = tempfile.mkstemp(prefix="bench-bodies-", suffix=".tsv")
    with os.fdopen(handle, "w") as out:
        for body, headers in items:
            text = body.decode()
            assert "\t" not in text and "\n" not in text
            fields = [value for pair in headers.items() for value in pair]
            out.write("\t".join([*fields, text]) + "\n")
    return path


def run_wrk(urls: list[str], *, connections: int, bodies: str | None, seconds: float) -> Load:
    """One wrk per server, at the same time, ``connections`` split between them. With ``bodies``
    each line is sent once and wrk is stopped when every answer is in; else it runs ``seconds``."""
    shares = len(urls)
    processes = []
    for share, url in enumerate(urls):
        conns = max(1, connections // shares)  # one wrk thread per connection (see the Lua script)
        args = [bodies or "-", str(share), str(shares), str(conns)]
        duration = f"{int(seconds)}s" if bodies is None else "600s"
        processes.append(
            subprocess.Popen(
                [
                    "wrk",
                    "-t",
                    str(conns),
                    "-c",
                    str(conns),
                    "-d",
                    duration,
                    "--timeout",
                    "10s",
                    "-s",
                    LUA,
                    url,
                    "--",
                    *args,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs: list[list[str]] = [[] for _ in processes]
    threads_of = [max(1, connections // shares) for _ in processes]
    heard = [time.monotonic() for _ in processes]

    def follow(index: int) -> None:
        process, done = processes[index], 0
        for line in process.stdout:
            outputs[index].append(line)
            heard[index] = time.monotonic()
            if line.strip() == "thread-done":
                done += 1
                if done == threads_of[index]:
                    process.send_signal(signal.SIGINT)  # ends wrk's -d wait; it then reports

    readers = [threading.Thread(target=follow, args=(i,)) for i in range(len(processes))]
    for reader in readers:
        reader.start()
    stalled = 0
    while any(process.poll() is None for process in processes):
        for index, process in enumerate(processes):
            if (
                bodies is not None
                and process.poll() is None
                and time.monotonic() - heard[index] > STALL_SECONDS
            ):
                stalled += 1  # answers stopped coming: some request was lost or timed out
                process.send_signal(signal.SIGINT)
                heard[index] = float("inf")
        time.sleep(0.2)
    for reader in readers:
        reader.join()

    load, first, last = Load(), None, None
    for lines in outputs:
        result = next((line for line in lines if line.startswith("result ")), None)
        if result is None:
            sys.exit("wrk gave no result:\n" + "".join(lines[-20:]))
        data = json.loads(result.removeprefix("result "))
        for thread in data["threads"]:
            load.answered += thread["answered"]
            for status, count in thread["statuses"].items():
                load.statuses[status] = load.statuses.get(status, 0) + count
            if thread["answered"]:
                first = thread["first_us"] if first is None else min(first, thread["first_us"])
                last = thread["last_us"] if last is None else max(last, thread["last_us"])
        for thread in data["threads"]:
            load.latency_us += thread["latencies_us"]
        load.socket_errors += data["socket_errors"] + data["timeouts"]
    load.seconds = ((last or 0) - (first or 0)) / 1e6
    if bodies is not None:
        with open(bodies) as lines:
            load.unanswered = sum(1 for _ in lines) - load.answered
    return load


def start_servers(count: int, env: dict[str, str]) -> tuple[list[subprocess.Popen], list[socket.socket]]:
    """``count`` Daphne processes, each on a listening socket opened here and handed over (--fd)."""
    import httpx

    listeners, servers = [], []
    for _ in range(count):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1024)
        listener.set_inheritable(True)
        listeners.append(listener)
        servers.append(
            subprocess.Popen(
                [sys.executable, "-m", "daphne", "--fd", str(listener.fileno()), "fimone.asgi:application"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=[listener.fileno()],
            )
        )
    deadline = time.monotonic() + 30
    for listener in listeners:
        port = listener.getsockname()[1]
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                sys.exit("Daphne did not start")
            time.sleep(0.2)
    return servers, listeners


def start_relay(env: dict[str, str]) -> subprocess.Popen:
    """The outbox relay, as production runs it: it sends the clicks' follow-ups to the broker."""
    return subprocess.Popen(
        [sys.executable, "manage.py", "outbox_relay"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def profile_servers(
    servers: list[subprocess.Popen], directory: str | None, label: str
) -> list[subprocess.Popen]:
    """py-spy sampling each server (folded stacks, idle threads left out), if asked for."""
    if directory is None:
        return []
    if shutil.which("py-spy") is None:
        sys.exit("--profile needs py-spy: pip install py-spy")
    os.makedirs(directory, exist_ok=True)
    profilers = [
        subprocess.Popen(
            [
                "py-spy",
                "record",
                "--pid",
                str(server.pid),
                "--format",
                "raw",
                "--rate",
                "200",
                "--threads",
                "--nonblocking",  # the servers are not paused to be sampled
                "--output",
                os.path.join(directory, f"clicks-{label}-{index}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for index, server in enumerate(servers)
    ]
    time.sleep(1)  # attached before the load starts
    return profilers


def cpu_seconds(processes: list[subprocess.Popen]) -> float:
    """User + system CPU time the processes used so far (Linux /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for process in processes:
        with open(f"/proc/{process.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / ticks


def machine_cpu() -> tuple[float, float]:
    """(all busy CPU of the machine, CPU of PostgreSQL's processes), in seconds so far (Linux)."""
    ticks = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, stat.readline().split()[1:9])
    database = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                name, rest = stat.read().split(") ", 1)
        except OSError:
            continue  # gone meanwhile
        if name.endswith("(postgres"):
            fields = rest.split()
            database += int(fields[11]) + int(fields[12])
    return (user + nice + system + irq + softirq + steal) / ticks, database / ticks


def since(before: tuple[float, float]) -> tuple[float, float]:
    now = machine_cpu()
    return now[0] - before[0], now[1] - before[1]


def wait_for_outbox(seconds: float = 10) -> int:
    """How many follow-ups are still in the outbox once the relay had ``seconds`` to send them."""
    from fimone.models import OutboxMessage

    deadline = time.monotonic() + seconds
    while (left := OutboxMessage.objects.count()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def stop_servers(servers: list[subprocess.Popen], listeners: list[socket.socket]) -> None:
    for server in servers:
        server.terminate()
    for server in servers:
        server.wait(15)
    for listener in listeners:
        listener.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="valid clicks per server count")
    parser.add_argument("--connections", type=int, default=8, help="in total, split between the servers")
    parser.add_argument("--servers", default="1,2", help="server counts to measure, comma-separated")
    parser.add_argument("--empty-seconds", type=float, default=10, help="how long the empty load runs")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="record each server's stacks during the clicks with py-spy (pip install py-spy) into DIR",
    )
    opts = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("this benchmark drives wrk: apt-get install wrk")
    server_counts = [int(n) for n in opts.servers.split(",")]

    with bench_database(need_redis=True):
        from django.db import connection

        from approvals.models import ChannelConfig, ConfirmationEvent
        from channels_im.models import ImIdentity
        from tenancy.models import Organization
        from tests.channels_im.feishu_fake import AppKeys, FakeFeishu, click_event, signed_body

        org = Organization.objects.create(name="Bench")
        fake = FakeFeishu().start()  # card updates land here
        keys: AppKeys = fake.keys
        config = ChannelConfig.objects.create(
            organization=org,
            kind="feishu",
            name="bench",
            is_default=True,
            secrets={
                "app_id": keys.app_id,
                "app_secret": fake.app_secret,
                "verification_token": keys.verification_token,
                "encrypt_key": keys.encrypt_key,
            },
            settings_json={"chat_id": "oc_bench", "domain": fake.url},
        )
        per_round = WARM_CLICKS + opts.requests
        _, approver, all_requests = parked_runs(per_round * len(server_counts), channel_config=config)
        ImIdentity.objects.create(organization=org, user=approver, provider="feishu", external_id=OPEN_ID)
        with connection.cursor() as cursor:  # measured from a steady state, not an autovacuum's
            cursor.execute("VACUUM ANALYZE")

        env = {
            **os.environ,
            "DATABASE_URL": test_database_url(),
            "DEBUG": "false",
            "LOG_LEVEL": "WARNING",
            # One approver clicks every card: her decision rate is not what is measured.
            "DECISION_RATE": "1000000/min",
            # Its own Celery queue: the follow-ups it sends have no worker and are dropped at the end.
            "CELERY_QUEUE": f"bench-callbacks-{os.getpid()}",
        }
        rows = []
        files: list[str] = []
        try:
            for round_index, servers_count in enumerate(server_counts):
                requests = all_requests[round_index * per_round : (round_index + 1) * per_round]
                valid = []
                for index, request in enumerate(requests):
                    event = click_event(
                        keys,
                        request_id=str(request.pk),
                        decision="approve" if index % 2 else "reject",
                        open_id=OPEN_ID,
                    )
                    valid.append(signed_body(event, encrypt_key=keys.encrypt_key))
                warm, valid = valid[:WARM_CLICKS], valid[WARM_CLICKS:]
                hostile = random.sample(valid, len(valid) // 2)  # replays: each sent again
                for body, headers in random.sample(valid, len(valid) // 2):
                    hostile.append((body, {**headers, "X-Lark-Signature": "0" * 64}))  # forgeries
                random.shuffle(hostile)
                warm_file, valid_file, hostile_file = (
                    write_bodies(warm),
                    write_bodies(valid),
                    write_bodies(hostile),
                )
                files += [warm_file, valid_file, hostile_file]

                servers, listeners = start_servers(servers_count, env)
                relay = start_relay(env)
                try:
                    ports = [listener.getsockname()[1] for listener in listeners]
                    empty_urls = [f"http://127.0.0.1:{port}/healthz" for port in ports]
                    click_urls = [
                        f"http://127.0.0.1:{port}/im/callback/{config.callback_key}/" for port in ports
                    ]
                    run_wrk(empty_urls, connections=opts.connections, bodies=None, seconds=2)  # warm-up
                    run_wrk(click_urls, connections=opts.connections, bodies=warm_file, seconds=0)
                    before, machine_before = cpu_seconds(servers), machine_cpu()
                    empty = run_wrk(
                        empty_urls, connections=opts.connections, bodies=None, seconds=opts.empty_seconds
                    )
                    empty.server_cpu = cpu_seconds(servers) - before
                    empty.machine_cpu, empty.database_cpu = since(machine_before)
                    profilers = profile_servers(servers, opts.profile, f"{servers_count}-daphne")
                    before, relay_before, machine_before = (
                        cpu_seconds(servers),
                        cpu_seconds([relay]),
                        machine_cpu(),
                    )
                    clicks = run_wrk(click_urls, connections=opts.connections, bodies=valid_file, seconds=0)
                    clicks.server_cpu = cpu_seconds(servers) - before
                    clicks.relay_cpu = cpu_seconds([relay]) - relay_before
                    clicks.machine_cpu, clicks.database_cpu = since(machine_before)
                    for profiler in profilers:
                        profiler.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
                        profiler.wait(60)
                    before = cpu_seconds(servers)
                    replays = run_wrk(
                        click_urls, connections=opts.connections, bodies=hostile_file, seconds=0
                    )
                    replays.server_cpu = cpu_seconds(servers) - before
                    clicks.left_in_outbox = wait_for_outbox()
                finally:
                    relay.terminate()
                    relay.wait(15)
                    stop_servers(servers, listeners)
                decided = ConfirmationEvent.objects.filter(kind=ConfirmationEvent.Kind.DECIDED)
                counts = dict.fromkeys((r.pk for r in requests), 0)
                for request_id in decided.filter(request_id__in=list(counts)).values_list(
                    "request_id", flat=True
                ):
                    counts[request_id] += 1
                doubles = {n: sum(1 for c in counts.values() if c == n) for n in set(counts.values()) - {1}}
                for request_id in [pk for pk, n in counts.items() if n != 1][:3]:  # what happened instead
                    history = ConfirmationEvent.objects.filter(request_id=request_id).order_by("chain_seq")
                    print(f"request {request_id}: {list(history.values_list('kind', 'details'))}")
                rows.append((servers_count, empty, clicks, replays, doubles))
        finally:
            fake.stop()
            _drop_queue(env["CELERY_QUEUE"])
            for path in files:
                os.unlink(path)

        print(
            f"wrk, {opts.connections} connections in total, one wrk process per server; "
            f"{opts.requests} valid clicks per server count, then {opts.requests // 2} replays and "
            f"{opts.requests // 2} forgeries; the empty request is GET /healthz "
            f"for {opts.empty_seconds:.0f} s"
        )
        cores = os.cpu_count() or 1
        for servers_count, empty, clicks, replays, doubles in rows:
            ratio = empty.rate / clicks.rate if clicks.rate else float("inf")
            name = "1 Daphne" if servers_count == 1 else f"{servers_count} Daphne"
            print(f"\n{name}:")
            for label, load in (
                ("empty request ", empty),
                ("verified click", clicks),
                ("replay/forgery", replays),
            ):
                print(
                    f"  {label}: {load.rate:7.0f}/s ({load.rate / servers_count:4.0f}/s per server)  "
                    f"p50 {load.percentile_ms(50):6.1f} ms  "
                    f"p99 {load.percentile_ms(99):6.1f} ms  server CPU {load.cpu_ms:5.2f} ms/request  "
                    f"answers {json.dumps(load.statuses, sort_keys=True)}"
                )
            latency_ratio = clicks.percentile_ms(50) / empty.percentile_ms(50)
            cpu_ratio = clicks.cpu_ms / empty.cpu_ms
            print(
                f"  a verified click costs {ratio:.1f}x an empty request (throughput; target <= 3x) "
                f"{'OK' if ratio <= 3 else 'OVER'}; server CPU {cpu_ratio:.1f}x; "
                f"p50 latency {latency_ratio:.1f}x"
            )
            errors = empty.server_errors + clicks.server_errors + replays.server_errors
            sockets = empty.socket_errors + clicks.socket_errors + replays.socket_errors
            lost = clicks.unanswered + replays.unanswered
            print(
                "  whole machine: "
                + "; ".join(
                    f"{label} {1000 * load.machine_cpu / max(1, load.answered):.2f} ms CPU per request "
                    f"(PostgreSQL {1000 * load.database_cpu / max(1, load.answered):.2f}), "
                    f"cores {100 * load.machine_cpu / max(1e-9, load.seconds * cores):.0f}% busy"
                    for label, load in (("empty", empty), ("click", clicks))
                )
            )
            print(
                f"  outbox relay: {1000 * clicks.relay_cpu / max(1, clicks.answered):.2f} ms CPU per click, "
                f"{clicks.left_in_outbox} follow-ups left unsent"
            )
            print(
                f"  5xx answers: {errors}; socket errors: {sockets}; unanswered by wrk: {lost}; "
                f"requests without exactly one decision: {sum(doubles.values())}"
                + (f" (by number of decisions: {doubles})" if doubles else "")
            )


if __name__ == "__main__":
    main()
