"""The agent admin checks an agent's configuration and keeps its API key write-only; the form
helpers the other admin tests post with live here."""

from __future__ import annotations

import json

import pytest

from agents.models import Agent
from tests.admin_kit import logged_in, page_text, url
from tests.console.admin_forms import agent_form, grant
from tests.personas import make_agent, scripted

# The services' dispatch of new runs to a worker is switched off (conftest.py).
pytestmark = pytest.mark.usefixtures("no_dispatch")


def test_the_agent_admin_refuses_an_unknown_hook_name_with_the_message(superuser, personas) -> None:
    config = {
        "provider": "scripted",
        "script": {"turns": [{"content": "x"}]},
        "hooks": {"class_hooks": ["no_such_hook"]},
    }

    response = logged_in(superuser).post(url(Agent, "add"), agent_form(personas, config))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["model_config_json"]
    assert any("unknown hook 'no_such_hook'" in error for error in errors)
    assert "unknown hook 'no_such_hook'" in page_text(response)
    assert not Agent.objects.filter(name="Invoice clerk").exists()


def test_the_agent_admin_refuses_an_unknown_builtin_tool(superuser, personas) -> None:
    data = agent_form(personas, scripted({"content": "x"}), builtin_tools='["rm_rf"]')

    response = logged_in(superuser).post(url(Agent, "add"), data)

    assert response.status_code == 200
    assert "builtin_tools" in response.context["adminform"].form.errors


def test_the_agent_admin_saves_a_valid_agent(superuser, personas) -> None:
    data = agent_form(personas, scripted({"content": "x"}), builtin_tools='["calculator"]')

    response = logged_in(superuser).post(url(Agent, "add"), data)

    assert response.status_code == 302
    assert Agent.objects.get(name="Invoice clerk").builtin_tools == ["calculator"]


API_KEY = "sk-typed-AGENT-key-77"


def test_the_agent_admin_stores_the_api_key_encrypted_and_never_shows_it(superuser, personas) -> None:
    openai = {"provider": "openai", "model": "gpt-test"}
    data = agent_form(personas, openai, secrets=json.dumps({"api_key": API_KEY}))

    assert logged_in(superuser).post(url(Agent, "add"), data).status_code == 302

    agent = Agent.objects.get(name="Invoice clerk")
    assert agent.secrets == {"api_key": API_KEY} and "api_key" not in agent.model_config_json
    page = page_text(logged_in(superuser).get(url(Agent, "change", agent.pk)))
    assert API_KEY not in page and "set (encrypted): api_key" in page


def test_the_agent_admin_refuses_an_api_key_in_the_model_config_without_echoing_it(
    superuser, personas
) -> None:
    config = {"provider": "openai", "model": "gpt-test", "api_key": API_KEY}

    response = logged_in(superuser).post(url(Agent, "add"), agent_form(personas, config))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["model_config_json"]
    assert any("put it in the agent's secrets" in error for error in errors)
    assert API_KEY not in response.content.decode()
    assert not Agent.objects.filter(name="Invoice clerk").exists()


def test_the_agent_admin_refuses_an_own_base_url_without_an_own_key(
    superuser, personas, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-platform-ENV-key")
    config = {"provider": "openai", "model": "gpt-test", "base_url": "https://collector.example.test/v1"}

    response = logged_in(superuser).post(url(Agent, "add"), agent_form(personas, config))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["secrets"]
    assert any('own "base_url" needs its own API key' in error for error in errors)
    assert "sk-platform-ENV-key" not in response.content.decode()
    assert not Agent.objects.filter(name="Invoice clerk").exists()


def test_the_agent_admin_refuses_to_drop_the_own_key_while_the_own_base_url_stays(
    superuser, personas
) -> None:
    config = {"provider": "openai", "model": "gpt-test", "base_url": "https://llm.example.test/v1"}
    agent = make_agent(
        personas.org, personas.operator, name="Invoice clerk", model_config_json=config,
        secrets={"api_key": API_KEY},
    )  # fmt: skip
    data = agent_form(personas, config, secrets=json.dumps({"other": "x"}))

    response = logged_in(superuser).post(url(Agent, "change", agent.pk), data)

    assert response.status_code == 200
    assert "secrets" in response.context["adminform"].form.errors
    assert Agent.objects.get(pk=agent.pk).secrets == {"api_key": API_KEY}


def test_the_agent_admin_saves_an_own_base_url_with_an_own_key(superuser, personas) -> None:
    config = {"provider": "openai", "model": "gpt-test", "base_url": "https://llm.example.test/v1"}
    data = agent_form(personas, config, secrets=json.dumps({"api_key": API_KEY}))

    assert logged_in(superuser).post(url(Agent, "add"), data).status_code == 302

    agent = Agent.objects.get(name="Invoice clerk")
    assert agent.model_config_json["base_url"] == "https://llm.example.test/v1"
    assert agent.secrets == {"api_key": API_KEY}


def test_a_view_only_staff_user_does_not_see_the_agents_key(personas) -> None:
    agent = make_agent(personas.org, personas.operator, secrets={"api_key": API_KEY})
    grant(personas.operator, "view_agent")

    response = logged_in(personas.operator).get(url(Agent, "change", agent.pk))

    assert response.status_code == 200
    assert API_KEY not in page_text(response) and "set (encrypted): api_key" in page_text(response)


DEEP_JSON = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("field", ["model_config_json", "builtin_tools", "secrets"])
def test_the_agent_admin_refuses_deeply_nested_json_as_a_field_error(superuser, personas, field: str) -> None:
    data = agent_form(personas, scripted({"content": "x"}), **{field: DEEP_JSON})

    response = logged_in(superuser).post(url(Agent, "add"), data)

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors[field]
    assert any("nested more than 100 levels deep" in error for error in errors)
    assert not Agent.objects.filter(name="Invoice clerk").exists()
