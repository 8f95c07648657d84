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
    setup_test_environment(debug=False)  # measured as deployed: no query log
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


def parked_runs(count: int, *, channel_config: object | None = None) -> tuple[object, object, list[object]]:
    """``count`` runs parked on pending approval requests, created in bulk (call inside
    bench_database). Returns ``(organization, approver, requests)``; the approver may decide all."""
    import datetime as dt
    import uuid

    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from agents.models import Agent, Conversation, Run, RunStatus
    from approvals.models import ConfirmationRequest
    from tenancy.models import Membership, Organization, Role

    User = get_user_model()
    user, approver = User.objects.create_user("requester"), User.objects.create_user("approver")
    org = (
        channel_config.organization
        if channel_config is not None
        else Organization.objects.create(name="Bench")
    )
    Membership.objects.create(organization=org, user=approver, role=Role.APPROVER)
    agent = Agent.objects.create(organization=org, owner=approver, name="bench")
    conversation = Conversation.objects.create(organization=org, agent=agent, user=user)
    runs = Run.objects.bulk_create(
        Run(
            conversation=conversation, agent=agent, user=user, input="pay", status=RunStatus.AWAITING_APPROVAL
        )
        for _ in range(count)
    )
    expires = timezone.now() + dt.timedelta(hours=1)
    requests = ConfirmationRequest.objects.bulk_create(
        ConfirmationRequest(
            id=uuid.uuid4(),
            organization=org,
            agent=agent,
            requested_by=user,
            run=run,
            tool_call_id="call_1",
            tool_name="oa__purchase_pay",
            tool_args={"purchase_id": f"PO-{run.pk}", "amount": 10},
            args_sha256="0" * 64,
            channel=getattr(channel_config, "kind", "web"),
            channel_config=channel_config,
            external_message_id=f"om_{run.pk}" if channel_config is not None else "",
            expires_at=expires,
        )
        for run in runs
    )
    through = ConfirmationRequest.approvers.through
    through.objects.bulk_create(through(request_id=r.pk, user_id=approver.pk) for r in requests)
    return org, approver, requests
