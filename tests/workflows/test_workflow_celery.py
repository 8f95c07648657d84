"""Production mode: a workflow's node runs execute on a real Celery worker, and each one's ending
moves the workflow on from that worker (a task of its own), with nothing driving it here."""

from __future__ import annotations

import time

import pytest

from agents.models import Run
from tests.personas import make_agent, scripted
from workflows.models import Workflow, WorkflowRun, WorkflowStatus
from workflows.services import workflow_run_start

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


def test_a_two_agent_workflow_runs_to_its_end_on_a_celery_worker(
    personas, celery_worker_process, settings
) -> None:
    settings.RUN_EXECUTOR = "celery"
    first = make_agent(
        personas.org, personas.operator, name="Finder", model_config_json=scripted({"content": "PO-7"})
    )
    second = make_agent(
        personas.org,
        personas.operator,
        name="Calculator",
        builtin_tools=["calculator"],
        model_config_json=scripted(
            {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]},
            {"content": "Total {last}"},
        ),
    )
    graph = {
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "find", "type": "agent", "agent": first.pk},
            {"id": "sum", "type": "agent", "agent": second.pk, "input": "Add up {{ nodes.find.output }}"},
            {"id": "end", "type": "end"},
        ],
        "edges": [
            {"from": "start", "to": "find"},
            {"from": "find", "to": "sum"},
            {"from": "sum", "to": "end"},
        ],
    }
    workflow = Workflow.objects.create(organization=personas.org, name="Two agents", graph=graph)

    workflow_run = workflow_run_start(workflow=workflow, user=personas.member, input="Lumen")

    deadline = time.monotonic() + 60
    while WorkflowRun.objects.get(pk=workflow_run.pk).status == WorkflowStatus.RUNNING:
        assert time.monotonic() < deadline, "the workflow did not finish on the worker"
        time.sleep(0.2)
    workflow_run.refresh_from_db()
    assert workflow_run.status == WorkflowStatus.COMPLETED, workflow_run.error
    assert workflow_run.output == 'Total {"expression": "6 * 7", "value": 42}'
    runs = Run.objects.filter(workflow_node__workflow_run=workflow_run).order_by("pk")
    assert [r.input for r in runs] == ["Lumen", "Add up PO-7"]
    assert all(r.lease_owner.split(":")[1] == str(celery_worker_process.pid) for r in runs)
