"""A connector's secrets are write-only in the admin: never shown, kept when left blank, replaced
when typed, refused without being echoed when they are not a JSON object."""

from __future__ import annotations

import pytest

from agents.models import Connector
from tests.admin_kit import logged_in, page_text, url
from tests.console.admin_forms import connector_form, grant
from tests.personas import make_http_connector
from tests.world import SECRET

# The services' dispatch of new runs to a worker is switched off (conftest.py).
pytestmark = pytest.mark.usefixtures("no_dispatch")


@pytest.fixture
def bare_connector(personas) -> Connector:
    """A connector with secrets and no actions (so its form posts without inline rows)."""
    return make_http_connector(
        personas.org, "https://erp.example.test", slug="erp", secrets={"headers": {"X-Api-Key": SECRET}}
    )


def test_the_connector_change_page_never_contains_the_secret(superuser, world) -> None:
    response = logged_in(superuser).get(url(Connector, "change", world["connector"].pk))

    text = page_text(response)
    assert response.status_code == 200
    assert SECRET not in text
    assert "leave blank to keep the current secrets" in text
    assert "set (encrypted)" in text


def test_saving_the_connector_with_blank_secrets_keeps_them(superuser, bare_connector) -> None:
    response = logged_in(superuser).post(
        url(Connector, "change", bare_connector.pk), connector_form(bare_connector, "")
    )

    assert response.status_code == 302
    assert Connector.objects.get(pk=bare_connector.pk).secrets == {"headers": {"X-Api-Key": SECRET}}


def test_saving_the_connector_with_new_secrets_replaces_them(superuser, bare_connector) -> None:
    new = '{"headers": {"X-Api-Key": "rotated"}}'

    response = logged_in(superuser).post(
        url(Connector, "change", bare_connector.pk), connector_form(bare_connector, new)
    )

    assert response.status_code == 302
    assert Connector.objects.get(pk=bare_connector.pk).secrets == {"headers": {"X-Api-Key": "rotated"}}


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ('{"headers": {"X-Api-Key": "typed-secret"', "not valid JSON"),
        ('["typed-secret"]', "must be a JSON object"),
    ],
)
def test_secrets_that_are_not_a_json_object_are_refused_without_echoing_them(
    superuser, bare_connector, typed, message
) -> None:
    response = logged_in(superuser).post(
        url(Connector, "change", bare_connector.pk), connector_form(bare_connector, typed)
    )

    assert response.status_code == 200
    assert any(message in error for error in response.context["adminform"].form.errors["secrets"])
    assert "typed-secret" not in page_text(response) and SECRET not in page_text(response)
    assert Connector.objects.get(pk=bare_connector.pk).secrets == {"headers": {"X-Api-Key": SECRET}}


def test_a_view_only_staff_user_does_not_see_the_secret_either(personas, world) -> None:
    grant(personas.operator, "view_connector")

    response = logged_in(personas.operator).get(url(Connector, "change", world["connector"].pk))

    assert response.status_code == 200
    assert SECRET not in page_text(response)
