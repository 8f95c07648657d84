"""The approval trail cannot be erased (docs/design.md §1.9): whoever deletes what, requests and their
event logs stay, and an archived agent's approvals stay readable."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model
from django.db.models import ProtectedError

from agents.archiving import agent_archive, connector_archive
from agents.models import Agent, Connector, Conversation, Run, RunEvent, RunMessage, RunStatus, ToolExecution
from approvals.models import ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from approvals.services import confirmation_decide
from tenancy.models import Organization, Role
from tests.admin_kit import logged_in, page_text, url
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool, paying_agent, set_policy, suspended_run
from tests.personas import make_action, make_http_connector, make_user

User = get_user_model()
Kind = ConfirmationEvent.Kind
HISTORY_MODELS = (
    Agent,
    Conversation,
    Run,
    RunEvent,
    RunMessage,
    ToolExecution,
    ConfirmationRequest,
    ConfirmationEvent,
)

# Verdicts act after commit (wake, resume, card update): let transactions really commit.
pytestmark = pytest.mark.django_db(transaction=True)


def counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in HISTORY_MODELS}


@pytest.fixture
def history(personas, resumes) -> SimpleNamespace:
    """A payment approved by april and executed: a run with events, messages, a tool execution,
    a decided request and its event log."""
    set_policy(personas)
    harness = Harness(pay_tool())
    run, request = suspended_run(personas, harness)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    assert harness.resume(run) == RunStatus.COMPLETED
    assert ToolExecution.objects.filter(run=run).count() == 1
    request.refresh_from_db()
    return SimpleNamespace(run=run, request=request, agent=run.agent)


@pytest.fixture
def parked(personas, resumes) -> SimpleNamespace:
    """A run suspended on a pending approval."""
    set_policy(personas)
    harness = Harness(pay_tool())
    run, request = suspended_run(personas, harness)
    return SimpleNamespace(run=run, request=request, agent=run.agent, harness=harness)


# --- deleting is refused --------------------------------------------------------------------------


def test_it_refuses_a_superuser_deleting_an_agent_with_runs_and_approvals_in_the_admin(
    superuser, history
) -> None:
    client = logged_in(superuser)
    before = counts()

    page = client.get(url(Agent, "delete", history.agent.pk))
    posted = client.post(url(Agent, "delete", history.agent.pk), {"post": "yes"})
    bulk = client.post(
        url(Agent, "changelist"),
        {"action": "delete_selected", "_selected_action": [history.agent.pk], "post": "yes"},
    )

    assert page.status_code == 403 and posted.status_code == 403
    assert bulk.status_code in (200, 302)
    assert counts() == before
    assert ConfirmationRequest.objects.get(pk=history.request.pk).status == ConfirmationStatus.APPROVED
    assert list(history.request.events.order_by("pk").values_list("kind", flat=True)) == [
        Kind.CREATED,
        Kind.DELIVERED,
        Kind.DECIDED,
        Kind.EXECUTED,
    ]


def test_it_refuses_to_delete_an_agent_run_or_organisation_with_approvals_from_a_shell(
    personas, history
) -> None:
    before = counts()

    for deletion in (
        history.agent.delete,
        Agent.objects.filter(pk=history.agent.pk).delete,
        history.run.delete,
        Run.objects.filter(pk=history.run.pk).delete,
        personas.org.delete,
        Organization.objects.filter(pk=personas.org.pk).delete,
    ):
        with pytest.raises(ProtectedError):
            deletion()

    assert counts() == before


def test_it_refuses_to_delete_a_confirmation_request_with_its_event_log(history) -> None:
    before = counts()

    with pytest.raises(ProtectedError):
        history.request.delete()
    with pytest.raises(ProtectedError):
        ConfirmationRequest.objects.filter(pk=history.request.pk).delete()

    assert counts() == before


@pytest.mark.parametrize("who", ["member", "approver"], ids=["the requester", "the decider"])
def test_it_refuses_to_delete_a_user_who_requested_or_decided(personas, history, who) -> None:
    user = getattr(personas, who)
    before = counts()

    with pytest.raises(ProtectedError):
        user.delete()
    with pytest.raises(ProtectedError):
        User.objects.filter(pk=user.pk).delete()

    assert counts() == before
    assert ConfirmationRequest.objects.get(pk=history.request.pk).responded_by == personas.approver


def test_it_refuses_to_delete_a_user_whose_refused_click_is_logged(personas, parked) -> None:
    # A member who may not decide: a refused click of theirs is logged (a stranger's writes nothing).
    outsider = make_user("mallory", personas.org, Role.MEMBER)
    confirmation_decide(request_id=parked.request.pk, user=outsider, approve=True)
    assert parked.request.events.filter(kind=Kind.CLICK_REFUSED, actor=outsider).exists()

    with pytest.raises(ProtectedError):
        outsider.delete()

    assert parked.request.events.filter(kind=Kind.CLICK_REFUSED, actor=outsider).exists()


def test_it_refuses_to_delete_a_user_who_was_only_asked_to_decide(personas, parked) -> None:
    # Adam (an organisation admin) is in the snapshot but never clicked: the snapshot is history.
    snapshot = set(parked.request.approvers.values_list("pk", flat=True))
    assert personas.admin.pk in snapshot

    with pytest.raises(ProtectedError):
        personas.admin.delete()
    with pytest.raises(ProtectedError):
        User.objects.filter(pk=personas.admin.pk).delete()

    assert set(parked.request.approvers.values_list("pk", flat=True)) == snapshot


def test_it_refuses_to_delete_a_connector_whose_tool_was_only_put_to_approvers(personas, parked) -> None:
    # The pay call was never executed (still pending): the request alone is its history.
    connector = make_http_connector(personas.org, "https://oa.example.test", slug="oa")
    make_action(connector, "purchase_pay", method="POST")
    globex = make_http_connector(personas.other_org, "https://oa.example.test", slug="oa")

    with pytest.raises(ProtectedError, match="Archive it instead"):
        connector.delete()
    with pytest.raises(ProtectedError):
        Connector.objects.filter(pk=connector.pk).delete()

    globex.delete()  # another tenant's connector of the same slug has no history here
    assert Connector.objects.filter(pk=connector.pk).exists()
    assert not Connector.objects.filter(pk=globex.pk).exists()


# --- archiving an agent ----------------------------------------------------------------------------


def test_archiving_an_agent_cancels_its_parked_run_and_withdraws_the_pending_request(
    personas, parked
) -> None:
    agent_archive(agent=parked.agent, user=personas.operator)

    parked.run.refresh_from_db()
    parked.request.refresh_from_db()
    assert parked.run.status == RunStatus.CANCELLED
    assert parked.request.status == ConfirmationStatus.CANCELLED
    assert parked.request.reason == "the run was cancelled: the agent was archived by oscar"
    assert parked.request.events.filter(kind=Kind.CANCELLED).exists()

    late = confirmation_decide(request_id=parked.request.pk, user=personas.approver, approve=True)
    assert not late.accepted
    assert parked.harness.resume(parked.run) is None, "nothing resumes a cancelled run"
    assert parked.harness.tools["oa__purchase_pay"].calls == []


def test_an_approval_cannot_run_an_archived_connectors_tool(personas, resumes) -> None:
    # The real toolbox: the pay action of the oa connector, pointing nowhere reachable.
    set_policy(personas)
    connector = make_http_connector(personas.org, "http://127.0.0.1:9", slug="oa")
    action = make_action(
        connector,
        "purchase_pay",
        method="POST",
        parameters_schema={
            "type": "object",
            "properties": {"purchase_id": {"type": "string"}, "amount": {"type": "number"}},
        },
    )
    harness = Harness()
    harness.options = lambda: {"provider_factory": harness.provider}  # type: ignore[method-assign]
    agent = paying_agent(personas)
    agent.actions.set([action])
    run, request = suspended_run(personas, harness, agent=agent)

    connector_archive(connector=connector, user=personas.operator)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    assert harness.resume(run) == RunStatus.COMPLETED

    run.refresh_from_db()
    assert "Unknown tool 'oa__purchase_pay'" in run.output
    assert not ToolExecution.objects.filter(run=run).exists()


def test_an_archived_agents_approvals_stay_readable_everywhere(personas, superuser, history) -> None:
    agent_archive(agent=history.agent, user=personas.operator)

    auditor = logged_in(personas.auditor)
    history_page = auditor.get("/approvals/history/")
    detail_page = auditor.get(f"/approvals/{history.request.pk}/")
    run_api = logged_in(personas.member).get(f"/api/runs/{history.run.pk}/")
    admin_run = logged_in(superuser).get(url(Run, "change", history.run.pk))

    assert history_page.status_code == 200 and "oa__purchase_pay" in page_text(history_page)
    assert detail_page.status_code == 200 and "Approved" in page_text(detail_page)
    assert run_api.status_code == 200 and run_api.json()["status"] == RunStatus.COMPLETED
    assert admin_run.status_code == 200 and "oa__purchase_pay" in page_text(admin_run)
