"""Run streams fanned out to many watchers: 200 WebSocket clients watching 50 concurrent scripted
runs on one Daphne with PostgreSQL + Redis (the Redis channel layer), from a separate process.

As deployed, the runs execute on Celery workers (``--workers``, two by default) and the Daphne
server only streams and takes the decisions; ``--executor embedded`` runs them inside the Daphne
process instead, as ``make run`` does, so the same server also does the runs' database work. The
runs are started and approved through a second Daphne, as behind a load balancer, so the measured
server only streams (``--api same`` sends those requests to it as well).

Each run asks for a tool call that needs approval and parks; the load process connects its
watchers (4 per run, ``ws/runs/<id>/?after=0``: what happened before arrives as a replay), then
the runs are approved through the decision API, round after round, and stream everything else
live to their end. Prints the stored events delivered per second and the p50 / p99 delay from an
event's commit (its ``created_at``, taken just before the commit: the figure errs high) to its
receipt by a client, over the events that happened while every watcher was connected; checks that
every watcher received every stored event of its run exactly once and in order.
Target: p99 <= 100 ms, no event lost or doubled.

Every process it starts runs under a stall probe (``bench/_stalls.py``: its collections, and any
pause of the whole process of 20 ms or more); it prints each process's stalls and how many of the
events over 100 ms were on their way while that process stood still, so a bad run names its cause.
The load process freezes the heap it inherits from this one (``--load-gc``).

    DATABASE_URL=postgres://… REDIS_URL=redis://… python bench/stream_fanout.py [--runs 50 --watchers 4]
        [--executor celery|embedded --workers 2 --api separate|same --load-gc frozen|default]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import itertools
import json
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _stalls
from _django import ROOT, bench_database, percentile, test_database_url

DELTA = "llm.delta"
TERMINAL = {"run.completed", "run.failed"}


def watch(
    port: int,
    sockets: list[tuple[int, str]],
    ready: Any,
    done: Any,
    stop: Any,
    out: Any,
    stall_log: str,
    load_gc: str,
) -> None:
    """The load process: one WebSocket per ``(run_id, cookie)``, all on one event loop. Signals
    ``ready`` once every socket is open and its replay has arrived, ``done`` once every socket saw
    its run end (or ``stop`` was set), and reports, per socket, each stored event received as
    ``(seq, created_at, received_at)``.

    It is forked from the benchmark's process and inherits its heap (Django, the ORM's objects):
    some 300,000 objects that a full collection would scan, stopping every socket's reading, and
    the stall would be counted as the server's. ``load_gc="frozen"`` moves them out of the
    collector's reach, as the servers do with what their start-up built (``fimone/gc_tuning.py``)."""
    import gc

    from websockets.asyncio.client import connect

    if load_gc == "frozen":
        gc.freeze()
    _stalls.probe(stall_log)

    async def one(
        run_id: int, cookie: str, opened: asyncio.Event
    ) -> tuple[int, list[tuple[int, str, float]]]:
        received: list[tuple[int, str, float]] = []
        headers = {"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"}
        url = f"ws://127.0.0.1:{port}/ws/runs/{run_id}/?after=0"
        async with connect(url, additional_headers=headers, max_queue=None, open_timeout=60) as ws:
            opened.set()
            # Until the run's last event, or until the bench gives up waiting (``stop``).
            while not stop.is_set():
                try:
                    frame = await asyncio.wait_for(ws.recv(), timeout=0.5)
                except TimeoutError:
                    continue
                now = time.time()
                event = json.loads(frame)
                if event.get("type") != DELTA:
                    received.append((event["seq"], event["created_at"], now))
                if event.get("type") in TERMINAL:
                    break
        return run_id, received

    async def main() -> list[tuple[int, list[tuple[int, str, float]]]]:
        opened = [asyncio.Event() for _ in sockets]
        tasks = []
        for (run_id, cookie), event in zip(sockets, opened, strict=True):
            tasks.append(asyncio.create_task(one(run_id, cookie, event)))
            await asyncio.sleep(0.005)  # a ramp, not a thundering herd of handshakes
        await asyncio.gather(*(event.wait() for event in opened))
        await asyncio.sleep(1.0)  # the replays of what happened before
        ready.set()
        results = await asyncio.gather(*tasks)
        done.set()
        return results

    out.put(asyncio.run(main()))


