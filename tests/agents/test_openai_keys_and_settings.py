"""The OpenAI-compatible provider's settings and keys: what it refuses to be configured with, an
agent's encrypted key, and where the platform's own key may and may not go."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents.llm.base import LLMConfigError
from agents.llm.factory import provider_for
from agents.llm.openai_compat import OpenAICompatibleProvider
from tests.agents.openai_kit import (
    API_KEY,
    MESSAGES,
    FakeChatServer,
    _no_openai_env,
    platform_server,
    server,
    text_reply,
)

__all__ = ["_no_openai_env", "platform_server", "server"]


# --- configuration -----------------------------------------------------------------------------


def test_it_needs_an_api_key() -> None:
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY"):
        OpenAICompatibleProvider.from_config({"provider": "openai", "model": "gpt-test"})


async def test_it_falls_back_to_the_environment_for_key_and_base_url(
    server: FakeChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    server.script(text_reply("ok"))

    built = provider_for({"provider": "openai", "model": "gpt-test"})
    response = await built.complete(messages=MESSAGES, tools=[])

    assert response.content == "ok"
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"
    assert "sk-from-env" not in repr(built)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"params": {"model": "other"}}, "params may not set model"),
        ({"max_retries": -1}, "max_retries must be a whole number"),
        ({"max_retries": True}, "max_retries must be a whole number"),
        ({"timeout": 0}, "timeout must be a number of seconds > 0"),
        ({"retry_base_delay": "fast"}, "retry_base_delay must be a number of seconds"),
        ({"base_url": 42}, "base_url must be a string"),
    ],
)
def test_it_rejects_unusable_settings(overrides: dict[str, Any], message: str) -> None:
    config = {"provider": "openai", "model": "gpt-test", "api_key": API_KEY, **overrides}

    with pytest.raises(LLMConfigError, match=message):
        OpenAICompatibleProvider.from_config(config)


# --- the agent's encrypted key ------------------------------------------------------------------


@pytest.mark.django_db
def test_a_run_authenticates_with_the_agents_encrypted_key(server: FakeChatServer, personas) -> None:
    from asgiref.sync import async_to_sync
    from django.db import connection

    from agents.engine.runner import run_execute
    from agents.models import RunStatus
    from agents.services import run_start
    from tests.personas import make_agent

    config = {"provider": "openai", "model": "gpt-test", "base_url": server.base_url, "max_retries": 0}
    secrets = {"api_key": API_KEY}
    agent = make_agent(personas.org, personas.operator, model_config_json=config, secrets=secrets)
    server.script(text_reply("Hello from the model."))
    run = run_start(agent=agent, user=personas.member, input="hi")

    assert async_to_sync(run_execute)(run.pk) == RunStatus.COMPLETED
    assert server.requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    with connection.cursor() as cursor:
        cursor.execute("SELECT model_config_json, secrets FROM agents_agent WHERE id = %s", [agent.pk])
        stored = " ".join(str(column) for column in cursor.fetchone())
    assert API_KEY not in stored  # neither in the config nor in clear in the secrets column


# --- where the platform's key goes --------------------------------------------------------------

PLATFORM_KEY = "sk-platform-ENV-key-4242"


@pytest.fixture
def platform_env(platform_server: FakeChatServer, monkeypatch: pytest.MonkeyPatch) -> FakeChatServer:
    """The platform's endpoint and key, with every other OPENAI_* setting the SDK reads."""
    monkeypatch.setenv("OPENAI_API_KEY", PLATFORM_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", platform_server.base_url)
    monkeypatch.setenv("OPENAI_ORG_ID", "org-platform")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-platform")
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", "X-Gateway-Token: gw-secret\nAuthorization: Bearer gw-auth")
    return platform_server


def everything_received(*servers: FakeChatServer) -> str:
    return json.dumps([[r.path, r.headers, r.body] for server in servers for r in server.requests])


def test_it_refuses_to_send_the_platforms_key_to_an_agents_own_base_url(
    server: FakeChatServer, platform_env: FakeChatServer
) -> None:
    config = {"provider": "openai", "model": "gpt-test", "base_url": server.base_url}

    with pytest.raises(LLMConfigError, match='own "base_url" needs its own API key'):
        provider_for(config)

    assert server.requests == [] and platform_env.requests == []


async def test_it_still_sends_the_platforms_key_to_the_platforms_base_url(
    server: FakeChatServer, platform_env: FakeChatServer
) -> None:
    platform_env.script(text_reply("ok"))

    response = await provider_for({"provider": "openai", "model": "gpt-test"}).complete(
        messages=MESSAGES, tools=[]
    )

    assert response.content == "ok"
    (request,) = platform_env.requests
    assert request.headers["authorization"] == f"Bearer {PLATFORM_KEY}"
    assert request.headers["openai-organization"] == "org-platform"  # the platform's own settings
    assert server.requests == []


async def test_it_sends_an_agents_own_key_and_nothing_of_the_platforms_to_its_own_base_url(
    server: FakeChatServer, platform_env: FakeChatServer
) -> None:
    server.script(text_reply("ok"))
    config = {"provider": "openai", "model": "gpt-test", "base_url": server.base_url, "api_key": API_KEY}

    response = await provider_for(config).complete(messages=MESSAGES, tools=[])

    assert response.content == "ok"
    (request,) = server.requests
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    received = everything_received(server)
    for platform_value in (PLATFORM_KEY, "gw-secret", "gw-auth", "org-platform", "proj-platform"):
        assert platform_value not in received
    assert platform_env.requests == []


async def test_an_agents_own_key_may_go_to_the_platforms_base_url(
    server: FakeChatServer, platform_env: FakeChatServer
) -> None:
    platform_env.script(text_reply("ok"))

    await provider_for({"provider": "openai", "model": "gpt-test", "api_key": API_KEY}).complete(
        messages=MESSAGES, tools=[]
    )

    assert platform_env.requests[0].headers["authorization"] == f"Bearer {API_KEY}"


@pytest.mark.django_db
def test_a_run_of_an_agent_with_its_own_base_url_and_no_key_fails_before_calling_anyone(
    server: FakeChatServer, platform_env: FakeChatServer, personas
) -> None:
    from asgiref.sync import async_to_sync

    from agents.engine.runner import run_execute
    from agents.models import Run, RunStatus
    from agents.services import run_start
    from tests.personas import make_agent

    # Saved without validation, as an old row or a bulk import would be.
    config = {"provider": "openai", "model": "gpt-test", "base_url": server.base_url, "max_retries": 0}
    agent = make_agent(personas.org, personas.operator, model_config_json=config)
    server.script(text_reply("I have your key now."))
    run = run_start(agent=agent, user=personas.member, input="hi")

    assert async_to_sync(run_execute)(run.pk) == RunStatus.FAILED
    assert server.requests == [] and platform_env.requests == []
    error = Run.objects.get(pk=run.pk).error
    assert 'own "base_url" needs its own API key' in error
    assert PLATFORM_KEY not in error
