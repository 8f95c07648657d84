"""Declarations saved when a hook was "enabled" or not keep their meaning as modes: enabled ones
enforce, disabled ones are off, their history included; and back again."""

from __future__ import annotations

import pytest

from tests.migration_kit import migrate
from tests.migration_kit import schema_back_to_the_latest as schema_back_to_the_latest

# A data migration's logic is the same on either database; it runs where deployments upgrade
# (PostgreSQL), once, rather than again on the embedded default, where each of these tests costs
# seconds of migrating the whole graph back and forth.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

BEFORE = [("agents", "0022_membership_manager")]
AFTER = [("agents", "0023_hook_declaration_mode")]


def test_enabled_hooks_enforce_and_disabled_ones_are_off_and_the_way_back_restores_them() -> None:
    apps = migrate(BEFORE)
    org = apps.get_model("agents", "Organization").objects.create(name="Acme")
    Declaration = apps.get_model("agents", "HookDeclaration")
    History = apps.get_model("agents", "HistoricalHookDeclaration")
    on = Declaration.objects.create(organization=org, name="deny_tools", params={"tools": "x"})
    off = Declaration.objects.create(organization=org, name="redact_result", enabled=False)
    when = "2026-11-01T00:00:00Z"
    History.objects.create(id=off.pk, organization=org, name="redact_result", enabled=False, created_at=when,
                           updated_at=when, history_date=when, history_type="~")  # fmt: skip

    apps = migrate(AFTER)
    Declaration = apps.get_model("agents", "HookDeclaration")
    History = apps.get_model("agents", "HistoricalHookDeclaration")

    assert Declaration.objects.get(pk=on.pk).mode == "enforce"
    assert Declaration.objects.get(pk=off.pk).mode == "off"
    assert list(History.objects.filter(id=off.pk).values_list("mode", flat=True)) == ["off"]

    apps = migrate(BEFORE)
    Declaration = apps.get_model("agents", "HookDeclaration")
    assert dict(Declaration.objects.values_list("pk", "enabled")) == {on.pk: True, off.pk: False}
