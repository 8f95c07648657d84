"""Identity providers in the admin: an organisation's admins configure theirs (the client secret is
write-only and stored encrypted), nobody else changes them, and the sign-in record is read-only."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from sso.models import IdentityProvider, SignInRecord
from tests.sso.kit import configure

pytestmark = pytest.mark.django_db

ADD = "/admin/sso/identityprovider/add/"


def admin_client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def form(org: Any, **fields: Any) -> dict[str, Any]:
    return {
        "organization": org.pk,
        "name": "Acme Okta",
        "slug": "acme",
        "issuer": "https://login.acme.test/oauth2/default",
        "client_id": "fim-one",
        "client_secret": "s3cret-value-123",
        "scopes": "openid email profile groups",
        "groups_claim": "groups",
        "group_roles": "fim-approvers = approver",
        "allowed_domains": "acme.test",
        "enabled": "on",
        "passwords_allowed": "on",
        **fields,
    }


def test_an_organisation_admin_configures_its_provider_and_never_sees_the_secret_again(
    governed, settings
) -> None:
    client = admin_client(governed.admin)

    response = client.post(ADD, form(governed.org))

    assert response.status_code == 302, response.content.decode()[-2000:]
    provider = IdentityProvider.objects.get()
    assert provider.client_secret == "s3cret-value-123"
    with connection.cursor() as cursor:
        cursor.execute("SELECT secrets FROM sso_identityprovider")
        assert "s3cret" not in cursor.fetchone()[0]  # encrypted at rest
    page = client.get(f"/admin/sso/identityprovider/{provider.pk}/change/").content.decode()
    assert "s3cret-value-123" not in page and "stored client secret" in page.lower()
    assert "http://testserver/sso/callback/" in page  # the redirect URI to register
    # In production it is SITE_URL's, whoever opened the page on whichever address.
    settings.SITE_URL_FROM_REQUEST, settings.SITE_URL = False, "https://hooks.example.test"
    page = client.get(f"/admin/sso/identityprovider/{provider.pk}/change/").content.decode()
    assert "https://hooks.example.test/sso/callback/" in page
    # In development, without SITE_URL, it is where the server was reached, on any host and port.
    settings.SITE_URL_FROM_REQUEST = True
    page = client.get(f"/admin/sso/identityprovider/{provider.pk}/change/", HTTP_HOST="127.0.0.1:8123")
    assert "http://127.0.0.1:8123/sso/callback/" in page.content.decode()
    # Saving again without a secret keeps the stored one.
    data = form(governed.org, client_secret="", name="Acme Okta (prod)")
    assert client.post(f"/admin/sso/identityprovider/{provider.pk}/change/", data).status_code == 302
    provider.refresh_from_db()
    assert (provider.name, provider.client_secret) == ("Acme Okta (prod)", "s3cret-value-123")
    history = client.get(f"/admin/sso/identityprovider/{provider.pk}/history/").content.decode()
    assert "s3cret" not in history


def test_a_bad_roles_line_is_a_field_error_naming_the_line(governed) -> None:
    response = admin_client(governed.admin).post(ADD, form(governed.org, group_roles="fim = boss"))

    assert response.status_code == 200
    assert "line 1: &#x27;boss&#x27; is no role" in response.content.decode()
    assert not IdentityProvider.objects.exists()


def test_a_provider_needs_its_client_secret(governed) -> None:
    response = admin_client(governed.admin).post(ADD, form(governed.org, client_secret=""))

    assert response.status_code == 200 and "client secret is needed" in response.content.decode()


def test_operators_and_auditors_read_and_other_organisations_see_nothing(governed) -> None:
    provider = configure(governed.org, type("P", (), {"issuer": "https://login.acme.test"})())
    change = f"/admin/sso/identityprovider/{provider.pk}/change/"

    assert admin_client(governed.operator).post(ADD, form(governed.org, slug="x")).status_code == 403
    for reader in (governed.operator, governed.auditor):
        page = admin_client(reader).get(change)
        assert page.status_code == 200
        assert 'name="client_secret"' not in page.content.decode()
        assert admin_client(reader).post(change, form(governed.org)).status_code == 403
    assert (
        admin_client(governed.other_operator).get(change).status_code == 302
    )  # not theirs: back to the index
    assert not IdentityProvider.objects.exclude(name="Example IdP").exists()


def test_the_sign_in_record_is_read_only_and_scoped(governed) -> None:
    provider = configure(governed.org, type("P", (), {"issuer": "https://login.acme.test"})())
    record = SignInRecord.objects.create(
        organization=governed.org, provider=provider, kind=SignInRecord.Kind.REFUSED, detail="wrong domain"
    )
    url = f"/admin/sso/signinrecord/{record.pk}/change/"

    assert admin_client(governed.auditor).get("/admin/sso/signinrecord/").status_code == 200
    assert "wrong domain" in admin_client(governed.auditor).get("/admin/sso/signinrecord/").content.decode()
    assert admin_client(governed.auditor).post(url, {}).status_code == 403
    assert (
        "wrong domain"
        not in admin_client(governed.other_operator).get("/admin/sso/signinrecord/").content.decode()
    )


def env_provider(org: Any, **fields: Any) -> dict[str, Any]:
    return {
        "issuer": "https://login.acme.test/realms/acme",
        "client_id": "fim-one",
        "client_secret": "from-the-environment",
        "organization": org.name,
        "name": "Acme SSO",
        "slug": "sso",
        "scopes": "openid email profile",
        "groups_claim": "groups",
        "group_roles": "fim-approvers=approver",
        "allowed_domains": "acme.test",
        "passwords_allowed": True,
        **fields,
    }


def test_the_server_wide_provider_comes_from_the_environment_and_is_read_only_in_the_admin(
    governed, settings
) -> None:
    from django.core.management import call_command

    settings.SSO_FROM_ENV = env_provider(governed.org)
    call_command("sso_provider_from_env", stdout=io.StringIO())
    settings.SSO_FROM_ENV = env_provider(governed.org, client_secret="rotated-secret", name="Acme SSO 2")
    call_command("sso_provider_from_env", stdout=io.StringIO())

    provider = IdentityProvider.objects.get()
    assert (provider.name, provider.client_secret, provider.from_environment) == (
        "Acme SSO 2",
        "rotated-secret",
        True,
    )
    assert provider.roles_by_group == {"fim-approvers": {"approver"}}
    change = f"/admin/sso/identityprovider/{provider.pk}/change/"
    assert admin_client(governed.admin).post(change, form(governed.org, slug="sso")).status_code == 403


def test_the_environment_cannot_take_over_a_provider_of_the_admin_or_name_no_organisation(
    governed, settings
) -> None:
    from django.core.management import call_command
    from django.core.management.base import CommandError

    configure(governed.org, type("P", (), {"issuer": "https://login.acme.test"})(), slug="sso")
    settings.SSO_FROM_ENV = env_provider(governed.org)
    with pytest.raises(CommandError, match="taken by a provider configured in the admin"):
        call_command("sso_provider_from_env")
    settings.SSO_FROM_ENV = env_provider(governed.org, organization="Nowhere", slug="other")
    with pytest.raises(CommandError, match="names no organisation"):
        call_command("sso_provider_from_env")


def test_a_new_issuer_takes_the_client_secret_entered_again(governed) -> None:
    client = admin_client(governed.admin)
    client.post(ADD, form(governed.org))
    provider = IdentityProvider.objects.get()
    change = f"/admin/sso/identityprovider/{provider.pk}/change/"

    moved = client.post(change, form(governed.org, issuer="https://evil.test/", client_secret=""))

    assert (
        moved.status_code == 200
        and "The issuer changed: enter the client secret again." in moved.content.decode()
    )
    provider.refresh_from_db()
    assert provider.issuer == "https://login.acme.test/oauth2/default"
    assert (
        client.post(
            change, form(governed.org, issuer="https://login2.acme.test/", client_secret="new")
        ).status_code
        == 302
    )
    provider.refresh_from_db()
    assert (provider.issuer, provider.client_secret) == ("https://login2.acme.test/", "new")


def test_the_sign_in_record_cannot_be_rewritten(governed) -> None:
    provider = configure(governed.org, type("P", (), {"issuer": "https://login.acme.test"})())
    record = SignInRecord.objects.create(
        organization=governed.org, provider=provider, kind=SignInRecord.Kind.SIGNED_IN
    )

    with pytest.raises(ValueError, match="append-only"):
        record.save()
    with pytest.raises(ValueError, match="append-only"):
        record.delete()
