"""The agent's model configuration and built-in tools as form inputs (issue 23, "Operator")."""

from __future__ import annotations

import json

import pytest

from agents.models import Agent
from tests.admin_kit import logged_in, page_text, url
from tests.console.admin_forms import agent_form
from tests.console.test_admin_agents import API_KEY
from tests.personas import make_agent, scripted

# The services' dispatch of new runs to a worker is switched off (conftest.py).
pytestmark = pytest.mark.usefixtures("no_dispatch")


def config_inputs(**values: str) -> dict[str, str]:
    """The model configuration as the agent page's inputs post it."""
    data = {"model_config_json___shown": "1", "model_config_json__advanced": ""}
    data.update({f"model_config_json__{name}": value for name, value in values.items()})
    return data


def test_the_agent_page_shows_the_model_configuration_and_builtin_tools_as_inputs(
    superuser, personas
) -> None:
    agent = make_agent(personas.org, personas.operator, builtin_tools=["calculator"])

    page = page_text(logged_in(superuser).get(url(Agent, "change", agent.pk)))

    assert '<select name="model_config_json__provider"' in page
    assert 'name="model_config_json__model"' in page and 'name="model_config_json__temperature"' in page
    assert "OpenAI-compatible API" in page and "Advanced (JSON)" in page
    assert 'name="builtin_tools__pick" value="calculator" checked' in page
    assert (
        'name="builtin_tools__pick" value="current_time">' in page and "<strong>Calculator</strong>" in page
    )
    assert "AGENT_DELEGATION_MAX_DEPTH" not in page
    assert "Calls nest at most 3 deep (a limit this deployment sets)" in page


def test_the_operator_configures_an_openai_model_through_the_inputs(superuser, personas) -> None:
    data = agent_form(personas, {}, secrets=json.dumps({"api_key": API_KEY}))
    data.pop("model_config_json")
    inputs = {"provider": "openai", "model": "gpt-test", "base_url": "https://llm.example.test/v1",
              "temperature": "0.2", "max_tokens": "800", "timeout": "", "max_retries": "",
              "script": "x"}  # fmt: skip
    data.update(config_inputs(**inputs))
    data["model_config_json__advanced"] = '{"retry_max_delay": 30, "params": {"top_p": 0.9}}'
    data.pop("builtin_tools")
    data.update({"builtin_tools___shown": "1", "builtin_tools__pick": ["current_time", "calculator"]})

    response = logged_in(superuser).post(url(Agent, "add"), data)

    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    agent = Agent.objects.get(name="Invoice clerk")
    assert agent.model_config_json == {
        "provider": "openai",
        "model": "gpt-test",
        "base_url": "https://llm.example.test/v1",
        "params": {"top_p": 0.9, "temperature": 0.2, "max_tokens": 800},
        "retry_max_delay": 30,
    }, "the scripted provider's script is not read for an openai model"
    assert agent.builtin_tools == ["current_time", "calculator"]


def test_settings_without_an_input_stay_as_they_were(superuser, personas) -> None:
    config = {**scripted({"content": "Hi."}), "custom": {"keep": True}}
    agent = make_agent(personas.org, personas.operator, model_config_json=config)

    page = page_text(logged_in(superuser).get(url(Agent, "change", agent.pk)))

    assert '"custom": {' in page and '"turns"' in page  # the script in its input, the rest in Advanced
    data = agent_form(personas, config, name=agent.name)
    data.pop("model_config_json")
    data.update(config_inputs(provider="scripted", script=json.dumps(config["script"])))
    data["model_config_json__advanced"] = json.dumps({"custom": {"keep": True}})
    assert logged_in(superuser).post(url(Agent, "change", agent.pk), data).status_code == 302
    agent.refresh_from_db()
    assert agent.model_config_json == config


def test_a_mistyped_input_is_told_by_its_name(superuser, personas) -> None:
    data = agent_form(personas, {})
    data.pop("model_config_json")
    data.update(config_inputs(provider="openai", model="gpt-test", temperature="warm"))

    response = logged_in(superuser).post(url(Agent, "add"), data)

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["model_config_json"] == ["Temperature: enter a number"]


def test_an_api_key_typed_into_the_advanced_settings_is_refused_and_not_shown_back(
    superuser, personas
) -> None:
    data = agent_form(personas, {})
    data.pop("model_config_json")
    data.update(config_inputs(provider="openai", model="gpt-test"))
    data["model_config_json__advanced"] = json.dumps({"api_key": API_KEY})

    response = logged_in(superuser).post(url(Agent, "add"), data)

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["model_config_json"]
    assert any("put it in the agent's secrets" in error for error in errors)
    assert API_KEY not in response.content.decode()
