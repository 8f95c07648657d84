"""Run services: who may cancel, and what is recorded."""

from __future__ import annotations

import pytest

from agents.models import RunStatus
from agents.services import run_cancel, run_start
from fimone.errors import ServiceError
from tests.personas import make_agent


@pytest.fixture
def queued_run(personas, monkeypatch):
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    return run_start(agent=make_agent(personas.org, personas.operator), user=personas.member, input="hi")


def test_an_operator_of_the_organisation_cancels_a_members_run_and_is_named(personas, queued_run) -> None:
    run = run_cancel(run=queued_run, user=personas.operator)
    assert run.status == RunStatus.CANCELLED
    assert run.error == "cancelled by oscar"
    assert run.events.get(type="run.failed").payload == {"error": "cancelled by oscar", "stage": "cancelled"}


@pytest.mark.parametrize("who", ["approver", "auditor", "stranger"])
def test_people_who_neither_own_nor_operate_the_run_cannot_cancel_it(personas, queued_run, who) -> None:
    with pytest.raises(ServiceError) as refused:
        run_cancel(run=queued_run, user=getattr(personas, who))
    assert refused.value.code == "not_found"
    queued_run.refresh_from_db()
    assert queued_run.status == RunStatus.QUEUED


def test_starting_a_run_refuses_someone_outside_the_organisation(personas) -> None:
    with pytest.raises(ServiceError):
        run_start(agent=make_agent(personas.org, personas.operator), user=personas.stranger, input="hi")
