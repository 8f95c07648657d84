"""Workflows: a graph is checked before it can run, CONDITION nodes branch on an earlier node's
output, node states are visible, and the REST API keeps each organisation behind its wall."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from agents.models import Run
from fimone.errors import ServiceError
from tests.agents.engine_kit import Harness, RecordingTool
from tests.agents.test_end_to_end import service
from tests.approvals.kit import PAY_SCHEMA
from tests.personas import make_agent, scripted
from tests.workflows.kit import CONNECTOR, dispatched, drive, node, one_step_workflow, pay_action, start
from workflows.models import NodeStatus, Workflow, WorkflowRun, WorkflowStatus
from workflows.services import workflow_run_start

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["dispatched", "service"]


def client_for(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def checker_agent(personas: Any, verdict: str) -> Any:
    return make_agent(
        personas.org, personas.operator, name="Checker", model_config_json=scripted({"content": verdict})
    )


def branching_graph(checker: Any, action: Any) -> dict[str, Any]:
    """check (AGENT) → ok? (CONDITION on check's output) → pay (CONNECTOR) | end."""
    return {
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "check", "type": "agent", "agent": checker.pk, "input": "May we pay {{ input }}?"},
            {"id": "ok", "type": "condition", "source": "check", "operator": "regex", "value": "^APPROVED"},
            {
                "id": "pay",
                "type": "connector",
                "action": action.pk,
                "arguments": {"purchase_id": "{{ input }}", "amount": 10},
            },
            {"id": "end", "type": "end"},
        ],
        "edges": [
            {"from": "start", "to": "check"},
            {"from": "check", "to": "ok"},
            {"from": "ok", "to": "pay", "when": True},
            {"from": "ok", "to": "end", "when": False},
            {"from": "pay", "to": "end"},
        ],
    }


def branching_workflow(personas: Any, verdict: str) -> Workflow:
    desk = make_agent(personas.org, personas.operator, name="Desk")
    graph = branching_graph(checker_agent(personas, verdict), pay_action(personas))
    workflow = Workflow(organization=personas.org, name="Check then pay", graph=graph, connector_agent=desk)
    workflow.full_clean()
    workflow.save()
    return workflow


def paying() -> RecordingTool:
    return RecordingTool("oa__purchase_pay", result={"status": "paid"}, parameters=PAY_SCHEMA)


@pytest.mark.parametrize(
    ("verdict", "paid"), [("APPROVED: within budget", True), ("Refused: over budget", False)]
)
def test_a_condition_branches_on_an_earlier_nodes_output(personas, dispatched, verdict, paid) -> None:
    tool = paying()
    workflow_run = drive(Harness(tool), start(personas, branching_workflow(personas, verdict)))

    assert workflow_run.status == WorkflowStatus.COMPLETED
    assert node(workflow_run, "check").input == "May we pay PO-1001?"
    assert node(workflow_run, "ok").output == ("true" if paid else "false")
    assert tool.calls == ([{"purchase_id": "PO-1001", "amount": 10}] if paid else [])
    assert node(workflow_run, "pay").status == (NodeStatus.COMPLETED if paid else NodeStatus.SKIPPED)
    runs = Run.objects.filter(workflow_node__workflow_run=workflow_run)
    assert {r.execution_path for r in runs} == {"workflow"}
    assert runs.count() == (2 if paid else 1)


def test_a_node_uses_an_earlier_nodes_output_in_its_input(personas, dispatched) -> None:
    first = checker_agent(personas, "PO-7")
    second = make_agent(
        personas.org, personas.operator, name="Echo", model_config_json=scripted({"content": "ok"})
    )
    graph = {
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "a", "type": "agent", "agent": first.pk},
            {
                "id": "b",
                "type": "agent",
                "agent": second.pk,
                "input": "Look at {{ nodes.a.output }} for {{ input }}",
            },
            {"id": "end", "type": "end"},
        ],
        "edges": [{"from": "start", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "end"}],
    }
    workflow = Workflow.objects.create(organization=personas.org, name="Chain", graph=graph)
    workflow_run = drive(Harness(), start(personas, workflow, "Lumen"))
    assert node(workflow_run, "b").input == "Look at PO-7 for Lumen"
    assert workflow_run.output == "ok"