def start_spy(run_ids: list[int]) -> dict[tuple[int, int], float]:
    """Subscribe a channel of this process to every run's group and note when each stored event
    came out of Redis: ``receipt - published`` is the fan-out proper (Daphne's consumers and the
    sockets), without the time an event waited for the engine's database thread before its commit."""
    import threading

    from channels.layers import get_channel_layer

    published: dict[tuple[int, int], float] = {}
    subscribed = threading.Event()

    async def listen() -> None:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        for run_id in run_ids:
            await layer.group_add(f"run.{run_id}", channel)
        subscribed.set()
        while True:
            try:
                message = await asyncio.wait_for(layer.receive(channel), timeout=30)
            except TimeoutError:
                return
            now = time.time()
            for event in message.get("events") or [message.get("event")]:
                if event and event["type"] != DELTA:
                    published.setdefault((event["run_id"], event["seq"]), now)

    threading.Thread(target=lambda: asyncio.run(listen()), daemon=True).start()
    subscribed.wait(30)
    return published


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--watchers", type=int, default=4, help="clients per run (200 in all by default)")
    parser.add_argument("--rounds", type=int, default=3, help="approvals per run")
    parser.add_argument("--executor", choices=("celery", "embedded"), default="celery")
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes (celery executor)")
    parser.add_argument(
        "--worker-nice",
        type=int,
        default=10,
        help="the Celery workers' niceness (Procfile's WORKER_NICE, 10 by default; 0: as the servers)",
    )
    parser.add_argument(
        "--api", choices=("separate", "same"), default="separate", help="where runs are started and decided"
    )
    parser.add_argument(
        "--load-gc",
        choices=("frozen", "default"),
        default="frozen",
        help="the load process's collector: what it inherited frozen (default), or Python's default",
    )
    opts = parser.parse_args()
    stall_dir = Path(tempfile.mkdtemp(prefix="fanout-stalls-"))
    stall_logs = {
        name: stall_dir / f"{name}.jsonl"
        for name in ("streaming server", "API server", "load process", "workers")
    }

    with bench_database(need_redis=True):
        from importlib import import_module

        import httpx
        from django.conf import settings
        from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
        from rest_framework.authtoken.models import Token

        from agents.models import Agent, Run, RunEvent
        from approvals.models import ApproverPolicy, ConfirmationRequest, ConfirmationStatus
        from tenancy.models import Membership, Organization, Role

        User = get_user_model()
        org = Organization.objects.create(name="Bench")
        owner = User.objects.create_user("owner")
        approver = User.objects.create_user("approver")
        Membership.objects.create(organization=org, user=owner, role=Role.MEMBER)
        Membership.objects.create(organization=org, user=approver, role=Role.APPROVER)
        watchers = [User.objects.create_user(f"watcher{n}") for n in range(opts.watchers - 1)]
        for user in watchers:  # auditors: they watch runs they do not own
            Membership.objects.create(organization=org, user=user, role=Role.AUDITOR)
        ApproverPolicy.objects.create(organization=org, inline_wait_seconds=0, timeout_seconds=3600)
        answer = "The time was checked and every call ran as approved; here is a short summary of it all."
        turns = [{"tool_calls": [{"name": "current_time", "arguments": {}}]} for _ in range(opts.rounds)]
        agent = Agent.objects.create(
            organization=org,
            owner=owner,
            name="bench",
            builtin_tools=["current_time"],
            require_confirmation_for_all=True,
            model_config_json={
                "provider": "scripted",
                "script": {"turns": [*turns, {"content": answer}]},
            },
        )
        session_store = import_module(settings.SESSION_ENGINE).SessionStore

        def cookie_of(user: Any) -> str:
            session = session_store()
            session[SESSION_KEY] = str(user.pk)
            session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
            session[HASH_SESSION_KEY] = user.get_session_auth_hash()
            session.save()
            return f"{settings.SESSION_COOKIE_NAME}={session.session_key}"

        owner_token = Token.objects.create(user=owner).key
        approver_token = Token.objects.create(user=approver).key
        cookies = [cookie_of(user) for user in [owner, *watchers]]

        def listening() -> tuple[socket.socket, int]:
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen(1024)
            listener.set_inheritable(True)
            return listener, listener.getsockname()[1]

        listener, port = listening()
        api_listener, api_port = listening()
        env = {
            **os.environ,
            "DATABASE_URL": test_database_url(),
            "DEBUG": "false",
            "LOG_LEVEL": "WARNING",
            "RUN_EXECUTOR": opts.executor,
            # Its own queue, so no other worker on this Redis takes the bench's runs.
            "CELERY_QUEUE": f"bench-fanout-{os.getpid()}",
            "CHANNEL_DELIVERY": "background",
            "RUN_START_RATE": "100000/min",
            "DECISION_RATE": "100000/min",
        }

        def daphne(on: socket.socket, stall_log: Path) -> subprocess.Popen:
            probed = [sys.executable, str(Path(_stalls.__file__)), str(stall_log), "-m", "daphne"]
            return subprocess.Popen(
                [*probed, "--fd", str(on.fileno()), "fimone.asgi:application"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                pass_fds=[on.fileno()],
            )

        # The measured server streams; the runs are started and decided through a second one, as
        # behind a load balancer (``--api same``: through the streaming server too).
        servers: list[subprocess.Popen] = []
        workers: list[subprocess.Popen] = []
        loader = None
        try:  # whatever happens, every process started here is stopped
            servers.append(daphne(listener, stall_logs["streaming server"]))
            if opts.api == "separate":
                servers.append(daphne(api_listener, stall_logs["API server"]))
            workers += [
                subprocess.Popen(
                    [
                        *(["nice", "-n", str(opts.worker_nice)] if opts.worker_nice else []),
                        sys.executable,
                        # Their pool's processes are forked from it: they inherit the collector's probe
                        # (not the watchdog thread).
                        str(Path(_stalls.__file__)),
                        str(stall_logs["workers"]),
                        "-m",
                        "celery",
                        "-A",
                        "fimone",
                        "worker",
                        "--loglevel=WARNING",
                        "--concurrency=2",
                        f"--hostname=bench-{n}@%h",
                        "-Q",
                        env["CELERY_QUEUE"],
                    ],
                    cwd=ROOT,
                    env=env,
                    stdout=subprocess.DEVNULL,
                )
                for n in range(opts.workers if opts.executor == "celery" else 0)
            ]
            base = f"http://127.0.0.1:{api_port if opts.api == 'separate' else port}"
            deadline = time.monotonic() + 30
            for url in {f"http://127.0.0.1:{port}", base}:
                while True:
                    try:
                        if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    if time.monotonic() > deadline:
                        sys.exit("Daphne did not start")
                    time.sleep(0.2)

            async def post_all(urls: list[str], token: str, body: dict[str, Any]) -> list[int]:
                async with httpx.AsyncClient(
                    timeout=60, headers={"Authorization": f"Token {token}"}
                ) as client:
                    answers = await asyncio.gather(*(client.post(url, json=body) for url in urls))
                return [a.status_code for a in answers]

            def wait_parked(count: int) -> list[ConfirmationRequest]:
                """The pending requests once all ``count`` runs have parked on one."""
                deadline = time.monotonic() + 120
                while True:
                    pending = list(ConfirmationRequest.objects.filter(status=ConfirmationStatus.PENDING))
                    parked = Run.objects.filter(status="awaiting_approval").count()
                    if len(pending) == count and parked == count:
                        return pending
                    if time.monotonic() > deadline:
                        sys.exit(f"only {parked} of {count} runs parked ({len(pending)} pending requests)")
                    time.sleep(0.1)

            statuses = asyncio.run(
                post_all([f"{base}/api/agents/{agent.pk}/runs/"] * opts.runs, owner_token, {"input": "go"})
            )
            if set(statuses) != {201}:
                sys.exit(f"run starts answered {sorted(set(statuses))}")
            pending = wait_parked(opts.runs)
            run_ids = sorted(r.run_id for r in pending)

            ready, done, stop = multiprocessing.Event(), multiprocessing.Event(), multiprocessing.Event()
            queue: multiprocessing.Queue = multiprocessing.Queue()
            sockets = [(run_id, cookie) for run_id in run_ids for cookie in cookies]
            loader = multiprocessing.Process(
                target=watch,
                args=(port, sockets, ready, done, stop, queue, str(stall_logs["load process"]), opts.load_gc),
            )
            loader.start()
            connecting = time.perf_counter()
            if not ready.wait(600):
                sys.exit("the watchers did not connect")
            print(f"{len(sockets)} watchers connected in {time.perf_counter() - connecting:.1f} s")
            published = start_spy(run_ids)
            live_from = dt.datetime.now(dt.UTC)
            started = time.perf_counter()
            for round_ in range(opts.rounds):
                urls = [f"{base}/api/approvals/{r.pk}/decision/" for r in pending]
                statuses = asyncio.run(post_all(urls, approver_token, {"decision": "approve"}))
                if set(statuses) != {200}:
                    sys.exit(f"decisions of round {round_ + 1} answered {sorted(set(statuses))}")
                if round_ + 1 < opts.rounds:
                    pending = wait_parked(opts.runs)
            deadline = time.monotonic() + 120
            while Run.objects.filter(pk__in=run_ids, status="completed").count() < opts.runs:
                if time.monotonic() > deadline:
                    sys.exit("the runs did not finish")
                time.sleep(0.05)
            done.wait(60)  # every watcher saw its run end; past that, what is missing is lost
            finished = time.perf_counter()
            stop.set()
            results = queue.get(timeout=120)
            loader.join(30)
        finally:
            if loader is not None and loader.is_alive():
                loader.terminate()
            for process in (*servers, *workers):
                process.terminate()
            for process in (*servers, *workers):
                process.wait(30)
            listener.close()
            api_listener.close()

        stored: dict[int, dict[int, str]] = {run_id: {} for run_id in run_ids}
        rows = RunEvent.objects.filter(run_id__in=run_ids).values_list("run_id", "seq", "type")
        for run_id, seq, type_ in rows:
            stored[run_id][seq] = type_
        missing: dict[str, int] = {}
        lost = doubled = out_of_order = 0
        delays: list[float] = []
        fanout: list[float] = []
        late: list[tuple[float, float]] = []  # (stamped, received) of events over 100 ms
        live_events = 0
        for run_id, received in results:
            seqs = [seq for seq, _, _ in received]
            for seq in set(stored[run_id]) - set(seqs):
                lost += 1
                missing[stored[run_id][seq]] = missing.get(stored[run_id][seq], 0) + 1
            doubled += len(seqs) - len(set(seqs))
            out_of_order += sum(1 for a, b in itertools.pairwise(seqs) if b <= a)
            for seq, created_at, received_at in received:
                created = dt.datetime.fromisoformat(created_at)
                if created >= live_from:
                    live_events += 1
                    delays.append((received_at - created.timestamp()) * 1000)
                    if delays[-1] > 100:
                        late.append((created.timestamp(), received_at))
                    if (run_id, seq) in published:
                        fanout.append((received_at - published[(run_id, seq)]) * 1000)
        elapsed = finished - started
        total_stored = sum(len(s) for s in stored.values())
        print(
            f"{opts.runs} runs x {opts.watchers} watchers = {len(results)} WebSocket clients, "
            f"{opts.rounds} approvals per run, one Daphne, Redis pub/sub channel layer, runs executed "
            + (f"by {opts.workers} Celery workers" if opts.executor == "celery" else "inside Daphne")
            + (", started and decided through a second Daphne" if opts.api == "separate" else "")
        )
        print(
            f"stored events: {total_stored} ({total_stored // opts.runs} per run); "
            f"delivered live: {live_events} in {elapsed:.2f} s = {live_events / elapsed:,.0f} events/s"
        )
        print(
            f"event stamped (just before its commit) -> receipt: p50 {percentile(delays, 50):.1f} ms, "
            f"p99 {percentile(delays, 99):.1f} ms, max {max(delays):.1f} ms"
        )
        print(
            f"published -> receipt (the fan-out alone): p50 {percentile(fanout, 50):.1f} ms, "
            f"p99 {percentile(fanout, 99):.1f} ms over {len(fanout)} deliveries"
        )
        print(f"lost: {lost} {missing or ''}, doubled: {doubled}, out of order: {out_of_order}")
        # Which process stood still while the late events were on their way (stalls >= 20 ms,
        # from the moment every watcher was connected).
        live_start = live_from.timestamp()
        for name, path in stall_logs.items():
            stalls = [s for s in _stalls.read(path) if s["at"] + s["ms"] / 1000 >= live_start]
            overlapping = sum(
                1
                for stamped, received in late
                if any(s["at"] < received and s["at"] + s["ms"] / 1000 > stamped for s in stalls)
            )
            if name == "workers":
                parents = {w.pid for w in workers}
                in_parents = sum(1 for s in stalls if s["pid"] in parents)
                name = f"workers ({in_parents} in the pools' parent processes)"
            print(
                f"stalls of the {name} (load GC {opts.load_gc}): {_stalls.summary(stalls)}"
                if name == "load process"
                else f"stalls of the {name}: {_stalls.summary(stalls)}",
                f"-- during {overlapping} of the {len(late)} events over 100 ms" if late else "",
            )
        shutil.rmtree(stall_dir, ignore_errors=True)
        ok = percentile(delays, 99) <= 100 and lost == doubled == out_of_order == 0
        print("target p99 <= 100 ms, nothing lost or doubled:", "MET" if ok else "MISSED")
        sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
