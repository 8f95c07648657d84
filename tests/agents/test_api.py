"""The REST API: members start, read, follow and cancel their own runs; everything else is a 404."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace
from typing import Any

import pytest
from django.conf import settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from rest_framework.views import exception_handler

from agents import events as ev
from agents.apis import RunStartThrottle, api_error
from agents.models import Conversation, ExecutionPath, Run, RunEvent, RunStatus
from agents.services import run_start
from fimone.errors import ServiceError
from tests.personas import make_agent


@pytest.fixture
def dispatched(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Runs are not executed: the ids handed to the executor are recorded instead."""
    calls: list[int] = []
    monkeypatch.setattr("agents.services.dispatch_execute", calls.append)
    return calls


@pytest.fixture
def agent(personas):
    return make_agent(personas.org, personas.operator)


def client_for(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def runs_url(agent) -> str:
    return f"/api/agents/{agent.pk}/runs/"


def events_url(run: Run, **params: Any) -> str:
    query = "&".join(f"{key}={value}" for key, value in params.items())
    return f"/api/runs/{run.pk}/events/" + (f"?{query}" if query else "")


def add_events(run: Run, count: int) -> None:
    RunEvent.objects.bulk_create(
        RunEvent(run=run, seq=seq, type=ev.LLM_MESSAGE, payload={"content": f"m{seq}"})
        for seq in range(1, count + 1)
    )


# --- agents ---------------------------------------------------------------------------------------


def test_a_member_lists_only_the_agents_of_their_organisation(personas, agent, dispatched) -> None:
    make_agent(personas.other_org, personas.stranger, name="Globex agent")

    response = client_for(personas.member).get("/api/agents/")

    assert response.status_code == 200
    assert [row["name"] for row in response.json()] == [agent.name]
    row = response.json()[0]
    assert row["organization"] == personas.org.pk and row["organization_name"] == "Acme"
    assert row["links"] == {"runs": runs_url(agent)}
    assert "model_config_json" not in row


# --- starting runs --------------------------------------------------------------------------------


def test_a_member_starts_a_run_which_is_dispatched_once_after_commit(
    personas, agent, dispatched, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(personas.member).post(runs_url(agent), {"input": "pay PO-1"}, format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    run = Run.objects.get(pk=body["id"])
    assert dispatched == [run.pk]
    assert run.user == personas.member and run.agent == agent
    assert run.execution_path == ExecutionPath.API
    assert body["status"] == RunStatus.QUEUED and body["input"] == "pay PO-1"
    assert body["conversation"] == run.conversation_id and body["agent"] == agent.pk
    assert body["output"] == "" and body["error"] == "" and body["finished_at"] is None
    assert body["links"]["events"] == f"/api/runs/{run.pk}/events/"
    assert body["links"]["cancel"] == f"/api/runs/{run.pk}/cancel/"


def test_an_agent_of_another_organisation_is_not_found(personas, dispatched) -> None:
    globex_agent = make_agent(personas.other_org, personas.stranger)

    response = client_for(personas.member).post(runs_url(globex_agent), {"input": "hi"}, format="json")

    assert response.status_code == 404
    assert not Run.objects.exists() and dispatched == []


def test_an_unknown_agent_is_not_found(personas, dispatched) -> None:
    response = client_for(personas.member).post("/api/agents/999999/runs/", {"input": "hi"}, format="json")

    assert response.status_code == 404


def test_an_empty_input_is_refused_with_a_field_error(personas, agent, dispatched) -> None:
    client = client_for(personas.member)

    for payload in ({"input": ""}, {"input": "   "}, {}):
        response = client.post(runs_url(agent), payload, format="json")
        assert response.status_code == 400
        assert list(response.json()) == ["input"] and isinstance(response.json()["input"], list)
    assert not Run.objects.exists()


def test_an_input_longer_than_20000_characters_is_refused(personas, agent, dispatched) -> None:
    response = client_for(personas.member).post(runs_url(agent), {"input": "x" * 20_001}, format="json")

    assert response.status_code == 400 and "input" in response.json()


def test_malformed_json_is_a_400_not_a_500(personas, agent, dispatched) -> None:
    client = client_for(personas.member)

    response = client.post(runs_url(agent), '{"input": "hi"', content_type="application/json")
    assert response.status_code == 400 and "detail" in response.json()

    response = client.post(runs_url(agent), "[1, 2]", content_type="application/json")
    assert response.status_code == 400


@pytest.mark.parametrize("conversation", ["abc", -1, 0, 2**70, [1], {"id": 1}])
def test_a_malformed_conversation_id_is_a_field_error(personas, agent, dispatched, conversation) -> None:
    response = client_for(personas.member).post(
        runs_url(agent), {"input": "hi", "conversation": conversation}, format="json"
    )

    assert response.status_code == 400 and "conversation" in response.json()


def test_a_conversation_of_someone_else_is_not_found_with_a_field_error(personas, agent, dispatched) -> None:
    theirs = Conversation.objects.create(organization=personas.org, agent=agent, user=personas.approver)

    response = client_for(personas.member).post(
        runs_url(agent), {"input": "hi", "conversation": theirs.pk}, format="json"
    )

    assert response.status_code == 404
    assert response.json() == {"conversation": ["no such conversation with this agent"]}
    assert not Run.objects.exists()


def test_a_conversation_with_another_agent_is_not_found_with_a_field_error(
    personas, agent, dispatched
) -> None:
    other_agent = make_agent(personas.org, personas.operator, name="Other")
    mine = Conversation.objects.create(organization=personas.org, agent=other_agent, user=personas.member)

    response = client_for(personas.member).post(
        runs_url(agent), {"input": "hi", "conversation": mine.pk}, format="json"
    )

    assert response.status_code == 404 and list(response.json()) == ["conversation"]


def test_a_second_run_while_one_is_in_progress_is_a_conflict(personas, agent, dispatched) -> None:
    client = client_for(personas.member)
    first = client.post(runs_url(agent), {"input": "one"}, format="json").json()

    response = client.post(
        runs_url(agent), {"input": "two", "conversation": first["conversation"]}, format="json"
    )

    assert response.status_code == 409 and "detail" in response.json()
    assert Run.objects.count() == 1


def test_a_finished_conversation_continues_with_a_new_run(personas, agent, dispatched) -> None:
    client = client_for(personas.member)
    first = client.post(runs_url(agent), {"input": "one"}, format="json").json()
    Run.objects.filter(pk=first["id"]).update(status=RunStatus.COMPLETED)

    response = client.post(
        runs_url(agent), {"input": "two", "conversation": first["conversation"]}, format="json"
    )

    assert response.status_code == 201 and response.json()["conversation"] == first["conversation"]


# --- reading runs ---------------------------------------------------------------------------------


@pytest.fixture
def member_run(personas, agent, dispatched) -> Run:
    return run_start(agent=agent, user=personas.member, input="pay PO-1")


def test_the_owner_reads_their_run(personas, member_run) -> None:
    response = client_for(personas.member).get(f"/api/runs/{member_run.pk}/")

    assert response.status_code == 200
    assert response.json()["id"] == member_run.pk and response.json()["status"] == RunStatus.QUEUED


def test_a_stranger_reading_a_run_gets_a_404(personas, member_run) -> None:
    client = client_for(personas.stranger)

    assert client.get(f"/api/runs/{member_run.pk}/").status_code == 404
    assert client.get(events_url(member_run)).status_code == 404
    assert client.post(f"/api/runs/{member_run.pk}/cancel/").status_code == 404


def test_a_colleague_in_the_same_organisation_reading_a_members_run_gets_a_404(personas, member_run) -> None:
    for colleague in (personas.operator, personas.approver, personas.admin):
        client = client_for(colleague)
        assert client.get(f"/api/runs/{member_run.pk}/").status_code == 404
        assert client.get(events_url(member_run)).status_code == 404
        assert client.post(f"/api/runs/{member_run.pk}/cancel/").status_code == 404
    member_run.refresh_from_db()
    assert member_run.status == RunStatus.QUEUED


# --- events ---------------------------------------------------------------------------------------


def test_events_are_paged_by_seq_with_after_and_limit(personas, member_run) -> None:
    add_events(member_run, 5)
    client = client_for(personas.member)

    first = client.get(events_url(member_run, after=0, limit=2)).json()
    assert [event["seq"] for event in first["events"]] == [1, 2]
    assert first["next_after"] == 2 and first["has_more"] is True
    assert first["run_status"] == RunStatus.QUEUED
    assert set(first["events"][0]) == {"run_id", "seq", "type", "payload", "created_at"}
    assert first["events"][0]["payload"] == {"content": "m1"}

    second = client.get(events_url(member_run, after=first["next_after"], limit=2)).json()
    assert [event["seq"] for event in second["events"]] == [3, 4] and second["has_more"] is True

    last = client.get(events_url(member_run, after=second["next_after"], limit=2)).json()
    assert [event["seq"] for event in last["events"]] == [5]
    assert last["next_after"] == 5 and last["has_more"] is False

    empty = client.get(events_url(member_run, after=5)).json()
    assert empty == {"events": [], "next_after": 5, "run_status": RunStatus.QUEUED, "has_more": False}


def test_events_default_to_a_page_of_100(personas, member_run) -> None:
    add_events(member_run, 101)

    page = client_for(personas.member).get(events_url(member_run)).json()

    assert len(page["events"]) == 100 and page["next_after"] == 100 and page["has_more"] is True


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"after": "x"}, "after"),
        ({"after": -1}, "after"),
        ({"after": 2**70}, "after"),
        ({"limit": 501}, "limit"),
        ({"limit": 0}, "limit"),
        ({"limit": -5}, "limit"),
        ({"limit": "ten"}, "limit"),
    ],
)
def test_a_bad_after_or_limit_is_a_400_with_a_field_error(personas, member_run, params, field) -> None:
    response = client_for(personas.member).get(events_url(member_run, **params))

    assert response.status_code == 400
    assert field in response.json() and isinstance(response.json()[field], list)


