"""The role groups' permissions, composed from what each app declares on its AppConfig."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured

from tenancy.models import Role
from tenancy.roles import role_permissions


def test_each_role_builds_on_the_one_below_and_an_app_names_only_its_own_models() -> None:
    composed = role_permissions()

    auditor, operator, admin = composed[Role.AUDITOR], composed[Role.OPERATOR], composed[Role.ADMIN]
    assert set(auditor) <= set(operator) <= set(admin)
    assert all(actions == ("view",) for actions in auditor.values())
    # Organisations are the admin's to change, channel configurations the operator's.
    assert operator["tenancy.organization"] == ("view",)
    assert admin["tenancy.organization"] == ("view", "change")
    assert operator["approvals.channelconfig"] == ("view", "add", "change", "delete")


def test_those_who_configure_are_given_no_way_to_decide() -> None:
    composed = role_permissions()

    for role in (Role.AUDITOR, Role.OPERATOR, Role.ADMIN):
        assert composed[role]["approvals.confirmationrequest"] == ("view",)
    assert composed[Role.APPROVER] == {
        "approvals.confirmationrequest": ("view",),
        "approvals.confirmationevent": ("view",),
    }


def test_an_app_declaring_another_apps_model_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    workflows = apps.get_app_config("workflows")
    monkeypatch.setattr(
        workflows, "role_permissions", {"operator": {"agents.agent": ("view", "delete")}}, raising=False
    )

    with pytest.raises(ImproperlyConfigured, match=r"agents\.agent, another app.s model"):
        role_permissions()


def test_an_app_declaring_an_unknown_role_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    evals = apps.get_app_config("evals")
    monkeypatch.setattr(evals, "role_permissions", {"owner": {"evals.evalset": ("view",)}}, raising=False)

    with pytest.raises(ImproperlyConfigured, match="unknown role 'owner'"):
        role_permissions()
