"""Secrets stay home (docs/design.md §1.14): a stored secret is bound to the origin (scheme, host and port)
of the address it was entered for. Changing a connector's or an agent's ``base_url``, an http
hook's ``url`` or a channel's provider address to another origin clears the stored secrets,
unless the same change enters them again; the admin says so. Every writer obeys: the admin, the
services, a plain ``save()`` and ``QuerySet.update()``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from agents.admin.bound_secrets import SECRETS_BOUND_HELP
from agents.hook_declarations import HookFileError, hook_declaration_save, hooks_import
from agents.llm.base import LLMConfigError
from agents.llm.factory import provider_for
from agents.models import SECRETS_CLEARED, Agent, Connector, HookDeclaration
from agents.tools.http import HttpActionTool
from approvals.models import ChannelConfig
from tests.admin_kit import logged_in, page_text, url
from tests.console.admin_forms import agent_form, connector_form
from tests.fimone.test_egress import Service
from tests.personas import Personas, make_action, make_agent, make_hook, make_http_connector, with_roles

OA_SECRETS = {"headers": {"Authorization": "Bearer oa-secret-token-42"}}
AGENT_KEY = "sk-agent-own-key-0123456789"
HOOK_SECRET = "whsec-correct-horse-battery"
SLACK_SECRETS = {"bot_token": "xoxb-acme-bot-token", "signing_secret": "acme-signing-secret"}


def reloaded(instance: Any) -> Any:
    """The row as any writer loads it."""
    return type(instance).objects.get(pk=instance.pk)


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]]


@pytest.fixture
def two_services() -> Iterator[tuple[Service, Service]]:
    """The connector's service and the operator's own server: two origins (their ports differ)."""
    services = (Service(), Service())
    threads = [threading.Thread(target=s.server.serve_forever, args=(0.01,), daemon=True) for s in services]
    for thread in threads:
        thread.start()
    yield services
    for running in services:
        running.server.shutdown()
        running.server.server_close()


# --- HTTP connectors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "moved_to",
    [
        "https://collector.example.test/api/",  # another host
        "http://oa.example.test/api/",  # another scheme
        "https://oa.example.test:8443/api/",  # another port
    ],
)
def test_moving_a_connectors_base_url_to_another_origin_clears_its_secrets(
    personas: Personas, moved_to: str
) -> None:
    connector = reloaded(
        make_http_connector(personas.org, "https://oa.example.test/api/", secrets=OA_SECRETS)
    )

    connector.base_url = moved_to
    connector.save()

    assert connector.secrets_cleared and reloaded(connector).secrets is None


@pytest.mark.parametrize("same_origin", ["https://oa.example.test/v2/", "https://OA.example.test:443/api/"])
def test_a_base_url_at_the_same_origin_keeps_the_secrets(personas: Personas, same_origin: str) -> None:
    connector = reloaded(
        make_http_connector(personas.org, "https://oa.example.test/api/", secrets=OA_SECRETS)
    )

    connector.base_url = same_origin
    connector.save()

    assert not connector.secrets_cleared and reloaded(connector).secrets == OA_SECRETS


def test_secrets_entered_again_with_the_new_base_url_are_kept(personas: Personas) -> None:
    first = reloaded(make_http_connector(personas.org, "https://oa.example.test/", secrets=OA_SECRETS))
    second = reloaded(
        make_http_connector(personas.org, "https://erp.example.test/", slug="erp", secrets=OA_SECRETS)
    )

    first.base_url, first.secrets = "https://oa2.example.test/", {"headers": {"Authorization": "Bearer new"}}
    first.save()
    second.base_url, second.secrets_entered = "https://erp2.example.test/", True  # typed again, same value
    second.save()

    assert reloaded(first).secrets == {"headers": {"Authorization": "Bearer new"}}
    assert reloaded(second).secrets == OA_SECRETS


def test_an_operator_moving_the_base_url_in_the_admin_gets_no_stored_secret_and_is_told(
    personas: Personas, two_services: tuple[Service, Service]
) -> None:
    service, operators_server = two_services
    connector = make_http_connector(
        personas.org, f"http://127.0.0.1:{service.port}/api/", secrets=OA_SECRETS, timeout_seconds=3
    )
    action = make_action(connector, "purchase_list", path="purchases")
    with_roles(personas.operator)
    client = logged_in(personas.operator)
    form = {**connector_form(connector, ""), "base_url": f"http://127.0.0.1:{operators_server.port}/api/"}

    page = client.get(url(Connector, "change", connector.pk))
    response = client.post(url(Connector, "change", connector.pk), form, follow=True)
    asyncio.run(HttpActionTool(action=reloaded(action)).run({}))

    assert "clears the stored secrets unless you enter them again" in page_text(page)
    assert any("secrets cleared because the address changed" in m for m in messages_of(response))
    assert reloaded(connector).secrets is None
    assert [seen["authorization"] for seen in operators_server.seen] == [""]
    assert service.seen == []


def test_the_admin_keeps_secrets_typed_again_with_the_new_base_url(superuser, personas: Personas) -> None:
    connector = make_http_connector(personas.org, "https://oa.example.test/", secrets=OA_SECRETS)
    form = {
        **connector_form(connector, json.dumps(OA_SECRETS)),
        "base_url": "https://oa-new.example.test/",
    }

    response = logged_in(superuser).post(url(Connector, "change", connector.pk), form, follow=True)

    assert not any("secrets cleared" in m for m in messages_of(response))
    assert reloaded(connector).secrets == OA_SECRETS


def test_a_queryset_update_of_the_base_url_clears_the_secrets_of_the_rows_it_moves(
    personas: Personas,
) -> None:
    moved = make_http_connector(personas.org, "https://oa.example.test/", secrets=OA_SECRETS)
    kept = make_http_connector(personas.org, "https://erp.example.test/x/", slug="erp", secrets=OA_SECRETS)
    entered = make_http_connector(personas.org, "https://crm.example.test/", slug="crm", secrets=OA_SECRETS)

    Connector.objects.filter(pk=moved.pk).update(base_url="https://collector.example.test/")
    Connector.objects.filter(pk=kept.pk).update(base_url="https://erp.example.test/y/")
    Connector.objects.filter(pk=entered.pk).update(base_url="https://crm2.example.test/", secrets=OA_SECRETS)

    assert reloaded(moved).secrets is None
    assert reloaded(kept).secrets == OA_SECRETS and reloaded(entered).secrets == OA_SECRETS


def test_a_database_connectors_dsn_is_its_own_address(personas: Personas) -> None:
    dsn = {"dsn": "postgres://app:pw@db.internal/shop"}
    connector = reloaded(
        Connector.objects.create(
            organization=personas.org, slug="ledger", name="Ledger", kind=Connector.Kind.DATABASE, secrets=dsn
        )
    )

    connector.base_url = "https://collector.example.test/"  # not where a DSN goes
    connector.save()
    kept = reloaded(connector)
    kept.kind = Connector.Kind.HTTP  # now the base URL is where the secrets would go
    kept.save()

    assert reloaded(connector).secrets is None and not connector.secrets_cleared and kept.secrets_cleared


# --- agents' own keys --------------------------------------------------------------------------------


def own_endpoint(base_url: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {"provider": "openai", "model": "gpt-test"}
    if base_url is not None:
        config["base_url"] = base_url
    return config


def test_an_agents_key_does_not_follow_its_base_url_to_another_origin(personas: Personas) -> None:
    agent = reloaded(
        make_agent(
            personas.org,
            personas.operator,
            model_config_json=own_endpoint("https://llm.example.test/v1"),
            secrets={"api_key": AGENT_KEY},
        )
    )

    agent.model_config_json = own_endpoint("https://collector.example.test/v1")
    agent.save()  # any writer, without the form's checks

    assert reloaded(agent).secrets is None
    with pytest.raises(LLMConfigError, match='own "base_url" needs its own API key'):
        provider_for(reloaded(agent).provider_config())  # the run fails before any request


def test_an_agents_key_for_the_platforms_endpoint_does_not_follow_a_base_url_added_later(
    personas: Personas,
) -> None:
    agent = reloaded(
        make_agent(
            personas.org,
            personas.operator,
            model_config_json=own_endpoint(None),
            secrets={"api_key": AGENT_KEY},
        )
    )
    same = reloaded(
        make_agent(
            personas.org,
            personas.operator,
            name="Same origin",
            model_config_json=own_endpoint("https://llm.example.test/v1"),
            secrets={"api_key": AGENT_KEY},
        )
    )

    agent.model_config_json = own_endpoint("https://collector.example.test/v1")
    agent.save()
    same.model_config_json = own_endpoint("https://llm.example.test/v2")
    same.save()

    assert reloaded(agent).secrets is None and reloaded(same).secrets == {"api_key": AGENT_KEY}


def test_the_agent_admin_refuses_a_moved_base_url_without_the_key_and_says_why(superuser, personas) -> None:
    agent = make_agent(
        personas.org,
        personas.operator,
        name="Invoice clerk",
        model_config_json=own_endpoint("https://llm.example.test/v1"),
        secrets={"api_key": AGENT_KEY},
    )
    moved = own_endpoint("https://collector.example.test/v1")
    client = logged_in(superuser)

    page = client.get(url(Agent, "change", agent.pk))
    refused = client.post(url(Agent, "change", agent.pk), agent_form(personas, moved))
    entered = client.post(
        url(Agent, "change", agent.pk),
        agent_form(personas, moved, secrets=json.dumps({"api_key": "sk-new-0123"})),
    )

    assert "the model config's base_url" in page_text(page)
    assert refused.status_code == 200
    errors = refused.context["adminform"].form.errors["secrets"]
    assert errors[0] == SECRETS_CLEARED and any("needs its own API key" in e for e in errors)
    assert entered.status_code == 302 and reloaded(agent).secrets == {"api_key": "sk-new-0123"}


def test_an_agent_moved_back_to_the_platforms_endpoint_loses_its_key_and_the_admin_says_so(
    superuser, personas
) -> None:
    agent = make_agent(
        personas.org,
        personas.operator,
        name="Invoice clerk",
        model_config_json=own_endpoint("https://llm.example.test/v1"),
        secrets={"api_key": AGENT_KEY},
    )

    response = logged_in(superuser).post(
        url(Agent, "change", agent.pk), agent_form(personas, own_endpoint(None)), follow=True
    )

    assert any("secrets cleared because the address changed" in m for m in messages_of(response))
    assert reloaded(agent).secrets is None


# --- http hooks ----------------------------------------------------------------------------------------


def http_hook(personas: Personas) -> HookDeclaration:
    agent = make_agent(personas.org, personas.operator)
    return make_hook(
        agent,
        "policy",
        kind="http",
        point="PostToolUse",
        params={"url": "https://hooks.example.test/policy"},
        secret=HOOK_SECRET,
    )


def test_moving_an_http_hooks_url_to_another_origin_needs_its_secret_again(personas: Personas) -> None:
    hook = http_hook(personas)
    refused, saved, same = reloaded(hook), reloaded(hook), reloaded(hook)

    refused.params = {"url": "https://collector.example.test/policy"}
    with pytest.raises(ValidationError) as error:
        hook_declaration_save(declaration=refused, actor=None)
    stored_after_refusal = reloaded(hook).secret
    saved.params = {"url": "https://collector.example.test/policy"}
    saved.save()  # any writer, without the checks: the hook then fails closed, the secret stays home
    moved_secret = reloaded(hook).secret
    same.params = {"url": "https://hooks.example.test/v2/policy"}
    same.save()

    assert SECRETS_CLEARED in error.value.message_dict["secret"]
    assert stored_after_refusal == HOOK_SECRET and moved_secret is None
    assert reloaded(hook).params["url"].endswith("/v2/policy")


def test_a_hooks_file_moving_an_http_hooks_url_must_give_its_secret_again(personas: Personas) -> None:
    hook = http_hook(personas)

    def hooks_file(url: str, secret: str | None = None) -> str:
        item = {"name": "policy", "kind": "http", "point": "PostToolUse", "params": {"url": url}}
        if secret is not None:
            item["secret"] = secret
        return json.dumps({"agent": hook.agent_id, "hooks": [item]})

    with pytest.raises(HookFileError, match="give 'secret:' again"):
        hooks_import(text=hooks_file("https://collector.example.test/policy"))
    hooks_import(text=hooks_file("https://hooks.example.test/v2"))
    kept = HookDeclaration.objects.get(agent_id=hook.agent_id).secret
    hooks_import(text=hooks_file("https://collector.example.test/policy", secret="whsec-typed-again-0123"))

    assert kept == HOOK_SECRET
    assert HookDeclaration.objects.get(agent_id=hook.agent_id).secret == "whsec-typed-again-0123"


def test_the_hook_editor_says_a_moved_url_needs_the_secret_again(superuser, personas: Personas) -> None:
    from tests.console.admin_forms import hook_rows

    hook = http_hook(personas)
    agent = hook.agent
    row = {
        "id": hook.pk,
        "hook": "own:http",
        "name": "policy",
        "kind": "http",
        "point": "PostToolUse",
        "params": json.dumps({"url": "https://collector.example.test/policy"}),
        "mode": "enforce",
    }
    data = agent_form(personas, agent.model_config_json, name=agent.name, **hook_rows(row, initial=1))

    response = logged_in(superuser).post(url(Agent, "change", agent.pk), data)

    assert response.status_code == 200 and SECRETS_CLEARED in page_text(response)
    assert reloaded(hook).secret == HOOK_SECRET


# --- IM channels -----------------------------------------------------------------------------------------


def slack_channel(personas: Personas) -> ChannelConfig:
    return ChannelConfig.objects.create(
        organization=personas.org,
        kind="slack",
        name="Acme approvals",
        secrets=SLACK_SECRETS,
        settings_json={"channel": "C0ACME"},
    )


def test_moving_a_channels_provider_address_clears_its_secrets(personas: Personas) -> None:
    channel = slack_channel(personas)
    refused, saved, same = reloaded(channel), reloaded(channel), reloaded(channel)

    refused.settings_json = {"channel": "C0ACME", "api_url": "https://collector.example.test/api/"}
    with pytest.raises(ValidationError) as error:
        refused.full_clean()
    same.settings_json = {
        "channel": "C0OTHER",
        "api_url": "https://slack.com/api/",
    }  # the default, written out
    same.full_clean()
    same.save()
    saved.settings_json = {"channel": "C0ACME", "api_url": "https://collector.example.test/api/"}
    saved.save()

    assert SECRETS_CLEARED in error.value.message_dict["secrets"]
    assert same.secrets == SLACK_SECRETS and reloaded(channel).secrets is None


def test_the_channel_admin_keeps_secrets_typed_again_with_the_new_address(superuser, personas) -> None:
    from tests.channels_im.test_admin import config_form

    channel = slack_channel(personas)
    moved = json.dumps({"channel": "C0ACME", "api_url": "https://slack.example.test/api/"})

    page = logged_in(superuser).get(url(ChannelConfig, "change", channel.pk))
    refused = logged_in(superuser).post(
        url(ChannelConfig, "change", channel.pk), config_form(channel, "", settings_json=moved)
    )
    entered = logged_in(superuser).post(
        url(ChannelConfig, "change", channel.pk),
        config_form(channel, json.dumps(SLACK_SECRETS), settings_json=moved),
    )

    assert SECRETS_BOUND_HELP.split("(")[0].strip() in page_text(page)
    assert refused.status_code == 200 and SECRETS_CLEARED in page_text(refused)
    assert entered.status_code == 302 and reloaded(channel).secrets == SLACK_SECRETS
