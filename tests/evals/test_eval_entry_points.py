"""Starting an eval run from ``manage.py eval_run``, the admin and the API."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from agents.engine.runner import run_execute
from evals.models import EvalRun, EvalStatus
from evals.services import eval_set_create
from tests.personas import make_agent, scripted

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def executed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each run executes in-process as soon as it is committed, as an idle worker would."""
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: async_to_sync(run_execute)(run_id))


def greeting_set(personas: Any) -> Any:
    cases = [
        {"input": "hi", "expectation": "contains", "expected": "Hello"},
        {"input": "hi again", "expectation": "contains", "expected": "Goodbye"},
    ]
    return eval_set_create(
        user=personas.operator, organization_id=personas.org.pk, name="Greetings", cases=cases
    )


def test_the_command_runs_a_set_and_prints_each_verdict_and_the_pass_rate(personas, executed_at_once) -> None:
    agent = make_agent(personas.org, personas.operator, model_config_json=scripted({"content": "Hello."}))
    out = StringIO()
    call_command("eval_run", str(greeting_set(personas).pk), str(agent.pk), "--user", "oscar", stdout=out)
    text = out.getvalue()
    assert "hooks bypassed" in text
    assert "case 1: passed" in text and "case 2: failed" in text
    assert "Passed 1/2 (50%)" in text


def test_the_command_refuses_a_user_who_does_not_operate_the_organisation(personas, executed_at_once) -> None:
    agent = make_agent(personas.org, personas.operator)
    with pytest.raises(CommandError, match="not found"):
        call_command(
            "eval_run", str(greeting_set(personas).pk), str(agent.pk), "--user", "alice", stdout=StringIO()
        )
    assert not EvalRun.objects.exists()


def test_adding_an_eval_run_in_the_admin_starts_it(personas, superuser, executed_at_once) -> None:
    from tenancy.models import Membership, Role

    Membership.objects.create(organization=personas.org, user=superuser, role=Role.OPERATOR)
    agent = make_agent(personas.org, personas.operator, model_config_json=scripted({"content": "Hello."}))
    client = Client()
    client.force_login(superuser)
    response = client.post(
        "/admin/evals/evalrun/add/", {"eval_set": greeting_set(personas).pk, "agent": agent.pk}
    )
    assert response.status_code == 302
    eval_run = EvalRun.objects.get()
    assert eval_run.status == EvalStatus.COMPLETED and eval_run.passed == 1
    page = client.get(f"/admin/evals/evalrun/{eval_run.pk}/change/").content.decode()
    assert "1/2 (50%)" in page and "Goodbye" in page


def test_an_operator_starts_an_eval_over_the_api_and_reads_its_pass_rate(personas, executed_at_once) -> None:
    agent = make_agent(personas.org, personas.operator, model_config_json=scripted({"content": "Hello."}))
    operator = APIClient()
    operator.force_authenticate(personas.operator)
    cases = [{"input": "hi", "expectation": "contains", "expected": "Hello"}]
    created = operator.post(
        "/api/eval-sets/", {"organization": personas.org.pk, "name": "G", "cases": cases}, format="json"
    )
    assert created.status_code == 201, created.content
    started = operator.post(
        f"/api/eval-sets/{created.json()['id']}/runs/", {"agent": agent.pk}, format="json"
    )
    assert started.status_code == 201, started.content
    shown = operator.get(f"/api/eval-runs/{started.json()['id']}/").json()
    assert shown["pass_rate"] == 1.0 and shown["hooks_bypassed"] is True
    assert shown["results"][0]["outcome"] == "passed"

    stranger = APIClient()
    stranger.force_authenticate(personas.stranger)
    assert stranger.get(f"/api/eval-runs/{started.json()['id']}/").status_code == 404
    assert (
        stranger.post(
            f"/api/eval-sets/{created.json()['id']}/runs/", {"agent": agent.pk}, format="json"
        ).status_code
        == 404
    )


def test_an_eval_started_over_the_api_answers_as_it_is_once_it_ran(personas, executed_at_once) -> None:
    agent = make_agent(personas.org, personas.operator, model_config_json=scripted({"content": "Hello."}))
    operator = APIClient()
    operator.force_authenticate(personas.operator)

    started = operator.post(
        f"/api/eval-sets/{greeting_set(personas).pk}/runs/", {"agent": agent.pk}, format="json"
    )

    assert started.status_code == 201, started.content
    answered = started.json()
    assert answered["status"] == EvalStatus.COMPLETED and answered["pass_rate"] == 0.5
    assert [result["outcome"] for result in answered["results"]] == ["passed", "failed"]


