"""The run admin's cancel action: it cancels queued runs, reports refusals, and needs the
change_run permission."""

from __future__ import annotations

import pytest

from agents import events as ev
from agents.models import Run, RunEvent, RunStatus
from agents.services import run_start
from tests.admin_kit import logged_in, url
from tests.console.admin_forms import grant

# The services' dispatch of new runs to a worker is switched off (conftest.py).
pytestmark = pytest.mark.usefixtures("no_dispatch")


def test_the_cancel_action_cancels_queued_runs_and_reports_refusals(superuser, personas, world) -> None:
    queued = world["run"]
    done = run_start(agent=world["agent"], user=personas.approver, input="done already")
    Run.objects.filter(pk=done.pk).update(status=RunStatus.COMPLETED)

    response = logged_in(superuser).post(
        url(Run, "changelist"),
        {"action": "cancel_runs", "_selected_action": [queued.pk, done.pk]},
        follow=True,
    )

    queued.refresh_from_db()
    assert queued.status == RunStatus.CANCELLED
    assert RunEvent.objects.filter(run=queued, type=ev.RUN_FAILED, payload__stage="cancelled").exists()
    texts = [str(message) for message in response.context["messages"]]
    assert "1 run(s) cancelled (running ones stop at their next step)." in texts
    assert any(f"run {done.pk}: the run is already completed" in text for text in texts)


def test_the_cancel_action_needs_the_change_run_permission(personas, world) -> None:
    grant(personas.operator, "view_run")
    client = logged_in(personas.operator)

    client.post(url(Run, "changelist"), {"action": "cancel_runs", "_selected_action": [world["run"].pk]})

    world["run"].refresh_from_db()
    assert world["run"].status == RunStatus.QUEUED
    grant(personas.operator, "change_run")
    client.post(url(Run, "changelist"), {"action": "cancel_runs", "_selected_action": [world["run"].pk]})
    world["run"].refresh_from_db()
    assert world["run"].status == RunStatus.CANCELLED
