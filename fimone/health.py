"""Probes for load balancers and process supervisors.

``/healthz`` answers 200 while the process serves requests (liveness: restart it if not).
``/readyz`` answers 200 only when this process can do its work: the database answers, Redis answers
(when configured) and every migration is applied; otherwise 503 naming the check that failed
(readiness: send it no traffic). Bodies name checks, never hosts, errors or credentials.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse

logger = logging.getLogger(__name__)

OK = "ok"
FAILED = "failed"

# Once this process has seen every migration applied it stays so (migrations are not unapplied under
# a running server), so later probes skip the migration graph and only ping the services.
_migrations_seen_applied = False


async def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process is up and answering (touches no service)."""
    return JsonResponse({"status": "ok"})


def check_database() -> str:
    try:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:
        logger.warning("readiness: the database did not answer", exc_info=True)
        return FAILED
    return OK


def check_redis() -> str | None:
    """``None`` when Redis is not configured (the embedded mode has none to reach)."""
    if settings.REDIS_URL is None:
        return None
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except Exception:
        logger.warning("readiness: Redis did not answer", exc_info=True)
        return FAILED
    finally:
        client.close()
    return OK


def check_migrations() -> str:
    """``ok`` when no migration is left to apply; ``unapplied`` otherwise (``failed`` if the
    migration table could not be read)."""
    global _migrations_seen_applied
    if _migrations_seen_applied:
        return OK
    try:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception:
        logger.warning("readiness: the migration state could not be read", exc_info=True)
        return FAILED
    if plan:
        return "unapplied"
    _migrations_seen_applied = True
    return OK


def readiness() -> dict[str, str]:
    """The checks by name, each ``ok`` or why not. The migration check needs the database."""
    checks = {"database": check_database()}
    redis_state = check_redis()
    if redis_state is not None:
        checks["redis"] = redis_state
    checks["migrations"] = check_migrations() if checks["database"] == OK else "not checked"
    return checks


def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: 200 when every check is ``ok``, else 503 with the checks (sync: it blocks on I/O,
    so Django runs it in a worker thread under ASGI)."""
    checks = readiness()
    ready = all(state == OK for state in checks.values())
    return JsonResponse(
        {"status": "ok" if ready else "unavailable", "checks": checks},
        status=200 if ready else 503,
        headers={"Cache-Control": "no-store"},
    )
