"""Servers and workers tune the garbage collector once loaded (fimone/gc_tuning.py): start-up's
objects are frozen out of every collection and the young generation collects rarely, so full
collections, which stop the process, are rare and short."""

from __future__ import annotations

import pytest

from tests.fimone.test_settings import start_django

pytestmark = pytest.mark.once  # subprocesses and pure code: one stack is enough (pyproject.toml)

PROBE = "import gc, {module}; {load}print(gc.get_threshold()[0], gc.get_freeze_count())"


def collector_after_loading(module: str, load: str = "", **env: str) -> tuple[int, int]:
    """The young-generation threshold and the frozen object count of a fresh process that loaded
    ``module`` (and ran ``load``)."""
    proc = start_django(PROBE.format(module=module, load=load), **env)
    assert proc.returncode == 0, proc.stderr
    threshold, frozen = proc.stdout.split()
    return int(threshold), int(frozen)


def test_a_server_freezes_what_start_up_built_and_collects_the_young_generation_rarely() -> None:
    threshold, frozen = collector_after_loading("fimone.asgi")

    assert threshold == 50_000
    assert frozen > 10_000, "Django's models, URLs and modules are frozen"


def test_the_threshold_comes_from_the_environment() -> None:
    assert collector_after_loading("fimone.asgi", GC_THRESHOLD="20000")[0] == 20_000


def test_zero_leaves_the_collector_as_python_sets_it() -> None:
    assert collector_after_loading("fimone.asgi", GC_THRESHOLD="0") == (700, 0)


@pytest.mark.parametrize(
    "signal",
    [
        "worker_process_init",  # each pool process, once loaded
        # The main process, before it starts its pool: it hands every task to the pool, and a full
        # collection there holds up a run's resume.
        "worker_init",
    ],
)
def test_a_celery_worker_tunes_each_of_its_processes(signal: str) -> None:
    load = f"import django; django.setup(); from celery.signals import {signal}; {signal}.send(sender=None); "
    threshold, frozen = collector_after_loading("fimone.celery", load, GC_THRESHOLD="30000")

    assert threshold == 30_000 and frozen > 10_000