# --- cancelling -----------------------------------------------------------------------------------


def test_cancelling_a_queued_run_records_a_failed_event_and_a_second_cancel_conflicts(
    personas, member_run, django_capture_on_commit_callbacks
) -> None:
    client = client_for(personas.member)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/api/runs/{member_run.pk}/cancel/")

    assert response.status_code == 200
    assert response.json()["status"] == RunStatus.CANCELLED and response.json()["finished_at"]
    [event] = RunEvent.objects.filter(run=member_run, type=ev.RUN_FAILED)
    assert event.payload["stage"] == "cancelled"

    again = client.post(f"/api/runs/{member_run.pk}/cancel/")
    assert again.status_code == 409 and "cancelled" in again.json()["detail"]


@pytest.mark.parametrize(
    ("error", "status", "body"),
    [
        (ServiceError("the message is empty", field="input"), 400, {"input": ["the message is empty"]}),
        (ServiceError("bad request"), 400, {"detail": "bad request"}),
        (ServiceError("not found", code="not_found"), 404, {"detail": "not found"}),
        (ServiceError("gone", code="not_found", field="conversation"), 404, {"conversation": ["gone"]}),
        (ServiceError("busy", code="conflict"), 409, {"detail": "busy"}),
    ],
)
def test_a_service_refusal_maps_to_its_status_and_drf_error_shape(error, status, body) -> None:
    response = exception_handler(api_error(error), {})

    assert response.status_code == status
    assert json.loads(json.dumps(response.data)) == body


