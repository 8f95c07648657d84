"""The load balancer's probes: /healthz (the process answers) and /readyz (it can do its work)."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from fimone import health


@pytest.fixture(autouse=True)
def _probe_afresh(monkeypatch):
    # Each test sees the migration state anew (a process caches "all applied" once seen).
    monkeypatch.setattr(health, "_migrations_seen_applied", False)


def _answer(client) -> tuple[int, dict, str]:
    response = client.get("/readyz")
    return response.status_code, json.loads(response.content), response.content.decode()


@pytest.mark.django_db
def test_healthz_answers_while_the_process_is_up_without_touching_services(client, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.get("/healthz")
    assert response.status_code == 200
    assert json.loads(response.content) == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_answers_ok_when_the_database_and_migrations_are_ready(client):
    status, body, _ = _answer(client)
    assert status == 200, body
    assert body["status"] == "ok"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["migrations"] == "ok"


@pytest.mark.django_db
@pytest.mark.redis
def test_readyz_checks_redis_when_it_is_configured(client):
    status, body, _ = _answer(client)
    assert status == 200, body
    assert body["checks"]["redis"] == "ok"


@pytest.mark.django_db
def test_readyz_answers_503_naming_the_database_when_it_is_down_and_echoes_no_secret(client, monkeypatch):
    from django.db import OperationalError

    def refuse(*args, **kwargs):
        raise OperationalError('connection to "db.internal" failed: password=hunter2 rejected')

    monkeypatch.setattr(connection, "cursor", refuse)
    status, body, raw = _answer(client)
    assert status == 503
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == "failed"
    assert body["checks"]["migrations"] == "not checked"
    assert "hunter2" not in raw and "db.internal" not in raw


@pytest.mark.django_db
def test_readyz_answers_503_when_a_migration_is_not_applied(client):
    # As if the approvals app had a migration this database has not run (rolled back with the
    # test's transaction).
    MigrationRecorder(connection).migration_qs.filter(app="approvals").delete()

    status, body, _ = _answer(client)
    assert status == 503
    assert body["checks"]["migrations"] == "unapplied"
    assert body["checks"]["database"] == "ok"


@pytest.mark.django_db
def test_readyz_answers_503_naming_redis_when_it_is_unreachable_and_hides_its_address(client, settings):
    settings.REDIS_URL = "redis://:s3cret@127.0.0.1:1/0"  # nothing listens on port 1
    status, body, raw = _answer(client)
    assert status == 503
    assert body["checks"]["redis"] == "failed"
    assert body["checks"]["database"] == "ok"
    assert "s3cret" not in raw and "127.0.0.1" not in raw
