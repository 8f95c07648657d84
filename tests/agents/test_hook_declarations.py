"""Hook declarations: validated rows on agents and organisations, the code-hooks permission, the
organisation-enforced ordering rule, the chain a run keeps, and the JSON form still accepted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from agents.checks import hook_chain_of
from agents.hook_declarations import (
    hook_declaration_delete,
    hook_declaration_save,
    hook_declarations_adopt_config,
)
from agents.models import HookDeclaration, RunStatus
from agents.services import run_start
from approvals.models import ConfirmationRequest, ConfirmationStatus
from fimone.errors import ServiceError
from hooks import HookContext, HookResult, PreToolUseHook
from hooks.catalog import register_hook, registry_from_chain
from tests.admin_kit import grant
from tests.agents.engine_kit import Harness, RecordingTool
from tests.approvals.kit import set_policy
from tests.personas import make_agent, make_hook, scripted

SCRIPTS = Path(__file__).resolve().parent.parent / "hooks" / "scripts"
PAY_SCHEMA = {
    "type": "object",
    "properties": {"purchase_id": {"type": "string"}, "amount": {"type": "number"}},
}


def script(name: str, *args: str) -> dict[str, Any]:
    return {"argv": [str(SCRIPTS / name), *args]}


def paying(personas, amount: float, *, org=None, owner=None, hooks=None):
    config = scripted(
        {
            "tool_calls": [
                {"name": "oa__purchase_pay", "arguments": {"purchase_id": "PO-7", "amount": amount}}
            ]
        },
        {"content": "Outcome: {last}"},
        hooks=hooks,
    )
    return make_agent(org or personas.org, owner or personas.operator, model_config_json=config)


def pay_tool(*, requires_confirmation: bool = False) -> RecordingTool:
    return RecordingTool(
        "oa__purchase_pay",
        result={"status": "paid"},
        parameters=PAY_SCHEMA,
        requires_confirmation=requires_confirmation,
    )


def run_once(agent, user, tool: RecordingTool) -> Any:
    run = run_start(agent=agent, user=user, input="pay")
    status = Harness(tool).execute(run)
    run.refresh_from_db()
    return run, status


# --- validation -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "no_such_hook"}, "unknown hook 'no_such_hook'"),
        ({"name": "deny_tools", "params": {"tools": 3}}, "bad params"),
        ({"name": "deny_tools", "params": {"tools": "x"}, "point": "PostToolUse"}, "is a PreToolUse hook"),
        (
            {"name": "deny_tools", "params": {"tools": "x"}, "priority": 1_000_000},
            "not below the approval gate",
        ),
        (
            {"name": "deny_tools", "params": {"tools": "x"}, "matcher": "re:(("},
            "not a valid regular expression",
        ),
        ({"name": "confirmation_gate"}, "attached automatically"),
        ({"name": "c", "kind": "command", "point": "PreToolUse", "params": {"argv": "ls"}}, "argv must be"),
        (
            {"name": "c", "kind": "command", "point": "Whenever", "params": script("crash.sh")},
            "point must be",
        ),
        ({"name": "c", "kind": "class", "params": [], "point": "PreToolUse"}, "must be a JSON object"),
    ],
)
def test_it_refuses_a_declaration_that_could_not_run_naming_the_field(personas, fields, message) -> None:
    agent = make_agent(personas.org, personas.operator)
    declaration = HookDeclaration(organization=personas.org, agent=agent, **fields)

    with pytest.raises(ValidationError) as caught:
        declaration.full_clean()

    assert any(message in m for ms in caught.value.message_dict.values() for m in ms), caught.value


def test_it_refuses_an_agent_of_another_organisation(personas) -> None:
    stranger_agent = make_agent(personas.other_org, personas.stranger)
    declaration = HookDeclaration(organization=personas.org, agent=stranger_agent, name="deny_tools")

    with pytest.raises(ValidationError, match="another organisation"):
        declaration.full_clean()


@register_hook
class BudgetCap(PreToolUseHook):
    name = "test_budget_cap"
    params_schema = {
        "type": "object",
        "properties": {"limit": {"type": "number", "minimum": 0}},
        "required": ["limit"],
        "additionalProperties": False,
    }

    def __init__(self, *, limit: float = 0, **tunables: Any) -> None:
        super().__init__(**tunables)
        self.limit = limit

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(allow=ctx.tool_args.get("amount", 0) <= self.limit, error="over budget")


def test_a_class_hooks_params_are_checked_against_its_params_schema(personas) -> None:
    agent = make_agent(personas.org, personas.operator)

    with pytest.raises(ValidationError) as caught:
        make_hook(agent, "test_budget_cap", params={"limit": -5})

    assert "bad params: limit: -5 is less than the minimum of 0" in str(caught.value)
    make_hook(agent, "test_budget_cap", params={"limit": 10})


# --- who may change code hooks ------------------------------------------------------------------


def command_row(owner, **fields: Any) -> HookDeclaration:
    agent = owner if not hasattr(owner, "agents") else None
    org = owner if agent is None else owner.organization
    return HookDeclaration(
        organization=org,
        agent=agent,
        name="freeze",
        kind="command",
        point="PreToolUse",
        params=script("block_payments.sh"),
        **fields,
    )


def test_it_refuses_a_command_hook_from_an_operator_without_the_code_hooks_permission(personas) -> None:
    agent = make_agent(personas.org, personas.operator)

    with pytest.raises(ServiceError) as caught:
        hook_declaration_save(declaration=command_row(agent), actor=personas.operator)

    assert caught.value.code == "forbidden" and not HookDeclaration.objects.exists()
    grant(personas.operator, "manage_code_hooks", app_label="agents")
    operator = type(personas.operator).objects.get(pk=personas.operator.pk)  # fresh permission cache
    saved = hook_declaration_save(declaration=command_row(agent), actor=operator)
    assert saved.pk is not None


def test_class_hooks_need_no_code_permission_but_turning_a_code_hook_into_one_does(personas) -> None:
    agent = make_agent(personas.org, personas.operator)
    plain = HookDeclaration(agent=agent, name="deny_tools", params={"tools": "x"})
    hook_declaration_save(declaration=plain, actor=personas.operator)
    code = make_hook(agent, "freeze", kind="command", point="PreToolUse", params=script("block_payments.sh"))

    code.kind, code.name, code.params, code.point = "class", "deny_tools", {"tools": "*"}, ""
    with pytest.raises(ServiceError, match="permission"):
        hook_declaration_save(declaration=code, actor=personas.operator)
    with pytest.raises(ServiceError, match="permission"):
        hook_declaration_delete(declaration=HookDeclaration.objects.get(pk=code.pk), actor=personas.operator)
    assert HookDeclaration.objects.get(pk=code.pk).kind == "command"


CODE_HOOKS = {
    "command": {"point": "PreToolUse", "params": script("block_payments.sh")},
    "python": {"point": "PreToolUse", "params": {"path": "tests.hooks.declared_examples.tag_reference"}},
    "http": {
        "point": "PostToolUse",
        "params": {"url": "https://hooks.example/policy"},
        "secret": "whsec-0123456789abcdef",
    },
}


@pytest.mark.parametrize("kind", list(CODE_HOOKS))
def test_only_holders_of_the_code_hooks_permission_create_change_or_delete_a_code_hook(
    personas, kind
) -> None:
    agent = make_agent(personas.org, personas.operator)

    def row() -> HookDeclaration:
        return HookDeclaration(agent=agent, name="policy", kind=kind, **CODE_HOOKS[kind])

    with pytest.raises(ServiceError, match="permission"):
        hook_declaration_save(declaration=row(), actor=personas.operator)
    assert not HookDeclaration.objects.exists()
    grant(personas.operator, "manage_code_hooks", app_label="agents")
    holder = type(personas.operator).objects.get(pk=personas.operator.pk)  # fresh permission cache
    saved = hook_declaration_save(declaration=row(), actor=holder)

    # An organisation admin of the agent, without the permission, may neither change nor delete it.
    changed = HookDeclaration.objects.get(pk=saved.pk)
    changed.matcher = "oa__*"
    with pytest.raises(ServiceError, match="permission"):
        hook_declaration_save(declaration=changed, actor=personas.admin)
    with pytest.raises(ServiceError, match="permission"):
        hook_declaration_delete(declaration=HookDeclaration.objects.get(pk=saved.pk), actor=personas.admin)
    assert HookDeclaration.objects.get(pk=saved.pk).matcher == ""
    hook_declaration_save(declaration=changed, actor=holder)
    hook_declaration_delete(declaration=HookDeclaration.objects.get(pk=saved.pk), actor=holder)
    assert not HookDeclaration.objects.exists()
    assert [v.history_type for v in HookDeclaration.history.filter(id=saved.pk).order_by("history_id")] == [
        "+",
        "~",
        "-",
    ], "only the permitted changes are in the history"


def test_a_stranger_cannot_declare_hooks_on_another_organisations_agent(personas) -> None:
    agent = make_agent(personas.org, personas.operator)

    with pytest.raises(ServiceError) as caught:
        hook_declaration_save(
            declaration=HookDeclaration(agent=agent, name="deny_tools", params={"tools": "x"}),
            actor=personas.stranger,
        )

    assert caught.value.code == "not_found"


def test_only_an_organisation_admin_declares_enforced_hooks(personas) -> None:
    row = HookDeclaration(organization=personas.org, name="deny_tools", params={"tools": "x"})

    with pytest.raises(ServiceError):
        hook_declaration_save(declaration=row, actor=personas.operator)
    hook_declaration_save(declaration=row, actor=personas.admin)
    assert row.is_enforced


# --- the chain a run keeps ------------------------------------------------------------------------


def test_a_run_keeps_its_declarations_with_their_kind_and_an_http_secret_only_encrypted(personas) -> None:
    agent = make_agent(personas.org, personas.operator)
    make_hook(
        agent, "freeze", kind="command", point="PreToolUse", params=script("block_payments.sh"), priority=5
    )
    make_hook(
        agent,
        "policy",
        kind="http",
        point="PostToolUse",
        params={"url": "https://hooks.example/policy"},
        secret="whsec-do-not-print-me",
    )
    make_hook(agent, "deny_tools", kind="class", params={"tools": "*"}, mode="off")
    make_hook(personas.org, "deny_tools", params={"tools": "oa__danger"})

    chain = hook_chain_of(agent)

    assert [(i["source"], i["kind"], i["name"]) for i in chain["declared"]] == [
        ("agent", "command", "freeze"),
        ("agent", "http", "policy"),
        ("organisation", "class", "deny_tools"),
    ]
    assert "whsec-do-not-print-me" not in json.dumps(chain)
    registry = registry_from_chain(chain)
    declared = [h.hook_name for h in registry.hooks if not getattr(type(h), "system", False)]
    assert declared == ["freeze", "policy", "deny_tools"], "the agent's hooks, then the enforced one"


def test_a_run_keeps_a_command_hook_deleted_after_it_started(personas) -> None:
    agent = paying(personas, 10)
    row = make_hook(agent, "freeze", kind="command", point="PreToolUse", params=script("block_payments.sh"))
    run = run_start(agent=agent, user=personas.member, input="pay")
    row.delete()
    tool = pay_tool()

    Harness(tool).execute(run)

    run.refresh_from_db()
    assert tool.calls == [] and run.output == "Outcome: Payments are frozen until the audit ends."


def test_a_disabled_declaration_does_not_run(personas) -> None:
    agent = paying(personas, 10)
    make_hook(
        agent, "freeze", kind="command", point="PreToolUse", params=script("block_payments.sh"), mode="off"
    )
    tool = pay_tool()

    _run, status = run_once(agent, personas.member, tool)

    assert status == RunStatus.COMPLETED and tool.calls == [{"purchase_id": "PO-7", "amount": 10}]


def test_a_declaration_that_stopped_resolving_fails_the_run_closed(personas) -> None:
    agent = paying(personas, 10)
    HookDeclaration.objects.create(
        organization=personas.org, agent=agent, name="gone", kind="python", point="PreToolUse",
        params={"path": "tests.hooks.nowhere.Gone"},
    )  # fmt: skip
    tool = pay_tool()

    run, status = run_once(agent, personas.member, tool)

    assert status == RunStatus.FAILED and tool.calls == []
    assert "cannot be imported" in run.error


# --- organisation-enforced hooks ------------------------------------------------------------------


def test_an_enforced_hook_runs_for_every_agent_of_the_organisation_and_no_other(personas) -> None:
    make_hook(personas.org, "freeze", kind="command", point="PreToolUse", params=script("block_payments.sh"))
    first, second = paying(personas, 10), paying(personas, 20)
    outsider = paying(personas, 10, org=personas.other_org, owner=personas.stranger)
    tools = [pay_tool(), pay_tool(), pay_tool()]

    run_once(first, personas.member, tools[0])
    run_once(second, personas.member, tools[1])
    run_once(outsider, personas.stranger, tools[2])

    assert tools[0].calls == [] and tools[1].calls == []
    assert tools[2].calls == [{"purchase_id": "PO-7", "amount": 10}], "another organisation is not affected"


def test_an_agent_hook_cannot_rewrite_arguments_after_an_enforced_hook_checked_them(personas) -> None:
    """The agent tries to slip a large payment past the organisation's cap: the model proposes
    10, and the agent's own hook, at a priority far above the cap's, raises it to 60,000. The
    enforced hook runs after every agent hook whatever the priorities, so it sees 60,000."""
    make_hook(personas.org, "deny_large", kind="command", point="PreToolUse", priority=5,
              params=script("deny_large_amounts.sh"))  # fmt: skip
    agent = paying(personas, 10)
    make_hook(agent, "set_arguments", params={"tools": "*", "values": {"amount": 60000}}, priority=999)
    tool = pay_tool()

    run, _ = run_once(agent, personas.member, tool)

    assert tool.calls == [] and run.output == "Outcome: Payments of 60000 need the CFO."
    chain = run.hook_chain["declared"]
    assert [(i["name"], i["source"], i["priority"]) for i in chain] == [
        ("set_arguments", "agent", 999),
        ("deny_large", "organisation", 5),
    ], "recorded in running order, with the priorities as declared"


def test_an_enforced_hook_sees_the_arguments_that_will_run(personas) -> None:
    """An agent hook that lowers the amount makes the lower amount what runs: the enforced cap
    checked exactly that, so nothing bigger than it allowed can run."""
    make_hook(personas.org, "deny_large", kind="command", point="PreToolUse", priority=500,
              params=script("deny_large_amounts.sh"))  # fmt: skip
    agent = paying(personas, 60000)
    make_hook(agent, "set_arguments", params={"tools": "*", "values": {"amount": 1}}, priority=0)
    tool = pay_tool()

    run_once(agent, personas.member, tool)

    assert tool.calls == [{"purchase_id": "PO-7", "amount": 1}]


def test_an_agent_declaration_of_the_same_name_does_not_replace_the_enforced_hook(personas) -> None:
    make_hook(personas.org, "deny_tools", params={"tools": "oa__purchase_pay", "message": "Org says no."})
    agent = paying(personas, 10, hooks=[{"name": "deny_tools", "params": {"tools": "oa__nothing"}}])
    make_hook(agent, "deny_tools", params={"tools": "oa__nothing_either"})
    tool = pay_tool()

    run, _ = run_once(agent, personas.member, tool)

    assert tool.calls == [] and run.output == "Outcome: Org says no."


def test_an_agents_json_hooks_cannot_outrank_an_enforced_hook_either(personas) -> None:
    make_hook(personas.org, "deny_large", kind="command", point="PreToolUse", priority=1,
              params=script("deny_large_amounts.sh"))  # fmt: skip
    agent = paying(
        personas,
        10,
        hooks=[
            {"name": "set_arguments", "params": {"tools": "*", "values": {"amount": 60000}, "priority": 800}}
        ],
    )
    tool = pay_tool()

    run_once(agent, personas.member, tool)

    assert tool.calls == []


# --- ask: a command hook routes the call to the approval gate ------------------------------------


@pytest.mark.django_db(transaction=True)  # the gate's request is read by other connections
def test_a_command_hook_asking_opens_an_approval_for_60000_but_not_40000(personas, resumes, jq) -> None:
    set_policy(personas)
    large, small = paying(personas, 60000), paying(personas, 40000)
    for agent in (large, small):
        make_hook(
            agent, "ask_large", kind="command", point="PreToolUse", params=script("ask_large_amounts.sh")
        )
    large_tool, small_tool = pay_tool(), pay_tool()

    large_run, large_status = run_once(large, personas.member, large_tool)
    small_run, small_status = run_once(small, personas.member, small_tool)

    assert large_status == RunStatus.AWAITING_APPROVAL and large_tool.calls == []
    request = ConfirmationRequest.objects.get(run=large_run)
    assert request.status == ConfirmationStatus.PENDING and request.tool_args["amount"] == 60000
    assert small_status == RunStatus.COMPLETED and small_tool.calls == [
        {"purchase_id": "PO-7", "amount": 40000}
    ]
    assert not ConfirmationRequest.objects.filter(run=small_run).exists()


# --- the JSON form ----------------------------------------------------------------------------------


def test_the_json_form_is_adopted_into_rows_with_the_same_chain(personas) -> None:
    hooks = [
        "truncate_result",
        {"name": "deny_tools", "params": {"tools": "oa__x", "priority": 7, "on_error": "allow"}},
    ]
    agent = paying(personas, 10, hooks=hooks)
    before = hook_chain_of(agent)["declared"]

    rows = hook_declarations_adopt_config(agent=agent)

    agent.refresh_from_db()
    assert "hooks" not in agent.model_config_json
    assert [(r.name, r.priority, r.on_error) for r in rows] == [
        ("truncate_result", None, ""),
        ("deny_tools", 7, "allow"),
    ]
    after = hook_chain_of(agent)["declared"]
    strip = lambda items: [{k: v for k, v in i.items() if k != "source"} for i in items]  # noqa: E731
    assert sorted(strip(after), key=str) == sorted(strip(before), key=str)


def test_a_chain_recorded_before_declarations_had_kinds_still_rebuilds(personas) -> None:
    """Runs parked before this change keep their chain: items without kind are class hooks."""
    chain = {
        "v": 1,
        "declared": [
            {
                "name": "deny_tools",
                "params": {"tools": "oa__x"},
                "priority": 10,
                "timeout": 5.0,
                "on_error": "block",
            }
        ],
        "system": [],
        "require_confirmation_for_all": False,
    }

    [hook] = registry_from_chain(chain).hooks

    assert (hook.hook_name, hook.priority, hook.tools) == ("deny_tools", 10, ("oa__x",))


def test_every_change_to_a_hook_declaration_is_recorded_without_its_secret(personas) -> None:
    from agents.models import HookDeclaration

    agent = make_agent(personas.org, personas.operator)
    hook = make_hook(agent, "deny_tools", params={"tools": ["oa__*_delete"]}, priority=10)
    hook.priority = 20
    hook.save()

    versions = list(hook.history.order_by("history_id"))
    assert [v.priority for v in versions] == [10, 20]
    delta = versions[1].diff_against(versions[0])
    assert [(c.field, c.old, c.new) for c in delta.changes] == [("priority", 10, 20)]
    historical = {f.name for f in HookDeclaration.history.model._meta.get_fields()}
    assert "secret" not in historical
