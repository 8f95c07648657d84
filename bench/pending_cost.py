"""What 5,000 pending approvals cost while nothing happens.

5,000 runs are parked on pending confirmation requests; the process then idles with the periodic
sweep running (the embedded stand-in for Celery beat, same function) and we measure the database
transactions per second it causes, the coroutines and threads alive, and the memory held.
Targets: no per-request polling (<= 1 query/s in total for sweeps), no process or coroutine per
pending request.

    DATABASE_URL=postgres://… python bench/pending_cost.py [--pending 5000] [--seconds 45]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import threading
import time

from _django import bench_database, parked_runs


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=45.0)
    opts = parser.parse_args()

    with bench_database():
        from django.conf import settings
        from django.db import connection

        from agents.executors import embedded
        from agents.models import Run, RunStatus
        from approvals.models import ConfirmationRequest
        from approvals.sweeper import sweep_forever

        parked_runs(opts.pending)
        gc.collect()
        print(
            f"{opts.pending} runs parked on pending requests; "
            f"sweeping every {settings.APPROVAL_SWEEP_SECONDS} s"
        )

        def transactions() -> int:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_stat_clear_snapshot()")
                cursor.execute(
                    "SELECT xact_commit + xact_rollback FROM pg_stat_database "
                    "WHERE datname = current_database()"
                )
                return int(cursor.fetchone()[0])

        threads_before = threading.active_count()
        rss_before = rss_mib()
        future = embedded.submit(lambda: sweep_forever(settings.APPROVAL_SWEEP_SECONDS))
        time.sleep(1.0)  # the first sweep has run
        loop = embedded._target_loop()
        start_tx, started = transactions(), time.monotonic()
        time.sleep(opts.seconds)
        elapsed = time.monotonic() - started
        # Our own two statistics reads are transactions too: leave them out.
        spent = transactions() - start_tx - 2
        tasks = asyncio.run_coroutine_threadsafe(_count_tasks(), loop).result()
        future.cancel()
        loop.call_soon_threadsafe(lambda: [t.cancel() for t in asyncio.all_tasks(loop)])
        gc.collect()
        in_memory = sum(1 for o in gc.get_objects() if isinstance(o, ConfirmationRequest))
        rate = spent / elapsed
        print(
            f"idle for {elapsed:.0f} s: {spent} database transactions = {rate:.2f} per second "
            f"(target <= 1/s) {'OK' if rate <= 1 else 'OVER'}"
        )
        print(f"coroutines alive on the run loop: {tasks} (the sweeper) for {opts.pending} pending requests")
        print(
            f"threads: {threading.active_count()} (before the sweeper: {threads_before}); "
            f"ConfirmationRequest objects in memory: {in_memory}"
        )
        print(f"resident memory: {rss_mib():.1f} MiB (before the sweeper: {rss_before:.1f} MiB)")
        assert Run.objects.filter(status=RunStatus.AWAITING_APPROVAL).count() == opts.pending


async def _count_tasks() -> int:
    return len([t for t in asyncio.all_tasks() if t is not asyncio.current_task()])


if __name__ == "__main__":
    main()
