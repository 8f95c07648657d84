"""An organisation always keeps an admin (issue 23, "Organisation admin": adam demoted himself, the
only admin, saw "success", then "not authorized"). The last active admin is neither demoted,
removed nor deactivated: in the admin (with the reason on the row), and in the services."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from fimone.errors import ServiceError
from tenancy.models import Membership, Organization, Role
from tenancy.roles import membership_remove, membership_role_change
from tests.admin_kit import logged_in, page_text, url
from tests.console.test_admin_errors import form_data
from tests.personas import make_user, with_roles

pytestmark = pytest.mark.django_db

LAST_ADMIN = "Acme would be left without an admin: it needs at least one active admin."


def admin_row(personas: Any) -> Membership:
    return Membership.objects.get(organization=personas.org, user=personas.admin, role=Role.ADMIN)


def post_members(user: Any, personas: Any, change: dict[str, str], client: Any = None) -> Any:
    """The organisation page as ``user`` sees it, posted back with ``change`` made to adam's row."""
    client = client or logged_in(user)
    page = client.get(url(Organization, "change", personas.org.pk))
    data = form_data(page)
    memberships = page.context["inline_admin_formsets"][0].formset
    [index] = [i for i, f in enumerate(memberships.forms) if f.instance == admin_row(personas)]
    data.update({f"{memberships.prefix}-{index}-{key}": value for key, value in change.items()})
    return client.post(url(Organization, "change", personas.org.pk), data)


def row_errors(response: Any, personas: Any) -> Any:
    formset = response.context["inline_admin_formsets"][0].formset
    [form] = [f for f in formset.forms if f.instance.pk == admin_row(personas).pk]
    return form.errors


def test_the_only_admin_cannot_demote_himself_and_is_told_why_on_the_role(governed) -> None:
    response = post_members(governed.admin, governed, {"role": Role.MEMBER})

    assert response.status_code == 200
    [message] = row_errors(response, governed)["role"]
    assert message.startswith(LAST_ADMIN) and "Make someone else an admin first." in message
    assert "was changed successfully" not in page_text(response)
    assert admin_row(governed).role == Role.ADMIN
    governed.admin.refresh_from_db()
    assert governed.admin.is_staff


def test_the_only_admin_cannot_remove_his_own_membership(governed) -> None:
    response = post_members(governed.admin, governed, {"DELETE": "on"})

    assert response.status_code == 200
    assert LAST_ADMIN in page_text(response)
    assert Membership.objects.filter(pk=admin_row(governed).pk).exists()


def test_an_inactive_second_admin_does_not_count(governed) -> None:
    make_user("ada", governed.org, Role.ADMIN, is_active=False)

    response = post_members(governed.admin, governed, {"role": Role.OPERATOR})

    assert response.status_code == 200 and admin_row(governed).role == Role.ADMIN


def test_with_another_admin_adam_may_step_down_and_is_told_where_he_now_stands(governed) -> None:
    ada = make_user("ada", governed.org, Role.ADMIN)
    with_roles(ada)

    client = logged_in(governed.admin)

    response = post_members(governed.admin, governed, {"role": Role.OPERATOR}, client)

    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert Membership.objects.get(organization=governed.org, user=governed.admin).role == Role.OPERATOR
    landing = client.get(response["Location"])
    assert landing.status_code == 200
    messages = [str(m) for m in landing.context["messages"]]
    assert any("Your roles in Acme changed: you are now operator." in m for m in messages), messages


def test_the_services_refuse_to_demote_or_remove_the_last_admin(governed) -> None:
    with pytest.raises(ServiceError) as demoted:
        membership_role_change(membership=admin_row(governed), role=Role.MEMBER)
    with pytest.raises(ServiceError) as removed:
        membership_remove(membership=admin_row(governed))

    assert demoted.value.code == removed.value.code == "conflict"
    assert demoted.value.field == "role" and LAST_ADMIN in demoted.value.message
    assert admin_row(governed).role == Role.ADMIN


def test_the_services_let_one_of_two_admins_go(governed) -> None:
    make_user("ada", governed.org, Role.ADMIN)

    membership_role_change(membership=admin_row(governed), role=Role.APPROVER)

    governed.admin.refresh_from_db()
    assert Membership.objects.get(organization=governed.org, user=governed.admin).role == Role.APPROVER
    assert not governed.admin.is_staff, "an approver does not use the admin"


def test_a_superuser_cannot_deactivate_or_delete_the_only_admin(superuser, governed) -> None:
    client = logged_in(superuser)
    user_url = url(get_user_model(), "change", governed.admin.pk)
    data = form_data(client.get(user_url))
    data.pop("is_active")

    response = client.post(user_url, data)
    delete_page = client.get(url(get_user_model(), "delete", governed.admin.pk))

    assert response.status_code == 200
    assert [LAST_ADMIN in e for e in response.context["adminform"].form.errors["is_active"]] == [True]
    governed.admin.refresh_from_db()
    assert governed.admin.is_active
    assert delete_page.status_code == 403
