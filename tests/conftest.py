"""Shared test set-up: service markers, fast hashing, and the shared personas (tests/personas.py)."""

from __future__ import annotations

import os

import pytest
from django.conf import settings

pytest_plugins = [
    "tests.personas",
    "tests.world",
    "tests.telemetry_kit",
    "tests.sso.fixtures",
    "tests.fast_flush",
]

UNDER_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _service_missing(marker: str) -> str | None:
    if marker == "postgres" and settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        return "needs PostgreSQL: set DATABASE_URL=postgres://…"
    if marker == "redis" and settings.REDIS_URL is None:
        return "needs Redis: set REDIS_URL=redis://…"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in ("postgres", "redis"):
        if item.get_closest_marker(marker) is None:
            continue
        missing = _service_missing(marker)
        if missing is None:
            continue
        if UNDER_CI:
            # CI provides every service: a test that would skip here is a hole in the run.
            pytest.fail(f"CI=true but this test {missing}; deselect it with -m explicitly", pytrace=False)
        pytest.skip(missing)


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


class RateClock:
    """The clock of the rate counters kept in memory (fimone/rates.py, embedded mode), standing
    still until a test lets time pass."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def pass_(self, seconds: float) -> None:
        """Let ``seconds`` go by for the counters: the memory's clock moves; Redis's cannot be
        moved (its windows are its keys' lifetimes), so there the test waits them out."""
        import time

        if settings.REDIS_URL is None:
            self.now += seconds + 0.001  # and a hair: no real wait ends exactly on time
        else:
            time.sleep(seconds)


@pytest.fixture(autouse=True)
def rate_clock(settings, monkeypatch) -> RateClock:
    """Rate counters (fimone/rates.py: the throttles' and the ``connector_rate_limit`` hook's)
    start at zero in every test: user ids repeat across tests and across runs sharing a Redis. In
    Redis only the throttles' counters go (a flush would take the Celery broker's bindings with it;
    the hook's tests count for organisations of their own). In memory the windows are the clock's
    (minute by minute), so the counters' clock stands still in the middle of one: a test that
    crossed a minute would see its earlier requests weigh less. A test that wants time to pass
    calls ``rate_clock.pass_(seconds)``. In Redis a window starts at its first hit, so a test is
    never near an edge of one."""
    import time

    import limits.storage.memory

    from fimone import rates

    clock = RateClock(time.time() // 3600 * 3600 + 1830.5)  # mid-second, mid-minute, mid-hour
    monkeypatch.setattr(limits.storage.memory, "time", clock)
    rates.forget_counts_in_memory()
    if settings.REDIS_URL is None:
        return clock
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        keys = list(client.scan_iter(match=f"{rates.KEY_PREFIX}:{{LIMITER/throttle/*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()
    return clock


@pytest.fixture(autouse=True)
def _celery_eager(settings):
    """Tasks (card deliveries included) run in-process, at once, unless a test starts a real
    worker (``celery_worker_process``) or asks for background delivery itself."""
    from fimone.celery import app

    settings.CHANNEL_DELIVERY = "celery"
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


@pytest.fixture
def celery_worker_process(transactional_db, settings):  # transactional: the worker reads committed rows
    """A real Celery worker in a separate process, on this test's database and Redis."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    from django.db import connection

    from fimone.celery import app

    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    env = {**os.environ, "DATABASE_URL": url, "REDIS_URL": settings.REDIS_URL, "RUN_EXECUTOR": "celery"}
    root = Path(__file__).resolve().parent.parent
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "fimone", "worker", "--pool=solo", "--loglevel=WARNING",
         "--without-mingle", "--without-gossip", "--hostname", f"test-{os.getpid()}@%h"],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    app.conf.task_always_eager = False
    try:
        deadline = time.monotonic() + 30
        while not app.control.ping(timeout=0.5):
            if worker.poll() is not None or time.monotonic() > deadline:
                output = worker.stdout.read() if worker.poll() is not None else ""
                pytest.fail(f"the Celery worker did not start: {output[-2000:]}")
        yield worker
    finally:
        worker.terminate()
        try:
            worker.wait(10)
        except subprocess.TimeoutExpired:
            worker.kill()


@pytest.fixture(scope="session", autouse=True)
def _end_background_sessions(django_db_setup, django_db_blocker):
    """Engine threads (embedded executors, the ORM thread of asgiref) keep their own database
    sessions; end them before the test database is dropped."""
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture
def resumes(monkeypatch):
    """Resumes the services ask for are recorded (``resumes.run_ids``), not run; new runs are not
    dispatched either: the test drives the engine itself."""
    from tests.approvals.kit import Resumes

    recorder = Resumes()
    monkeypatch.setattr("agents.executors.dispatch_resume", recorder)
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    return recorder


@pytest.fixture
def jq() -> str:
    """The jq program the example hook scripts read their event with (Debian's ``jq``). Without
    it a test skips, except under ``CI=true``, where .ci/run installs it and a skip would hide a hole."""
    import shutil

    path = shutil.which("jq")
    if path is None:
        if UNDER_CI:
            pytest.fail("CI=true but jq is missing (apt-get install jq)", pytrace=False)
        pytest.skip("needs jq (apt-get install jq)")
    return path


@pytest.fixture
def fresh_budgets(settings):
    """Budget counters start empty: in the database they go with the test's data; in Redis they
    would outlive the test (and count for the next one's organisation of the same id)."""
    if settings.REDIS_URL:
        import redis

        client = redis.Redis.from_url(settings.REDIS_URL)
        keys = list(client.scan_iter(match="fimone:budget*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()
