"""The production topology as real processes, for system tests: ``make prod`` on this test's
PostgreSQL database and Redis, stopped (its whole process group) at the end."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def test_database_url() -> str:
    from django.db import connection

    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def free_port_run(count: int) -> int:
    """A base port with ``count`` consecutive free ports after it (honcho numbers servers so)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        if base + count >= 65000:
            continue
        taken = False
        for port in range(base, base + count):
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    taken = True
                    break
        if not taken:
            return base
    raise RuntimeError("no run of free ports")


@dataclass
class Topology:
    process: subprocess.Popen
    web_ports: list[int]
    log_path: Path
    queue: str

    def url(self, index: int, path: str) -> str:
        return f"http://127.0.0.1:{self.web_ports[index]}{path}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]


@contextmanager
def make_prod(*, web: int = 2, workers: int = 1, timeout: float = 60) -> Iterator[Topology]:
    """Start ``make prod`` (web Daphne servers, workers, one beat) and wait until every server's
    /readyz answers 200 and every worker answers Celery's ping."""
    from django.conf import settings

    from fimone.celery import app

    base = free_port_run(web)
    queue = f"system-{os.getpid()}"
    log = Path(tempfile.mkstemp(prefix="fimone-prod-", suffix=".log")[1])
    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_QUEUE": queue,
        "CELERY_CONCURRENCY": "1",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("PORT", None)  # honcho would take it as the base port
    command = [
        "make", "--no-print-directory", "prod", "SKIP_INSTALL=1", f"VENV={sys.prefix}",
        f"WEB={web}", f"WORKERS={workers}", f"PROD_PORT={base}",
    ]  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    topology = Topology(process, [base + i for i in range(web)], log, queue)
    previous_queue = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    try:
        deadline = time.monotonic() + timeout
        for port in topology.web_ports:
            while True:
                if process.poll() is not None:
                    pytest.fail(f"make prod exited ({process.returncode}):\n{topology.log()}")
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"server on port {port} was not ready in {timeout:.0f} s:\n{topology.log()}")
                time.sleep(0.3)
        while len(app.control.ping(timeout=1.0)) < workers:
            if time.monotonic() > deadline:
                pytest.fail(f"the workers did not answer Celery's ping:\n{topology.log()}")
        yield topology
    finally:
        app.conf.task_default_queue = previous_queue
        _stop(process)
        log.unlink(missing_ok=True)


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM the whole group (make, honcho and every process it started), then SIGKILL."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with suppress(subprocess.TimeoutExpired):
        process.wait(20)
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(10)