@pytest.mark.parametrize(
    ("graph", "problem"),
    [
        ({"nodes": [{"id": "start", "type": "start"}], "edges": []}, "at least one end node"),
        (
            {
                "nodes": [
                    {"id": "s", "type": "start"},
                    {"id": "x", "type": "teleport"},
                    {"id": "e", "type": "end"},
                ],
                "edges": [],
            },
            "type must be one of",
        ),
        (
            {
                "nodes": [
                    {"id": "s", "type": "start"},
                    {"id": "c", "type": "condition", "source": "s", "operator": "contains", "value": "x"},
                    {"id": "e", "type": "end"},
                ],
                "edges": [{"from": "s", "to": "c"}, {"from": "c", "to": "e", "when": True}],
            },
            "one when true, one when false",
        ),
        (
            {
                "nodes": [
                    {"id": "s", "type": "start"},
                    {"id": "c1", "type": "condition", "source": "c2", "operator": "contains", "value": "x"},
                    {"id": "c2", "type": "condition", "source": "c1", "operator": "contains", "value": "x"},
                    {"id": "e", "type": "end"},
                ],
                "edges": [
                    {"from": "s", "to": "c1"},
                    {"from": "c1", "to": "c2", "when": True},
                    {"from": "c1", "to": "e", "when": False},
                    {"from": "c2", "to": "c1", "when": True},
                    {"from": "c2", "to": "e", "when": False},
                ],
            },
            "has a cycle",
        ),
    ],
)
def test_a_graph_that_cannot_run_is_refused_naming_the_problem(personas, graph, problem) -> None:
    workflow = Workflow(organization=personas.org, name="Bad", graph=graph)
    with pytest.raises(ValidationError) as refused:
        workflow.full_clean()
    assert problem in " ".join(refused.value.message_dict["graph"])


def test_a_workflow_cannot_point_at_another_organisations_agent(personas) -> None:
    theirs = make_agent(personas.other_org, personas.stranger)
    graph = {
        "nodes": [
            {"id": "s", "type": "start"},
            {"id": "a", "type": "agent", "agent": theirs.pk},
            {"id": "e", "type": "end"},
        ],
        "edges": [{"from": "s", "to": "a"}, {"from": "a", "to": "e"}],
    }
    with pytest.raises(ValidationError) as refused:
        Workflow(organization=personas.org, name="Sneaky", graph=graph).full_clean()
    assert "no agent" in refused.value.message_dict["graph"][0]


def test_a_workflow_whose_hooks_cannot_be_built_does_not_start(personas, dispatched) -> None:
    workflow = one_step_workflow(personas, CONNECTOR)
    Workflow.objects.filter(pk=workflow.pk).update(hooks=["no_such_hook"])
    workflow.refresh_from_db()
    with pytest.raises(ServiceError) as refused:
        workflow_run_start(workflow=workflow, user=personas.member, input="PO-1001")
    assert "no_such_hook" in refused.value.message and refused.value.field == "hooks"
    assert not WorkflowRun.objects.exists() and not Run.objects.exists()


def test_editing_a_workflow_does_not_change_a_run_in_flight(personas, dispatched) -> None:
    tool = paying()
    workflow = one_step_workflow(personas, CONNECTOR)
    workflow_run = start(personas, workflow)
    Workflow.objects.filter(pk=workflow.pk).update(
        hooks=[{"name": "deny_tools", "params": {"tools": ["*"], "message": "Frozen."}}]
    )
    workflow_run = drive(Harness(tool), workflow_run)
    assert workflow_run.status == WorkflowStatus.COMPLETED and len(tool.calls) == 1


# --- the REST API --------------------------------------------------------------------------------


def test_an_operator_defines_a_workflow_and_a_member_starts_it_over_the_api(personas, dispatched) -> None:
    desk = make_agent(personas.org, personas.operator, name="Desk")
    graph = branching_graph(checker_agent(personas, "APPROVED"), pay_action(personas))
    body = {
        "organization": personas.org.pk,
        "name": "Check then pay",
        "graph": graph,
        "connector_agent": desk.pk,
    }

    created = client_for(personas.operator).post("/api/workflows/", body, format="json")
    assert created.status_code == 201, created.content
    workflow_id = created.json()["id"]
    assert client_for(personas.member).post("/api/workflows/", body, format="json").status_code == 404

    started = client_for(personas.member).post(
        f"/api/workflows/{workflow_id}/runs/", {"input": "PO-1"}, format="json"
    )
    assert started.status_code == 201, started.content
    data = started.json()
    assert data["status"] == "running"
    states = {n["node_id"]: n["status"] for n in data["nodes"]}
    assert states == {
        "start": "completed",
        "check": "running",
        "ok": "pending",
        "pay": "pending",
        "end": "pending",
    }

    shown = client_for(personas.member).get(f"/api/workflow-runs/{data['id']}/")
    assert shown.status_code == 200 and shown.json()["nodes"][1]["run"] is not None