def test_an_eval_on_an_agent_the_caller_cannot_see_answers_404_naming_the_agent(personas) -> None:
    theirs = make_agent(personas.other_org, personas.stranger, name="Globex helper")
    operator = APIClient()
    operator.force_authenticate(personas.operator)

    refused = operator.post(
        f"/api/eval-sets/{greeting_set(personas).pk}/runs/", {"agent": theirs.pk}, format="json"
    )

    assert refused.status_code == 404 and refused.json() == {"agent": ["no such agent"]}
    assert not EvalRun.objects.exists()


def test_each_case_of_an_eval_counts_as_a_run_started_and_a_refused_eval_counts_none(
    personas, settings, monkeypatch
) -> None:
    """Three runs a minute: an eval of two cases uses two; a second one (two more) is refused as a
    whole and uses none, so one more ordinary run still starts."""
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"run_start": "3/min"}}
    agent = make_agent(personas.org, personas.operator)
    operator = APIClient()
    operator.force_authenticate(personas.operator)
    url = f"/api/eval-sets/{greeting_set(personas).pk}/runs/"

    answers = [operator.post(url, {"agent": agent.pk}, format="json") for _ in range(2)]

    assert [answer.status_code for answer in answers] == [201, 429]
    assert 1 <= int(answers[1]["Retry-After"]) <= 60
    assert answers[1].json()["detail"].startswith("Starting 2 runs at once is refused. Too many runs started")
    assert EvalRun.objects.count() == 1
    assert operator.post(f"/api/agents/{agent.pk}/runs/", {"input": "hi"}, format="json").status_code == 201


def test_the_admin_and_the_command_start_evals_under_the_same_rate(personas, settings, monkeypatch) -> None:
    from tenancy.models import Membership, Role
    from tests.personas import with_roles

    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"run_start": "3/min"}}
    Membership.objects.get_or_create(organization=personas.org, user=personas.operator, role=Role.OPERATOR)
    with_roles(personas.operator)
    agent = make_agent(personas.org, personas.operator)
    eval_set = greeting_set(personas)
    admin = Client()
    admin.force_login(personas.operator)

    added = admin.post("/admin/evals/evalrun/add/", {"eval_set": eval_set.pk, "agent": agent.pk}, follow=True)
    assert EvalRun.objects.count() == 1, added.content.decode()[:2000]
    again = admin.post(
        "/admin/evals/evalrun/",
        {"action": "run_again", "_selected_action": [EvalRun.objects.get().pk]},
        follow=True,
    )
    assert "Starting 2 runs at once is refused. Too many runs started" in again.content.decode()
    with pytest.raises(CommandError, match="Too many runs started"):
        call_command("eval_run", str(eval_set.pk), str(agent.pk), "--user", "oscar", stdout=StringIO())
    assert EvalRun.objects.count() == 1


def test_an_operator_names_live_tools_one_per_line_and_a_bad_answer_map_is_a_field_error(personas) -> None:
    from evals.models import EvalSet
    from tests.personas import with_roles

    with_roles(personas.operator)
    admin = Client()
    admin.force_login(personas.operator)
    form = {
        "organization": personas.org.pk,
        "name": "Reads",
        "description": "",
        "live_tools": "oa__purchase_list\n\n  ledger__sql_query \n",
        "tool_answers": '{"oa__purchase_pay": {"status": "paid"}}',
        "cases-TOTAL_FORMS": "1",
        "cases-INITIAL_FORMS": "0",
        "cases-0-position": "0",
        "cases-0-input": "list them",
        "cases-0-expectation": "contains",
        "cases-0-expected": "PO",
    }

    refused = admin.post("/admin/evals/evalset/add/", {**form, "tool_answers": '["not", "a", "map"]'})
    assert refused.status_code == 200 and not EvalSet.objects.exists()
    assert "recorded answers must map tool names to what the tool answers" in refused.content.decode()

    assert admin.post("/admin/evals/evalset/add/", form).status_code == 302
    saved = EvalSet.objects.get()
    assert saved.live_tools == ["oa__purchase_list", "ledger__sql_query"]
    assert saved.sandbox()["answers"] == {"oa__purchase_pay": '{"status": "paid"}'}