# --- authentication and schema --------------------------------------------------------------------


def test_token_authentication_works(personas, member_run) -> None:
    token = Token.objects.create(user=personas.member)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")

    assert client.get(f"/api/runs/{member_run.pk}/").status_code == 200
    response = client.post(runs_url(member_run.agent), {"input": "another"}, format="json")
    assert response.status_code == 201


def test_an_anonymous_caller_is_refused(personas, member_run) -> None:
    client = APIClient()

    for response in (
        client.get("/api/agents/"),
        client.get(f"/api/runs/{member_run.pk}/"),
        client.get(events_url(member_run)),
        client.post(runs_url(member_run.agent), {"input": "hi"}, format="json"),
        client.post(f"/api/runs/{member_run.pk}/cancel/"),
    ):
        assert response.status_code in (401, 403)
    assert Run.objects.count() == 1


def test_a_session_post_without_a_csrf_token_is_refused(personas, agent, dispatched) -> None:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(personas.member)

    assert client.get("/api/agents/").status_code == 200
    response = client.post(runs_url(agent), {"input": "hi"}, format="json")

    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    assert not Run.objects.exists()


def test_the_openapi_schema_lists_the_agent_and_run_paths(db) -> None:
    response = APIClient().get("/api/schema/", {"format": "json"})

    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in (
        "/api/agents/",
        "/api/agents/{agent_id}/runs/",
        "/api/runs/{run_id}/",
        "/api/runs/{run_id}/events/",
        "/api/runs/{run_id}/cancel/",
    ):
        assert path in paths
    start = paths["/api/agents/{agent_id}/runs/"]["post"]
    assert start["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/RunStart"
    }
    assert {"201", "400", "404", "409"} <= set(start["responses"])