def test_workflows_started_over_the_api_count_with_the_callers_runs_started(
    personas, dispatched, settings
) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"run_start": "2/min"}}
    member = client_for(personas.member)
    agent = make_agent(personas.org, personas.operator)
    assert member.post(f"/api/agents/{agent.pk}/runs/", {"input": "hi"}, format="json").status_code == 201
    url = f"/api/workflows/{one_step_workflow(personas, CONNECTOR).pk}/runs/"

    answers = [member.post(url, {"input": "PO-1"}, format="json") for _ in range(2)]

    assert [answer.status_code for answer in answers] == [201, 429]
    assert answers[1].json()["detail"].startswith("Too many runs started")
    assert WorkflowRun.objects.count() == 1


def test_a_bad_graph_over_the_api_is_a_400_naming_the_field(personas) -> None:
    body = {"organization": personas.org.pk, "name": "Bad", "graph": {"nodes": [], "edges": []}}
    response = client_for(personas.operator).post("/api/workflows/", body, format="json")
    assert response.status_code == 400
    assert "graph" in response.json()


def test_another_organisations_workflow_and_runs_answer_404(personas, dispatched) -> None:
    workflow = one_step_workflow(personas, CONNECTOR)
    workflow_run = start(personas, workflow)
    stranger = client_for(personas.stranger)

    assert stranger.get(f"/api/workflows/{workflow.pk}/").status_code == 404
    assert (
        stranger.post(f"/api/workflows/{workflow.pk}/runs/", {"input": "x"}, format="json").status_code == 404
    )
    assert stranger.get(f"/api/workflow-runs/{workflow_run.pk}/").status_code == 404
    assert stranger.post(f"/api/workflow-runs/{workflow_run.pk}/cancel/").status_code == 404
    assert stranger.get("/api/workflows/").json() == []
    body = {"organization": personas.org.pk, "name": "X", "graph": workflow.graph}
    assert stranger.post("/api/workflows/", body, format="json").status_code == 404
    assert WorkflowRun.objects.count() == 1


def test_a_colleagues_workflow_run_is_hidden_from_a_member_but_shown_to_an_auditor(
    personas, dispatched
) -> None:
    workflow_run = start(personas, one_step_workflow(personas, CONNECTOR))
    assert client_for(personas.approver).get(f"/api/workflow-runs/{workflow_run.pk}/").status_code == 404
    assert client_for(personas.auditor).get(f"/api/workflow-runs/{workflow_run.pk}/").status_code == 200


def test_cancelling_a_parked_workflow_run_withdraws_its_approval(personas, dispatched) -> None:
    from approvals.models import ConfirmationRequest
    from tests.approvals.kit import pay_tool, set_policy

    set_policy(personas)
    workflow_run = drive(Harness(pay_tool()), start(personas, one_step_workflow(personas, CONNECTOR)))
    assert workflow_run.status == WorkflowStatus.AWAITING_APPROVAL

    response = client_for(personas.member).post(f"/api/workflow-runs/{workflow_run.pk}/cancel/")

    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert node(workflow_run).run.status == "cancelled"
    assert node(workflow_run).status == NodeStatus.CANCELLED
    assert ConfirmationRequest.objects.get(run=node(workflow_run).run).status == "cancelled"


# --- the admin -----------------------------------------------------------------------------------


def test_a_workflow_is_started_in_the_admin_and_its_node_states_shown(
    personas, superuser, dispatched
) -> None:
    from django.test import Client

    from tenancy.models import Membership, Role

    Membership.objects.create(organization=personas.org, user=superuser, role=Role.OPERATOR)
    workflow = one_step_workflow(personas, CONNECTOR)
    client = Client()
    client.force_login(superuser)

    response = client.post(f"/admin/workflows/workflow/{workflow.pk}/start/", {"input": "PO-1001"})

    workflow_run = WorkflowRun.objects.get()
    assert response.status_code == 302 and response["Location"].endswith(
        f"/workflowrun/{workflow_run.pk}/change/"
    )
    page = client.get(response["Location"]).content.decode()
    assert "oa__purchase_pay" in page and "running" in page


