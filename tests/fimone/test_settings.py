"""Settings come from the environment and fail loudly on bad values."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fimone.env import EnvError, env_bool, env_database, env_float, env_int, env_redis_url

ROOT = Path(__file__).resolve().parents[2]


def start_django(
    code: str = "import django; django.setup(); print('started')", **env: str
) -> subprocess.CompletedProcess:
    """Run ``code`` (by default: configure Django) in a fresh process with exactly these variables
    (plus PATH)."""
    clean = {"PATH": os.environ["PATH"], "DJANGO_SETTINGS_MODULE": "fimone.settings", **env}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.once
@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"DATABASE_URL": "mysql://x/y"}, "DATABASE_URL"),
        ({"DATABASE_URL": "postgres://localhost:5432/"}, "DATABASE_URL"),
        ({"REDIS_URL": "http://localhost"}, "REDIS_URL"),
        ({"RUN_LEASE_SECONDS": "a minute"}, "RUN_LEASE_SECONDS"),
        ({"DEBUG": "maybe"}, "DEBUG"),
        ({"FIMONE_ENV": "production"}, "SECRET_KEY"),
        ({"FIMONE_ENV": "production", "SECRET_KEY": "x" * 50, "ALLOWED_HOSTS": "a.example"}, "SITE_URL"),
        ({"SITE_URL": "127.0.0.1:8000"}, "SITE_URL"),
        ({"FIMONE_ENV": "staging"}, "FIMONE_ENV"),
        ({"SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto"}, "SECURE_PROXY_SSL_HEADER"),
        ({"SECURE_PROXY_SSL_HEADER": "X Forwarded Proto: https"}, "SECURE_PROXY_SSL_HEADER"),
        ({"SECURE_HSTS_SECONDS": "-1"}, "SECURE_HSTS_SECONDS"),
        ({"RUN_START_RATE": "30 per minute"}, "RUN_START_RATE"),
        ({"DECISION_RATE": "0/min"}, "DECISION_RATE"),
        ({"LOGIN_FAILURE_LIMIT": "0"}, "LOGIN_FAILURE_LIMIT"),
        ({"CLIENT_IP_HEADER": "X Forwarded For"}, "CLIENT_IP_HEADER"),
        ({"GC_THRESHOLD": "-1"}, "GC_THRESHOLD"),
    ],
)
def test_the_process_refuses_to_start_with_one_line_naming_the_variable(env: dict, variable: str) -> None:
    proc = start_django(**env)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert variable in lines[0] and "Traceback" not in proc.stderr


@pytest.mark.once
def test_production_starts_with_its_required_variables() -> None:
    proc = start_django(
        FIMONE_ENV="production",
        SECRET_KEY="x" * 50,
        ALLOWED_HOSTS="fimone.example.com",
        SITE_URL="https://fimone.example.com",
        FIELD_ENCRYPTION_KEY="k" * 44,
        AUDIT_CHAIN_KEY="a" * 32,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "started"


@pytest.mark.once
def test_the_embedded_default_needs_no_variable_at_all() -> None:
    proc = start_django()
    assert proc.returncode == 0, proc.stderr


def test_helpers_parse_good_values() -> None:
    env = {"N": " 42 ", "B": "yes", "F": "0.5", "R": "redis://127.0.0.1:6379/3"}
    assert env_int("N", 1, environ=env) == 42
    assert env_int("MISSING", 7, environ=env) == 7
    assert env_bool("B", False, environ=env) is True
    assert env_float("F", 1.0, environ=env) == 0.5
    assert env_redis_url("R", environ=env) == "redis://127.0.0.1:6379/3"
    db = env_database("D", "postgres://postgres@127.0.0.1:5432/fimone", environ={})
    assert db["ENGINE"] == "django.db.backends.postgresql" and db["NAME"] == "fimone"
    assert env_database("D", "sqlite:///tmp/x.sqlite3", environ={})["ENGINE"].endswith("sqlite3")


def test_helpers_name_the_variable_and_the_bad_value() -> None:
    with pytest.raises(EnvError) as caught:
        env_int("HOOK_TIMEOUT", 5, minimum=1, environ={"HOOK_TIMEOUT": "0"})
    assert str(caught.value) == "fimone: configuration error: HOOK_TIMEOUT must be at least 1 (got 0)"
    with pytest.raises(EnvError, match="REDIS_URL has a port"):
        env_redis_url("REDIS_URL", environ={"REDIS_URL": "redis://localhost:port/0"})
    with pytest.raises(EnvError, match="must be a number"):
        env_float("X", 1.0, environ={"X": "nan"})


def test_the_embedded_mode_uses_in_process_services(settings) -> None:
    if settings.REDIS_URL:
        assert (
            settings.CHANNEL_LAYERS["default"]["BACKEND"] == "channels_redis.pubsub.RedisPubSubChannelLayer"
        )
        assert settings.CELERY_TASK_ALWAYS_EAGER is False
    else:
        assert settings.CHANNEL_LAYERS["default"]["BACKEND"] == "channels.layers.InMemoryChannelLayer"
        assert settings.CELERY_TASK_ALWAYS_EAGER is True
