"""The production topology as real processes, for system tests: ``make prod`` on this test's
PostgreSQL database and Redis, stopped (its whole process group) at the end."""

from __future__ import annotations

import os
import shutil
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
    static = Path(tempfile.mkdtemp(prefix="fimone-static-"))  # collectstatic's, removed at the end
    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_QUEUE": queue,
        "CELERY_CONCURRENCY": "1",
        "PYTHONUNBUFFERED": "1",
        "STATIC_ROOT": str(static),
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
        shutil.rmtree(static, ignore_errors=True)


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM the whole group (make, honcho and every process it started), then SIGKILL — and
    SIGKILL every descendant too: honcho may start its processes in sessions of their own, which
    the group's signal does not reach once honcho is gone (they outlived the test, orphaned)."""
    family = _descendants(process.pid)
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with suppress(subprocess.TimeoutExpired):
        process.wait(20)
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(10)
    for pid in family | _descendants_of(family):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _parents() -> dict[int, int]:
    """Every live process's parent, from /proc."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    return parents


def _descendants_of(pids: set[int]) -> set[int]:
    parents = _parents()
    found: set[int] = set()
    frontier = set(pids)
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _descendants(pid: int) -> set[int]:
    """The processes ``pid`` started, and theirs, down the tree."""
    return _descendants_of({pid})


# --- the same processes one by one, to hurt them one at a time -----------------------------------


def procfile_commands() -> dict[str, str]:
    """The Procfile's process types and their commands."""
    commands = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            kind, command = line.split(":", 1)
            commands[kind.strip()] = command.strip()
    return commands


@dataclass
class Process:
    """One process of the topology, started from its Procfile line in a session of its own, so a
    signal reaches it and every child it forked (a worker's pool), as a crashed machine or a
    container runtime would."""

    name: str  # "web.1", "worker.2", "beat.1"
    command: str
    port: int
    env: dict[str, str]
    log_path: Path
    popen: subprocess.Popen | None = None
    starts: int = 0

    def start(self) -> None:
        assert not self.alive, f"{self.name} is already running"
        with self.log_path.open("ab") as sink:
            sink.write(f"\n==== {self.name} start #{self.starts + 1} ====\n".encode())
            sink.flush()
            self.popen = subprocess.Popen(
                ["/bin/sh", "-c", self.command],
                cwd=ROOT,
                env={**self.env, "PORT": str(self.port)},
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal(self, sig: int) -> None:
        assert self.popen is not None
        with suppress(ProcessLookupError):
            os.killpg(self.popen.pid, sig)

    def kill(self) -> None:
        """``kill -9`` the process and its children, and reap it."""
        if self.popen is None:
            return
        self.signal(signal.SIGKILL)
        self.popen.wait(10)
        deadline = time.monotonic() + 10
        while self.pids() and time.monotonic() < deadline:  # pool children die with the group
            time.sleep(0.05)

    def pids(self) -> set[int]:
        """The live processes of this process's group (itself and its children)."""
        if self.popen is None:
            return set()
        found = set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                fields = stat[stat.rindex(")") + 2 :].split()
                if int(fields[2]) == self.popen.pid and fields[0] != "Z":  # pgrp, not a zombie
                    found.add(int(entry.name))
        return found

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


@dataclass
class Fleet:
    """The production topology as separate processes: ``web`` Daphne servers, ``worker`` Celery
    workers, one beat, one outbox relay. Any of them can be killed, paused or restarted alone, or
    all at once."""

    processes: dict[str, Process]
    queue: str

    @property
    def webs(self) -> list[Process]:
        return [p for p in self.processes.values() if p.name.startswith("web.")]

    @property
    def relay(self) -> Process:
        return self.processes["relay.1"]

    @property
    def workers(self) -> list[Process]:
        return [p for p in self.processes.values() if p.name.startswith("worker.")]

    def url(self, index: int, path: str) -> str:
        return f"http://127.0.0.1:{self.webs[index].port}{path}"

    def holding(self, pid: int) -> Process | None:
        """The process (a worker and its pool) that ``pid`` belongs to."""
        for process in self.processes.values():
            if pid in process.pids():
                return process
        return None

    def kill_all(self) -> None:
        """``kill -9`` every process at once (as a power cut would), then reap them."""
        for process in self.processes.values():
            if process.alive:
                process.signal(signal.SIGKILL)
        for process in self.processes.values():
            process.kill()

    def start_all(self, timeout: float = 60) -> None:
        for process in self.processes.values():
            if not process.alive:
                process.start()
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 60) -> None:
        """Until every server's /readyz answers 200 and every worker answers Celery's ping."""
        from fimone.celery import app

        deadline = time.monotonic() + timeout
        for web in self.webs:
            while True:
                self._check_running(web)
                with suppress(httpx.HTTPError):
                    if httpx.get(f"http://127.0.0.1:{web.port}/readyz", timeout=2).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    pytest.fail(f"{web.name} was not ready in {timeout:.0f} s:\n{web.log()}")
                time.sleep(0.2)
        names = {f"worker-{w.port}@{socket.gethostname()}" for w in self.workers}
        while True:
            for worker in self.workers:
                self._check_running(worker)
            answered = {name for reply in app.control.ping(timeout=1.0) for name in reply}
            if names <= answered:
                return
            if time.monotonic() > deadline:
                pytest.fail(f"workers {sorted(names - answered)} did not answer Celery's ping")

    def _check_running(self, process: Process) -> None:
        if not process.alive:
            pytest.fail(f"{process.name} exited ({process.popen.returncode}):\n{process.log()}")

    def log(self) -> str:
        return "\n".join(f"---- {p.name} ----\n{p.log()[-1500:]}" for p in self.processes.values())


@contextmanager
def fleet(
    *, web: int = 2, workers: int = 2, ports: list[int] | None = None, env: dict[str, str] | None = None
) -> Iterator[Fleet]:
    """Start the Procfile's processes one by one on this test's PostgreSQL database and Redis
    (already migrated by the test run); ``ports`` are the servers' (chosen by the caller when
    its data must name them). Everything is killed at the end."""
    from django.conf import settings

    from fimone.celery import app

    commands = procfile_commands()
    ports = ports or [free_port_run(web) + i for i in range(web)]
    queue = f"system-{os.getpid()}-{time.monotonic_ns()}"
    base_env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_QUEUE": queue,
        "PYTHONUNBUFFERED": "1",
        "PATH": f"{Path(sys.prefix) / 'bin'}:{os.environ.get('PATH', '')}",
        **(env or {}),
    }
    log_dir = Path(tempfile.mkdtemp(prefix="fimone-fleet-"))
    processes: dict[str, Process] = {}
    worker_ports = [free_port_run(1) for _ in range(workers)]  # only names the worker
    kinds = (("web", web, ports), ("worker", workers, worker_ports), ("beat", 1, [0]), ("relay", 1, [0]))
    for kind, count, kind_ports in kinds:
        for index in range(count):
            name = f"{kind}.{index + 1}"
            processes[name] = Process(
                name, commands[kind], kind_ports[index], base_env, log_dir / f"{name}.log"
            )
    topology = Fleet(processes, queue)
    previous_queue = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    try:
        topology.start_all()
        yield topology
    finally:
        app.conf.task_default_queue = previous_queue
        for process in processes.values():
            if process.alive:
                process.signal(signal.SIGCONT)  # a paused process cannot die until continued
        topology.kill_all()
        for path in log_dir.iterdir():
            path.unlink()
        log_dir.rmdir()