def test_the_admins_start_counts_with_the_starters_runs_started(
    personas, superuser, dispatched, settings
) -> None:
    from django.test import Client

    from tenancy.models import Membership, Role

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"run_start": "2/min"}}
    Membership.objects.create(organization=personas.org, user=superuser, role=Role.OPERATOR)
    workflow = one_step_workflow(personas, CONNECTOR)
    client = Client()
    client.force_login(superuser)
    start_url = f"/admin/workflows/workflow/{workflow.pk}/start/"

    answers = [client.post(start_url, {"input": f"PO-{n}"}, follow=True) for n in range(3)]

    assert WorkflowRun.objects.count() == 2
    assert "Not started: Too many runs started: the limit is 2 per minute." in answers[2].content.decode()


def test_the_admin_refuses_a_graph_that_cannot_run_with_a_field_error(personas, superuser) -> None:
    from django.test import Client

    client = Client()
    client.force_login(superuser)
    data = {
        "organization": personas.org.pk,
        "name": "Bad",
        "graph": '{"nodes": [], "edges": []}',
        "hooks": "[]",
    }
    response = client.post("/admin/workflows/workflow/add/", data)
    assert response.status_code == 200
    assert "exactly one start node" in response.content.decode()
    assert not Workflow.objects.exists()


# --- a real connector ----------------------------------------------------------------------------


def test_a_connector_node_calls_the_real_service_once_approved_and_never_when_blocked(
    personas, dispatched, service
) -> None:
    from asgiref.sync import async_to_sync

    from agents.engine.runner import run_execute, run_resume
    from approvals.models import ConfirmationRequest
    from approvals.services import confirmation_decide
    from tests.approvals.kit import set_policy

    set_policy(personas)
    action = pay_action(personas, base_url=service.base_url)
    desk = make_agent(personas.org, personas.operator, name="Desk")
    graph = {
        "nodes": [
            {"id": "start", "type": "start"},
            {
                "id": "pay",
                "type": "connector",
                "action": action.pk,
                "arguments": {"purchase_id": "{{ input }}", "amount": 5},
            },
            {"id": "end", "type": "end"},
        ],
        "edges": [{"from": "start", "to": "pay"}, {"from": "pay", "to": "end"}],
    }
    workflow = Workflow.objects.create(
        organization=personas.org, name="Pay", graph=graph, connector_agent=desk
    )

    workflow_run = start(personas, workflow, "PO-1001")
    pay_run = node(workflow_run, "pay").run
    assert async_to_sync(run_execute)(pay_run.pk) == "awaiting_approval"
    assert service.received == []
    request = ConfirmationRequest.objects.get(run=pay_run)
    assert request.agent_id == desk.pk and request.tool_name == "oa__purchase_pay"
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    assert async_to_sync(run_resume)(pay_run.pk, reason="approved") == "completed"

    assert [(method, path) for method, path, *_ in service.received] == [
        ("POST", "/api/purchases/PO-1001/pay")
    ]
    workflow_run.refresh_from_db()
    assert workflow_run.status == WorkflowStatus.COMPLETED and '"paid": "PO-1001"' in workflow_run.output

    Workflow.objects.filter(pk=workflow.pk).update(
        hooks=[{"name": "deny_tools", "params": {"tools": ["oa__*"]}}]
    )
    workflow.refresh_from_db()
    blocked = start(personas, workflow, "PO-1002")
    assert async_to_sync(run_execute)(node(blocked, "pay").run_id) == "failed"
    assert len(service.received) == 1, "the blocked call never reached the service"
    blocked.refresh_from_db()
    assert blocked.status == WorkflowStatus.FAILED


def test_the_admin_shows_the_chain_connector_nodes_will_run(personas, superuser) -> None:
    from django.test import Client

    hooks = [{"name": "deny_tools", "params": {"tools": ["oa__*_delete"]}}]
    workflow = one_step_workflow(personas, CONNECTOR, hooks=hooks)
    client = Client()
    client.force_login(superuser)
    page = client.get(f"/admin/workflows/workflow/{workflow.pk}/change/").content.decode()
    assert "deny_tools (PreToolUse, config)" in page and "confirmation_gate" in page
