"""The periodic sweep: expiry, lost wake-ups, orphaned runs — and its cost when nothing is due."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.models import Run, RunStatus
from approvals.models import ConfirmationRequest, ConfirmationStatus
from approvals.sweeper import sweep_once
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool, set_policy, suspended_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_one_sweep_expires_due_requests_and_resumes_their_runs(personas, resumes) -> None:
    set_policy(personas)
    run, request = suspended_run(personas, Harness(pay_tool()))
    ConfirmationRequest.objects.filter(pk=request.pk).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)
    )

    assert sweep_once() == {"expired": 1, "escalated": 0, "resumed": 0, "reclaimed": 0}

    request.refresh_from_db()
    assert request.status == ConfirmationStatus.EXPIRED and resumes.run_ids == [run.pk]
    assert sweep_once()["expired"] == 0, "an expired request is expired once"


def test_a_parked_run_whose_wake_up_was_lost_is_resumed(personas, resumes) -> None:
    set_policy(personas)
    run, request = suspended_run(personas, Harness(pay_tool()))
    # The verdict is written, but its resume never happened (a worker died before enqueueing).
    ConfirmationRequest.objects.filter(pk=request.pk).update(status=ConfirmationStatus.APPROVED)

    assert sweep_once()["resumed"] == 1
    assert resumes.run_ids == [run.pk]


def test_a_run_whose_worker_stopped_heart_beating_is_handed_to_another(personas, resumes) -> None:
    set_policy(personas)
    run, _ = suspended_run(personas, Harness(pay_tool()))
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING,
        lease_owner="dead-worker",
        lease_expires_at=timezone.now() - dt.timedelta(seconds=5),
    )

    assert sweep_once()["reclaimed"] == 1
    assert resumes.run_ids == [run.pk]


def test_a_sweep_with_nothing_due_costs_a_few_queries_whatever_is_pending(personas, resumes) -> None:
    set_policy(personas)
    harness = Harness(pay_tool())
    for _ in range(5):
        suspended_run(personas, harness)

    with CaptureQueriesContext(connection) as queries:
        assert sweep_once() == {"expired": 0, "escalated": 0, "resumed": 0, "reclaimed": 0}
    assert len(queries) == 4, [q["sql"] for q in queries]