# --- rates ---------------------------------------------------------------------------------------


def test_it_refuses_run_starts_over_the_rate_with_429_and_retry_after(personas, agent, dispatched) -> None:
    limit = int(settings.RUN_START_RATE.split("/")[0])
    client = client_for(personas.member)

    accepted = [client.post(runs_url(agent), {"input": f"hi {n}"}, format="json") for n in range(limit)]
    refused = client.post(runs_url(agent), {"input": "one too many"}, format="json")

    assert [response.status_code for response in accepted] == [201] * limit
    assert refused.status_code == 429
    assert refused.json()["detail"].startswith(f"Too many runs started: the limit is {limit} per minute.")
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert Run.objects.count() == limit


def test_it_counts_run_starts_per_user_so_another_organisation_is_not_held_back(
    personas, agent, dispatched, settings
) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"run_start": "2/min"}}
    member = client_for(personas.member)
    for _ in range(2):
        assert member.post(runs_url(agent), {"input": "hi"}, format="json").status_code == 201
    assert member.post(runs_url(agent), {"input": "hi"}, format="json").status_code == 429

    theirs = make_agent(personas.other_org, personas.stranger, name="Globex helper")
    response = client_for(personas.stranger).post(runs_url(theirs), {"input": "hi"}, format="json")

    assert response.status_code == 201


def test_starting_a_workflow_or_an_eval_over_the_api_counts_with_the_callers_runs_started(
    personas, agent, dispatched, settings
) -> None:
    from evals.services import eval_set_create
    from tests.workflows.kit import CONNECTOR, one_step_workflow

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"run_start": "3/min"}}
    operator = client_for(personas.operator)
    workflow = one_step_workflow(personas, CONNECTOR)
    cases = [{"input": "hi", "expectation": "contains", "expected": ""}]
    eval_set = eval_set_create(
        user=personas.operator, organization_id=personas.org.pk, name="One", cases=cases
    )
    starts = {
        "agent": lambda: operator.post(runs_url(agent), {"input": "hi"}, format="json"),
        "workflow": lambda: operator.post(
            f"/api/workflows/{workflow.pk}/runs/", {"input": "hi"}, format="json"
        ),
        "eval": lambda: operator.post(
            f"/api/eval-sets/{eval_set.pk}/runs/", {"agent": agent.pk}, format="json"
        ),
    }

    under = {name: start().status_code for name, start in starts.items()}
    over = {name: start() for name, start in starts.items()}

    assert under == dict.fromkeys(starts, 201), "one counter: three runs started, one through each"
    assert {name: response.status_code for name, response in over.items()} == dict.fromkeys(starts, 429)
    assert over["eval"].json()["detail"].startswith("Too many runs started: the limit is 3 per minute.")
    assert all(1 <= int(response["Retry-After"]) <= 60 for response in over.values())


def test_it_lets_exactly_the_rate_through_when_starts_arrive_at_once() -> None:
    user = SimpleNamespace(pk=987_654, is_authenticated=True)
    request = SimpleNamespace(user=user, META={"REMOTE_ADDR": "127.0.0.1"})
    limit = int(settings.RUN_START_RATE.split("/")[0])
    answers: list[bool] = []
    start = threading.Barrier(limit + 20)

    def ask() -> None:
        start.wait()
        answers.append(RunStartThrottle().refusal(request) is None)

    threads = [threading.Thread(target=ask) for _ in range(limit + 20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)

    assert answers.count(True) == limit and len(answers) == limit + 20
