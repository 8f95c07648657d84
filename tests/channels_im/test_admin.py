"""The admin of IM channels: pages render, secrets stay write-only, staff users see their own
organisations only, and "Send a test card" reports what the platform answered."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib import admin
from django.test import Client
from django.utils import timezone

from agents.services import run_start
from approvals.models import ChannelConfig, ConfirmationRequest
from channels_im.models import ImIdentity
from tests import admin_kit
from tests.admin_kit import logged_in, page_text, url
from tests.channels_im.slack_fake import BOT_TOKEN, CHANNEL, SIGNING_SECRET, FakeSlack
from tests.personas import make_agent

SECRETS = {"bot_token": BOT_TOKEN, "signing_secret": SIGNING_SECRET}


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def configs(personas, slack: FakeSlack) -> dict[str, ChannelConfig]:
    """A Slack channel of Acme pointing at the fake, and a Feishu channel of Globex."""
    return {
        "acme": slack.channel_config(personas.org, name="Acme approvals", is_default=True),
        "globex": ChannelConfig.objects.create(
            organization=personas.other_org,
            kind="feishu",
            name="Globex approvals",
            secrets={"app_secret": "globex-app-secret-value"},
            settings_json={"chat_id": "oc_globex"},
        ),
    }


def grant(user: Any, *codenames: str) -> None:
    admin_kit.grant(user, *codenames, app_label=("channels_im", "approvals"))


def config_form(config: ChannelConfig, secrets: str, **changes: Any) -> dict[str, Any]:
    form = {
        "organization": config.organization_id,
        "kind": config.kind,
        "name": config.name,
        "active": "on" if config.active else "",
        "is_default": "on" if config.is_default else "",
        "secrets": secrets,
        "settings_json": json.dumps(config.settings_json),
    }
    return {**form, **changes}


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]]


# --- pages render ---------------------------------------------------------------------------------


def test_both_channel_models_are_registered() -> None:
    assert admin.site.is_registered(ChannelConfig) and admin.site.is_registered(ImIdentity)


@pytest.mark.parametrize("query", ["", "?kind__exact=slack", "?active__exact=1", "?q=Acme"])
def test_the_channel_changelist_renders_with_its_filters(superuser, configs, query: str) -> None:
    response = logged_in(superuser).get(url(ChannelConfig, "changelist") + query)

    assert response.status_code == 200
    assert "Acme approvals" in page_text(response)


def test_the_identity_changelist_and_pages_render(superuser, personas) -> None:
    identity = ImIdentity.objects.create(
        organization=personas.org,
        user=personas.approver,
        provider="slack",
        external_id="U0APRIL",
        display_name="April Chen",
    )
    client = logged_in(superuser)

    listing = client.get(url(ImIdentity, "changelist") + "?q=april")
    assert listing.status_code == 200 and "U0APRIL" in page_text(listing)
    assert client.get(url(ImIdentity, "change", identity.pk)).status_code == 200
    assert client.get(url(ImIdentity, "add")).status_code == 200


def test_the_change_page_shows_the_callback_url_but_never_a_secret(superuser, configs) -> None:
    config = configs["acme"]

    response = logged_in(superuser).get(url(ChannelConfig, "change", config.pk))

    text = page_text(response)
    assert response.status_code == 200
    assert f"http://127.0.0.1:8000/im/callback/{config.callback_key}/" in text
    assert "set (encrypted): bot_token, signing_secret" in text
    assert BOT_TOKEN not in text and SIGNING_SECRET not in text
    assert "leave blank to keep the current secrets" in text


def test_the_add_page_renders(superuser, configs) -> None:
    assert logged_in(superuser).get(url(ChannelConfig, "add")).status_code == 200


# --- write-only secrets ---------------------------------------------------------------------------


def test_saving_with_blank_secrets_keeps_them(superuser, configs) -> None:
    config = configs["acme"]

    response = logged_in(superuser).post(
        url(ChannelConfig, "change", config.pk), config_form(config, "", name="Renamed")
    )

    assert response.status_code == 302
    config.refresh_from_db()
    assert config.name == "Renamed" and config.secrets == SECRETS


def test_saving_with_new_secrets_replaces_them(superuser, configs) -> None:
    config = configs["acme"]
    typed = '{"bot_token": "xoxb-rotated", "signing_secret": "rotated"}'

    response = logged_in(superuser).post(url(ChannelConfig, "change", config.pk), config_form(config, typed))

    assert response.status_code == 302
    config.refresh_from_db()
    assert config.secrets == {"bot_token": "xoxb-rotated", "signing_secret": "rotated"}


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ('{"bot_token": "xoxb-typed-secret"', "not valid JSON"),
        ('["xoxb-typed-secret"]', "must be a JSON object"),
    ],
)
def test_secrets_that_are_not_a_json_object_are_refused_without_echoing_them(
    superuser, configs, typed: str, message: str
) -> None:
    config = configs["acme"]

    response = logged_in(superuser).post(url(ChannelConfig, "change", config.pk), config_form(config, typed))

    assert response.status_code == 200
    assert any(message in error for error in response.context["adminform"].form.errors["secrets"])
    text = page_text(response)
    assert "xoxb-typed-secret" not in text and BOT_TOKEN not in text and SIGNING_SECRET not in text
    config.refresh_from_db()
    assert config.secrets == SECRETS


def test_a_view_only_staff_user_does_not_see_the_secrets_either(personas, configs) -> None:
    grant(personas.operator, "view_channelconfig")

    response = logged_in(personas.operator).get(url(ChannelConfig, "change", configs["acme"].pk))

    assert response.status_code == 200
    text = page_text(response)
    assert BOT_TOKEN not in text and SIGNING_SECRET not in text


# --- organisation scope for staff users -----------------------------------------------------------


def test_a_staff_operator_of_acme_sees_and_assigns_only_acmes_channels(personas, configs) -> None:
    grant(personas.operator, "view_channelconfig", "change_channelconfig", "add_channelconfig")
    client = logged_in(personas.operator)

    listing = page_text(client.get(url(ChannelConfig, "changelist")))
    assert "Acme approvals" in listing and "Globex approvals" not in listing
    assert client.get(url(ChannelConfig, "change", configs["acme"].pk)).status_code == 200
    assert client.get(url(ChannelConfig, "change", configs["globex"].pk)).status_code == 302
    form = client.get(url(ChannelConfig, "add")).context["adminform"].form
    assert list(form.fields["organization"].queryset) == [personas.org]


def test_a_staff_user_without_a_role_in_the_organisation_sees_no_channels(personas, configs) -> None:
    personas.member.is_staff = True
    personas.member.save()
    grant(personas.member, "view_channelconfig", "view_imidentity")
    ImIdentity.objects.create(
        organization=personas.org, user=personas.approver, provider="slack", external_id="U0APRIL"
    )
    client = logged_in(personas.member)

    assert "Acme approvals" not in page_text(client.get(url(ChannelConfig, "changelist")))
    assert "U0APRIL" not in page_text(client.get(url(ImIdentity, "changelist")))


def test_an_auditor_reads_their_organisations_channels_and_changes_nothing(personas, configs) -> None:
    personas.auditor.is_staff = True
    personas.auditor.save()
    grant(personas.auditor, "view_channelconfig", "view_imidentity")
    client = logged_in(personas.auditor)

    listing = page_text(client.get(url(ChannelConfig, "changelist")))
    assert "Acme approvals" in listing and "Globex approvals" not in listing
    page = client.get(url(ChannelConfig, "change", configs["acme"].pk))
    assert page.status_code == 200 and BOT_TOKEN not in page_text(page)
    posted = client.post(url(ChannelConfig, "change", configs["acme"].pk), config_form(configs["acme"], ""))
    assert posted.status_code == 403


def test_a_staff_operator_sees_and_may_unlink_only_their_organisations_identities(personas) -> None:
    grant(personas.operator, "view_imidentity", "add_imidentity", "change_imidentity", "delete_imidentity")
    april = ImIdentity.objects.create(
        organization=personas.org, user=personas.approver, provider="slack", external_id="U0APRIL"
    )
    sam = ImIdentity.objects.create(
        organization=personas.other_org, user=personas.stranger, provider="slack", external_id="U0SAM"
    )
    client = logged_in(personas.operator)

    listing = page_text(client.get(url(ImIdentity, "changelist")))
    assert "U0APRIL" in listing and "U0SAM" not in listing
    assert client.get(url(ImIdentity, "change", sam.pk)).status_code == 302
    assert client.post(url(ImIdentity, "delete", sam.pk), {"post": "yes"}).status_code == 302
    assert ImIdentity.objects.filter(pk=sam.pk).exists(), "another organisation's identity stays"

    response = client.post(url(ImIdentity, "delete", april.pk), {"post": "yes"})

    assert response.status_code == 302 and not ImIdentity.objects.filter(pk=april.pk).exists()


# --- who may link an identity (#9 item 2) --------------------------------------------------------


def identity_form(personas, user: Any, external_id: str = "U0OSCAR") -> dict[str, Any]:
    return {
        "organization": personas.org.pk,
        "user": user.pk,
        "provider": "slack",
        "external_id": external_id,
        "display_name": "",
    }


def test_it_refuses_an_operator_mapping_their_own_im_id_to_an_approver(personas) -> None:
    grant(personas.operator, "view_imidentity", "add_imidentity", "change_imidentity")
    client = logged_in(personas.operator)

    response = client.post(url(ImIdentity, "add"), identity_form(personas, personas.approver))

    assert response.status_code == 403
    assert not ImIdentity.objects.exists()


def test_it_refuses_an_operator_changing_the_user_or_id_of_an_identity(personas) -> None:
    grant(personas.operator, "view_imidentity", "add_imidentity", "change_imidentity")
    identity = ImIdentity.objects.create(
        organization=personas.org, user=personas.approver, provider="slack", external_id="U0APRIL"
    )
    client = logged_in(personas.operator)
    assert 'name="_save"' not in page_text(client.get(url(ImIdentity, "change", identity.pk)))

    response = client.post(
        url(ImIdentity, "change", identity.pk), identity_form(personas, personas.approver, "U0OSCAR")
    )

    assert response.status_code == 403
    identity.refresh_from_db()
    assert identity.external_id == "U0APRIL" and identity.user == personas.approver


def test_a_superuser_links_an_identity_directly_and_is_recorded_as_the_linker(superuser, personas) -> None:
    response = logged_in(superuser).post(url(ImIdentity, "add"), identity_form(personas, personas.approver))

    assert response.status_code == 302
    identity = ImIdentity.objects.get(external_id="U0OSCAR")
    assert identity.user == personas.approver and identity.organization == personas.org
    assert identity.linked_by == superuser and identity.linked_at is not None


def test_even_a_superuser_links_identities_only_to_members_of_the_organisation(superuser, personas) -> None:
    response = logged_in(superuser).post(url(ImIdentity, "add"), identity_form(personas, personas.stranger))

    assert response.status_code == 200
    assert "link identities only to members of the organisation" in page_text(response)
    assert not ImIdentity.objects.exists()


# --- "Send a test card" ---------------------------------------------------------------------------


def send_test_card(client: Client, *configs: ChannelConfig) -> Any:
    return client.post(
        url(ChannelConfig, "changelist"),
        {"action": "send_test_card", "_selected_action": [config.pk for config in configs]},
        follow=True,
    )


def test_the_test_card_action_posts_to_slack_and_reports_success(
    superuser, configs, slack: FakeSlack
) -> None:
    response = send_test_card(logged_in(superuser), configs["acme"])

    [call] = slack.calls("chat.postMessage")
    assert call.body["channel"] == CHANNEL and "test message" in call.body["text"]
    [message] = messages_of(response)
    assert message.startswith("Test card sent to Acme approvals (Slack) (message C0APPROVALS:")


def test_the_test_card_action_reports_why_a_broken_configuration_fails(
    superuser, personas, slack: FakeSlack
) -> None:
    revoked = slack.channel_config(
        personas.org, name="Revoked", secrets={"bot_token": "xoxb-revoked", "signing_secret": "s"}
    )
    incomplete = slack.channel_config(personas.org, name="Incomplete", settings_json={})

    response = send_test_card(logged_in(superuser), revoked, incomplete)

    assert messages_of(response) == [
        "Test card to Revoked (Slack) failed: Slack chat.postMessage failed: invalid_auth (HTTP 200)",
        "Test card to Incomplete (Slack) failed: Slack channel 'Incomplete' is misconfigured: settings need "
        '"channel" (a channel id such as C0123ABCD)',
    ]
    assert "xoxb-revoked" not in page_text(response)


def test_the_test_card_action_needs_the_change_permission(personas, configs, slack: FakeSlack) -> None:
    grant(personas.operator, "view_channelconfig")

    send_test_card(logged_in(personas.operator), configs["acme"])

    assert slack.requests == []


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ('{"bot_token": "xoxb-only"}', "signing_secret"),
        ('{"signing_secret": "only"}', "bot_token"),
    ],
)
def test_a_slack_channel_without_what_verification_needs_is_refused(
    superuser, configs, typed: str, message: str
) -> None:
    config = configs["acme"]

    response = logged_in(superuser).post(url(ChannelConfig, "change", config.pk), config_form(config, typed))

    assert response.status_code == 200
    assert message in " ".join(response.context["adminform"].form.non_field_errors())
    config.refresh_from_db()
    assert config.secrets == SECRETS


def test_a_feishu_channel_without_an_encrypt_key_is_refused(superuser, personas) -> None:
    """Without the Encrypt Key, Feishu callbacks carry no signature: nothing could be verified."""
    data = {
        "organization": personas.org.pk,
        "kind": "feishu",
        "name": "Feishu",
        "active": "on",
        "secrets": json.dumps({"app_id": "cli_1", "app_secret": "s", "verification_token": "t"}),
        "settings_json": json.dumps({"chat_id": "oc_1"}),
    }
    response = logged_in(superuser).post(url(ChannelConfig, "add"), data)

    assert response.status_code == 200
    assert "secrets.encrypt_key" in " ".join(response.context["adminform"].form.non_field_errors())
    assert not ChannelConfig.objects.filter(kind="feishu").exists()


# --- history --------------------------------------------------------------------------------------


def _card_sent_through(personas: Any, config: ChannelConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    """A confirmation request whose card went to ``config``."""
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    agent = make_agent(personas.org, personas.operator)
    run = run_start(agent=agent, user=personas.member, input="pay")
    ConfirmationRequest.objects.create(
        organization=personas.org,
        agent=agent,
        requested_by=personas.member,
        run=run,
        tool_call_id="call-1",
        tool_name="oa__purchase_pay",
        tool_args={},
        args_sha256="0" * 64,
        channel=config.kind,
        channel_config=config,
        expires_at=timezone.now() + dt.timedelta(minutes=10),
    )


def test_it_refuses_to_delete_a_channel_that_carried_approval_cards(
    superuser, personas, configs, monkeypatch
) -> None:
    used = configs["acme"]
    _card_sent_through(personas, used, monkeypatch)
    client = logged_in(superuser)

    assert client.get(url(ChannelConfig, "delete", used.pk)).status_code == 403
    assert client.post(url(ChannelConfig, "delete", used.pk), {"post": "yes"}).status_code == 403
    assert url(ChannelConfig, "delete", used.pk) not in page_text(
        client.get(url(ChannelConfig, "change", used.pk))
    )
    bulk = client.post(
        url(ChannelConfig, "changelist"),
        {"action": "delete_selected", "_selected_action": [used.pk], "post": "yes"},
    )

    assert bulk.status_code == 200 and "Cannot delete" in page_text(bulk)
    assert ChannelConfig.objects.filter(pk=used.pk).exists()
    assert ConfirmationRequest.objects.filter(channel_config=used).count() == 1


def test_a_channel_that_never_carried_a_card_can_still_be_deleted(superuser, configs) -> None:
    unused = configs["globex"]

    response = logged_in(superuser).post(url(ChannelConfig, "delete", unused.pk), {"post": "yes"})

    assert response.status_code == 302
    assert not ChannelConfig.objects.filter(pk=unused.pk).exists()
