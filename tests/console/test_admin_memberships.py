"""Memberships in the organisation admin: only an organisation admin grants roles, and joining an
organisation takes consent (#9 item 2)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tenancy.models import Membership, Organization
from tests.admin_kit import logged_in, url
from tests.console.admin_forms import grant, organization_form

# The services' dispatch of new runs to a worker is switched off (conftest.py).
pytestmark = pytest.mark.usefixtures("no_dispatch")


def _membership_inline(client: Client, org: Organization) -> Any:
    response = client.get(url(Organization, "change", org.pk))
    assert response.status_code == 200
    [formset] = [f for f in response.context["inline_admin_formsets"] if f.opts.model is Membership]
    return formset


def test_an_operator_cannot_grant_roles_in_their_organisation(personas) -> None:
    grant(
        personas.operator,
        "view_organization",
        "change_organization",
        "view_membership",
        "add_membership",
        "change_membership",
        "delete_membership",
    )
    formset = _membership_inline(logged_in(personas.operator), personas.org)
    assert not formset.has_add_permission and not formset.has_change_permission
    assert not formset.has_delete_permission


def test_an_organisation_admin_grants_roles(personas) -> None:
    grant(
        personas.admin,
        "view_organization",
        "change_organization",
        "view_membership",
        "add_membership",
        "change_membership",
    )
    formset = _membership_inline(logged_in(personas.admin), personas.org)
    assert formset.has_change_permission
    assert not formset.has_add_permission, "existing users join by accepting an invitation"


ORG_ADMIN_PERMISSIONS = (
    "view_organization",
    "change_organization",
    "view_membership",
    "add_membership",
    "change_membership",
    "delete_membership",
)


def test_it_refuses_an_organisation_admin_adding_an_existing_user_of_another_organisation(personas) -> None:
    grant(personas.admin, *ORG_ADMIN_PERMISSIONS)
    memberships = list(Membership.objects.filter(organization=personas.org).order_by("pk"))

    logged_in(personas.admin).post(
        url(Organization, "change", personas.org.pk),
        organization_form(personas.org, memberships, {"user": personas.stranger.pk, "role": "approver"}),
    )

    assert not Membership.objects.filter(user=personas.stranger, organization=personas.org).exists()


def test_an_organisation_admin_changes_a_members_role_but_not_whose_membership_it_is(personas) -> None:
    grant(personas.admin, *ORG_ADMIN_PERMISSIONS)
    memberships = list(Membership.objects.filter(organization=personas.org).order_by("pk"))
    data = organization_form(personas.org, memberships)
    row = next(n for n, m in enumerate(memberships) if m.user_id == personas.member.pk)
    data[f"memberships-{row}-role"] = "approver"
    data[f"memberships-{row}-user"] = personas.stranger.pk  # read-only: ignored

    response = logged_in(personas.admin).post(url(Organization, "change", personas.org.pk), data)

    assert response.status_code == 302
    changed = Membership.objects.get(pk=memberships[row].pk)
    assert (changed.user, changed.role) == (personas.member, "approver")
    assert not Membership.objects.filter(user=personas.stranger, organization=personas.org).exists()


def test_a_superuser_still_adds_a_member_directly(superuser, personas) -> None:
    memberships = list(Membership.objects.filter(organization=personas.org).order_by("pk"))

    response = logged_in(superuser).post(
        url(Organization, "change", personas.org.pk),
        organization_form(personas.org, memberships, {"user": personas.stranger.pk, "role": "member"}),
    )

    assert response.status_code == 302
    assert Membership.objects.filter(
        user=personas.stranger, organization=personas.org, role="member"
    ).exists()
