"""Set-up shared by the benchmarks: Django on a throw-away test database.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/fimone REDIS_URL=redis://127.0.0.1:6379/0 \\
        python bench/<name>.py

The benchmark creates ``test_<name>`` beside the configured database and drops it afterwards.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fimone.settings")


@contextmanager
def bench_database(*, need_postgres: bool = True, need_redis: bool = False) -> Iterator[None]:
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection
    from django.test.utils import setup_test_environment, teardown_test_environment

    if need_postgres and connection.vendor != "postgresql":
        sys.exit("this benchmark runs on PostgreSQL: set DATABASE_URL=postgres://…")
    if need_redis and settings.REDIS_URL is None:
        sys.exit("this benchmark needs Redis: set REDIS_URL=redis://…")
    setup_test_environment()
    # A name of its own, so a benchmark never collides with a test run on the same server.
    connection.settings_dict.setdefault("TEST", {})["NAME"] = (
        f"bench_{os.getpid()}" if connection.vendor == "postgresql" else None
    )
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        yield
    finally:
        if connection.vendor == "postgresql":  # end sessions of the engine's own threads
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
        connection.creation.destroy_test_db(old_name, verbosity=0)
        teardown_test_environment()


def test_database_url() -> str:
    """The URL of the benchmark's test database, for the processes it starts."""
    from django.db import connection

    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[index]


@contextmanager
def celery_worker() -> Iterator[object]:
    """A Celery worker process on the benchmark's test database (call inside bench_database)."""
    import subprocess
    import time

    from django.conf import settings

    from fimone.celery import app

    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "RUN_EXECUTOR": "celery",
    }
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "fimone", "worker", "--pool=solo", "--loglevel=WARNING",
         "--without-mingle", "--without-gossip", "--hostname", f"bench-{os.getpid()}@%h"],
        cwd=ROOT, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not app.control.ping(timeout=0.5):
            if worker.poll() is not None or time.monotonic() > deadline:
                sys.exit("the Celery worker did not start")
        yield worker
    finally:
        worker.terminate()
        worker.wait(15)
