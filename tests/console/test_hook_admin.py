"""The hook declarations inline on agents and organisations (a minimal editor)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agents.models import Agent, HookDeclaration
from tenancy.models import Membership, Organization
from tests.admin_kit import logged_in, page_text, url
from tests.console.admin_forms import agent_form, grant, hook_rows, organization_form
from tests.personas import make_agent, make_hook, scripted

SCRIPTS = Path(__file__).resolve().parent.parent / "hooks" / "scripts"
SECRET = "whsec-admin-never-shows-this"
AGENT_PERMISSIONS = ("view_agent", "change_agent", "view_hookdeclaration", "add_hookdeclaration",
                     "change_hookdeclaration", "delete_hookdeclaration")  # fmt: skip


def row(**fields: Any) -> dict[str, Any]:
    base = {"id": "", "name": "", "kind": "class", "point": "", "matcher": "", "priority": "", "timeout": "",
            "on_error": "", "mode": "enforce", "params": "{}", "secret": ""}  # fmt: skip
    return {**base, **{k: json.dumps(v) if k == "params" else v for k, v in fields.items()}}


def post_agent(user, personas, agent: Agent, *rows: dict[str, Any], initial: int = 0):
    data = agent_form(personas, agent.model_config_json, name=agent.name, **hook_rows(*rows, initial=initial))
    data["owner"] = agent.owner_id
    return logged_in(user).post(url(Agent, "change", agent.pk), data)


COMMAND = {"name": "freeze", "kind": "command", "point": "PreToolUse",
           "params": {"argv": [str(SCRIPTS / "block_payments.sh")]}}  # fmt: skip


def test_it_refuses_an_operator_adding_a_command_hook_without_the_code_hooks_permission(personas) -> None:
    agent = make_agent(personas.org, personas.operator)
    grant(personas.operator, *AGENT_PERMISSIONS)

    response = post_agent(personas.operator, personas, agent, row(**COMMAND))

    assert response.status_code == 200
    assert "changing one needs the" in page_text(response)
    assert not HookDeclaration.objects.exists()


def test_an_operator_with_the_code_hooks_permission_adds_a_command_hook(personas) -> None:
    agent = make_agent(personas.org, personas.operator)
    grant(personas.operator, *AGENT_PERMISSIONS, "manage_code_hooks")

    response = post_agent(personas.operator, personas, agent, row(**COMMAND))

    assert response.status_code == 302
    saved = HookDeclaration.objects.get()
    assert (saved.agent, saved.organization, saved.kind) == (agent, personas.org, "command")


CODE_HOOKS = {
    "command": COMMAND,
    "python": {"name": "tagger", "kind": "python", "point": "PreToolUse",
               "params": {"path": "tests.hooks.declared_examples.tag_reference"}},
    "http": {"name": "policy", "kind": "http", "point": "PostToolUse",
             "params": {"url": "https://hooks.example/policy"}},
}  # fmt: skip


@pytest.mark.parametrize("kind", list(CODE_HOOKS))
def test_a_code_hook_is_added_changed_and_deleted_only_by_a_permission_holder_and_each_change_is_recorded(
    personas, kind
) -> None:
    agent = make_agent(personas.org, personas.operator)
    grant(personas.operator, *AGENT_PERMISSIONS)
    grant(personas.admin, *AGENT_PERMISSIONS, "manage_code_hooks")
    fields = CODE_HOOKS[kind]
    added = row(**fields, secret="whsec-admin-0123456789" if kind == "http" else "")

    def by(user, *rows: dict[str, Any]):
        response = post_agent(user, personas, agent, *rows, initial=HookDeclaration.objects.count())
        if response.status_code == 200:
            assert "changing one needs the" in page_text(response)
        return response.status_code

    assert (by(personas.operator, added), by(personas.admin, added)) == (200, 302)
    hook = HookDeclaration.objects.get()
    changed = row(id=hook.pk, **fields, matcher="oa__*")
    assert (by(personas.operator, changed), by(personas.admin, changed)) == (200, 302)
    deleted = row(id=hook.pk, **fields, matcher="oa__*", DELETE="on")
    assert (by(personas.operator, deleted), by(personas.admin, deleted)) == (200, 302)

    assert not HookDeclaration.objects.exists()
    versions = list(HookDeclaration.history.filter(id=hook.pk).order_by("history_id"))
    assert [(v.history_type, v.history_user) for v in versions] == [
        ("+", personas.admin),
        ("~", personas.admin),
        ("-", personas.admin),
    ]
    changes = versions[1].diff_against(versions[0]).changes
    assert [(c.field, c.old, c.new) for c in changes] == [("matcher", "", "oa__*")]


def test_an_operator_adds_a_class_hook_without_the_code_permission_and_bad_params_are_named(personas) -> None:
    agent = make_agent(personas.org, personas.operator)
    grant(personas.operator, *AGENT_PERMISSIONS)

    bad = post_agent(personas.operator, personas, agent, row(name="deny_tools", params={"tools": 5}))
    good = post_agent(personas.operator, personas, agent, row(name="deny_tools", params={"tools": "oa__x"}))

    assert bad.status_code == 200 and "bad params" in page_text(bad)
    assert good.status_code == 302 and HookDeclaration.objects.get().params == {"tools": "oa__x"}


def test_the_http_secret_is_never_shown_and_blank_keeps_it(personas, superuser) -> None:
    agent = make_agent(personas.org, personas.operator)
    hook = make_hook(agent, "policy", kind="http", point="PostToolUse", params={"url": "https://x.example/"},
                     secret=SECRET)  # fmt: skip

    page = logged_in(superuser).get(url(Agent, "change", agent.pk))
    response = post_agent(
        superuser, personas, agent,
        row(id=hook.pk, name="policy", kind="http", point="PostToolUse", params={"url": "https://x.example/v2"}),
        initial=1,
    )  # fmt: skip

    assert SECRET not in page_text(page)
    assert response.status_code == 302
    hook.refresh_from_db()
    assert hook.secret == SECRET and hook.params == {"url": "https://x.example/v2"}


def test_the_json_form_saved_in_the_agent_admin_becomes_rows(personas, superuser) -> None:
    agent = make_agent(personas.org, personas.operator)
    config = scripted(
        {"content": "x"}, hooks=[{"name": "deny_tools", "params": {"tools": "oa__x", "priority": 4}}]
    )

    response = logged_in(superuser).post(
        url(Agent, "change", agent.pk), agent_form(personas, config, name=agent.name, owner=agent.owner_id)
    )

    assert response.status_code == 302
    agent.refresh_from_db()
    assert "hooks" not in agent.model_config_json
    assert list(HookDeclaration.objects.values_list("name", "params", "priority")) == [
        ("deny_tools", {"tools": "oa__x"}, 4)
    ]


def test_only_an_organisation_admin_edits_enforced_hooks(personas) -> None:
    perms = ("view_organization", "change_organization", "view_membership", "add_hookdeclaration",
             "change_hookdeclaration", "view_hookdeclaration", "delete_hookdeclaration")  # fmt: skip
    grant(personas.admin, *perms)
    grant(personas.operator, *perms)
    memberships = list(Membership.objects.filter(organization=personas.org).order_by("pk"))
    data = organization_form(personas.org, memberships)
    data.update(hook_rows(row(name="deny_tools", params={"tools": "oa__danger"})))

    logged_in(personas.operator).post(url(Organization, "change", personas.org.pk), data)
    assert not HookDeclaration.objects.exists(), "an operator cannot add an enforced hook"
    response = logged_in(personas.admin).post(url(Organization, "change", personas.org.pk), data)

    assert response.status_code == 302
    enforced = HookDeclaration.objects.get()
    assert enforced.is_enforced and enforced.organization == personas.org


def test_the_organisation_page_lists_only_its_enforced_hooks(personas, superuser) -> None:
    agent = make_agent(personas.org, personas.operator)
    make_hook(agent, "deny_tools", params={"tools": "agent_only"})
    make_hook(personas.org, "deny_tools", params={"tools": "org_wide"})
    make_hook(personas.other_org, "deny_tools", params={"tools": "globex_only"})

    text = page_text(logged_in(superuser).get(url(Organization, "change", personas.org.pk)))

    assert "org_wide" in text and "agent_only" not in text and "globex_only" not in text
