"""Feishu click callbacks against a running Daphne on PostgreSQL + Redis, from a separate process.

2,000 callbacks: 1,000 valid decisions on 1,000 pending requests (approve / reject), 500 replays
of them (same event_id) and 500 forgeries (bad signature). Prints callbacks/s and p50 / p99
latency. Targets: >= 300 verified callbacks/s, p99 <= 100 ms, zero 5xx, zero double decisions.

    DATABASE_URL=postgres://… REDIS_URL=redis://… python bench/callback_throughput.py [--concurrency 16]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import socket
import subprocess
import sys
import time

from _django import ROOT, bench_database, parked_runs, percentile, test_database_url

OPEN_ID = "ou_bench_approver"


def _drop_queue(name: str) -> None:
    """Delete the Celery queue the servers sent to (kombu keeps it as Redis lists named after it)."""
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter(match=f"{name}*"):
        client.delete(key)


def load(
    urls: list[str], bodies: list[tuple[str, bytes, dict[str, str]]], concurrency: int, out: object
) -> None:
    """The load process: post every body, ``concurrency`` at a time; report (kind, status, ms).
    Each load thread keeps one connection, to the servers in turn (as a balancer would)."""
    import itertools
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    clients: dict[int, tuple[httpx.Client, str]] = {}
    next_url = itertools.cycle(urls)
    lock = threading.Lock()

    def post(item: tuple[str, bytes, dict[str, str]]) -> tuple[str, int, float]:
        if threading.get_ident() not in clients:
            with lock:
                clients[threading.get_ident()] = (httpx.Client(timeout=30), next(next_url))
        client, url = clients[threading.get_ident()]
        kind, body, headers = item
        started = time.perf_counter()
        response = client.post(url, content=body, headers={**headers, "Content-Type": "application/json"})
        return kind, response.status_code, (time.perf_counter() - started) * 1000

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(post, bodies))
    out.put((results, time.perf_counter() - started))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--servers",
        type=int,
        default=1,
        help="Daphne processes, the load spread over them as a balancer would (one process by default)",
    )
    opts = parser.parse_args()

    with bench_database(need_redis=True):
        from agents.models import Organization
        from approvals.models import ConfirmationEvent
        from channels_im.models import ChannelConfig, ImIdentity
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
        _, approver, requests = parked_runs(opts.requests, channel_config=config)
        ImIdentity.objects.create(organization=org, user=approver, provider="feishu", external_id=OPEN_ID)

        valid = []
        for index, request in enumerate(requests):
            event = click_event(
                keys,
                request_id=str(request.pk),
                decision="approve" if index % 2 else "reject",
                open_id=OPEN_ID,
            )
            body, headers = signed_body(event, encrypt_key=keys.encrypt_key)
            valid.append(("valid", body, headers))
        replays = [("replay", body, headers) for _, body, headers in random.sample(valid, len(valid) // 2)]
        forged = []
        for _, body, headers in random.sample(valid, len(valid) // 2):
            forged.append(("forged", body, {**headers, "X-Lark-Signature": "0" * 64}))
        bodies = valid + replays + forged
        random.shuffle(bodies)
        # A replay must follow its original to be a replay: move each after its first send.
        seen: set[bytes] = set()
        ordered, held = [], []
        for item in bodies:
            if item[0] == "replay" and item[1] not in seen:
                held.append(item)
                continue
            ordered.append(item)
            if item[0] == "valid":
                seen.add(item[1])
        ordered += held

        # One listening socket per server, opened here and handed over (Daphne --fd).
        listeners = []
        for _ in range(opts.servers):
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen(512)
            listener.set_inheritable(True)
            listeners.append(listener)
        env = {
            **os.environ,
            "DATABASE_URL": test_database_url(),
            "DEBUG": "false",
            "LOG_LEVEL": "WARNING",
            # Its own Celery queue: the follow-ups it sends have no worker and are dropped at the end.
            "CELERY_QUEUE": f"bench-callbacks-{os.getpid()}",
        }
        servers = [
            subprocess.Popen(
                [sys.executable, "-m", "daphne", "--fd", str(listener.fileno()), "fimone.asgi:application"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=[listener.fileno()],
            )
            for listener in listeners
        ]
        ports = [listener.getsockname()[1] for listener in listeners]
        try:
            import httpx

            deadline = time.monotonic() + 30
            for port in ports:
                while True:
                    try:
                        if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    if time.monotonic() > deadline:
                        sys.exit("Daphne did not start")
                    time.sleep(0.2)
            urls = [f"http://127.0.0.1:{port}/im/callback/{config.callback_key}/" for port in ports]
            queue: multiprocessing.Queue = multiprocessing.Queue()
            loader = multiprocessing.Process(target=load, args=(urls, ordered, opts.concurrency, queue))
            loader.start()
            results, elapsed = queue.get(timeout=600)
            loader.join()
        finally:
            for server in servers:
                server.terminate()
            for server in servers:
                server.wait(15)
            for listener in listeners:
                listener.close()
            fake.stop()
            _drop_queue(env["CELERY_QUEUE"])

        latencies = [ms for _, _, ms in results]
        by_kind: dict[str, dict[int, int]] = {}
        for kind, status, _ in results:
            by_kind.setdefault(kind, {}).setdefault(status, 0)
            by_kind[kind][status] += 1
        server_errors = sum(1 for _, status, _ in results if status >= 500)
        verified = sum(1 for kind, status, _ in results if kind != "forged" and status == 200)
        decided = ConfirmationEvent.objects.filter(kind=ConfirmationEvent.Kind.DECIDED)
        doubles = sum(1 for request in requests if decided.filter(request_id=request.pk).count() != 1)
        rate = len(results) / elapsed
        p99 = percentile(latencies, 99)
        print(
            f"{len(results)} callbacks ({len(valid)} valid, {len(replays)} replays, {len(forged)} forged), "
            f"{opts.concurrency} at a time, from a separate process, to "
            + ("one Daphne" if opts.servers == 1 else f"{opts.servers} Daphne processes")
        )
        print(f"answers by kind: {json.dumps(by_kind)}")
        print(
            f"throughput: {rate:.0f} callbacks/s, of which verified {verified / elapsed:.0f}/s "
            f"(target >= 300/s) {'OK' if verified / elapsed >= 300 else 'UNDER'}"
        )
        print(
            f"latency: p50 {percentile(latencies, 50):.1f} ms, p99 {p99:.1f} ms (target <= 100 ms) "
            f"{'OK' if p99 <= 100 else 'OVER'}"
        )
        print(f"5xx answers: {server_errors}; requests without exactly one decision: {doubles}")


if __name__ == "__main__":
    main()
