"""Shared test set-up: service markers, fast hashing, and the shared personas (tests/personas.py)."""

from __future__ import annotations

import os

import pytest
from django.conf import settings

pytest_plugins = ["tests.personas"]

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


@pytest.fixture(autouse=True)
def _celery_eager():
    """Tasks run in-process unless a test starts a real worker (``celery_worker`` fixture)."""
    from fimone.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before
