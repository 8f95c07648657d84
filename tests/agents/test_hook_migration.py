"""The data migration that turns ``model_config_json.hooks.class_hooks`` into declaration rows."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("agents", "0010_hook_declarations")]
AFTER = [("agents", "0011_hook_declarations_from_config")]

# A data migration's logic is the same on either database; it runs where deployments upgrade
# (PostgreSQL), once, rather than again on the embedded default, where each of these tests costs
# seconds of migrating the whole graph back and forth.
pytestmark = pytest.mark.postgres


@pytest.fixture
def migrator(transactional_db):
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    yield executor
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_existing_json_declarations_become_rows_in_order_and_leave_the_json(migrator) -> None:
    apps = migrator.loader.project_state(BEFORE).apps
    Organization, Agent = apps.get_model("agents", "Organization"), apps.get_model("agents", "Agent")
    User = apps.get_model("auth", "User")
    org = Organization.objects.create(name="Acme")
    owner = User.objects.create(username="oscar")
    declared = [
        "truncate_result",
        {
            "name": "deny_tools",
            "params": {"tools": "oa__x", "priority": 7, "timeout": 2.0, "on_error": "allow"},
        },
    ]
    keeps_other_keys = Agent.objects.create(
        organization=org,
        owner=owner,
        name="a",
        model_config_json={"provider": "scripted", "hooks": {"class_hooks": declared, "note": "kept"}},
    )
    unreadable = Agent.objects.create(
        organization=org,
        owner=owner,
        name="b",
        model_config_json={"hooks": {"class_hooks": "truncate_result"}},
    )
    plain = Agent.objects.create(
        organization=org, owner=owner, name="c", model_config_json={"provider": "scripted"}
    )

    migrator.loader.build_graph()
    migrator.migrate(AFTER)

    apps = migrator.loader.project_state(AFTER).apps
    Agent, HookDeclaration = apps.get_model("agents", "Agent"), apps.get_model("agents", "HookDeclaration")
    rows = list(
        HookDeclaration.objects.order_by("pk").values(
            "agent_id", "kind", "name", "params", "priority", "timeout", "on_error"
        )
    )
    assert rows == [
        {"agent_id": keeps_other_keys.pk, "kind": "class", "name": "truncate_result", "params": {},
         "priority": None, "timeout": None, "on_error": ""},
        {"agent_id": keeps_other_keys.pk, "kind": "class", "name": "deny_tools", "params": {"tools": "oa__x"},
         "priority": 7, "timeout": 2.0, "on_error": "allow"},
    ]  # fmt: skip
    assert Agent.objects.get(pk=keeps_other_keys.pk).model_config_json == {
        "provider": "scripted",
        "hooks": {"note": "kept"},
    }
    assert Agent.objects.get(pk=unreadable.pk).model_config_json == {
        "hooks": {"class_hooks": "truncate_result"}
    }
    assert Agent.objects.get(pk=plain.pk).model_config_json == {"provider": "scripted"}

    migrator.loader.build_graph()
    migrator.migrate(BEFORE)  # and back: the rows return to the JSON
    apps = migrator.loader.project_state(BEFORE).apps
    config = apps.get_model("agents", "Agent").objects.get(pk=keeps_other_keys.pk).model_config_json
    assert config["hooks"]["class_hooks"] == [
        {"name": "truncate_result", "params": {}},
        {
            "name": "deny_tools",
            "params": {"tools": "oa__x", "priority": 7, "timeout": 2.0, "on_error": "allow"},
        },
    ]
