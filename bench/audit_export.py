"""CSV export of the approval history: 100,000 requests, time and peak memory.

An auditor downloads the whole history through the real view (``/approvals/history/export.csv``,
a streamed response); the benchmark reads every line. Targets: under 10 s and under 100 MB.
Time is measured on a plain pass; memory on a second pass under ``tracemalloc`` (Python
allocations, the export's own peak), with the process's resident set before and after.

    DATABASE_URL=postgres://… python bench/audit_export.py [--requests 100000]
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

from _django import bench_database, parked_runs

TIME_TARGET_S = 10.0
MEMORY_TARGET_MB = 100.0


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    opts = parser.parse_args()

    with bench_database(need_postgres=False):
        from django.contrib.auth import get_user_model
        from django.test import Client

        from tenancy.models import Membership, Role

        started = time.perf_counter()
        org, _approver, _requests = parked_runs(opts.requests)
        del _requests
        print(f"{opts.requests} requests created in {time.perf_counter() - started:.1f} s")
        auditor = get_user_model().objects.create_user("auditor")
        Membership.objects.create(organization=org, user=auditor, role=Role.AUDITOR)
        client = Client()
        client.force_login(auditor)
        gc.collect()

        def export() -> tuple[int, int]:
            response = client.get("/approvals/history/export.csv")
            assert response.status_code == 200 and response.streaming, response.status_code
            lines = size = 0
            for chunk in response.streaming_content:
                lines += chunk.count(b"\n")
                size += len(chunk)
            return lines, size

        rss_before = rss_mib()
        started = time.perf_counter()
        lines, size = export()
        elapsed = time.perf_counter() - started
        assert lines == opts.requests + 1, f"{lines} lines for {opts.requests} requests"

        gc.collect()
        tracemalloc.start()
        export()
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        peak_mb = peak / 1024 / 1024
        rss_after = rss_mib()

        print(f"exported {lines - 1} rows ({size / 1024 / 1024:.1f} MB of CSV) in {elapsed:.2f} s")
        print(f"peak Python memory during the export: {peak_mb:.1f} MB")
        print(f"resident set: {rss_before:.0f} MiB before, {rss_after:.0f} MiB after both passes")
        ok_time, ok_memory = elapsed < TIME_TARGET_S, peak_mb < MEMORY_TARGET_MB
        print(f"time   < {TIME_TARGET_S:.0f} s:  {'PASS' if ok_time else 'FAIL'}")
        print(f"memory < {MEMORY_TARGET_MB:.0f} MB: {'PASS' if ok_memory else 'FAIL'}")


if __name__ == "__main__":
    main()
