"""FIM One agent configurations import and run: each of FIM One's built-in hook names
(``feishu_gate``, ``connector_call_logger``, ``result_truncator``, ``rate_limiter``) becomes the
hook here that does the same; a name neither FIM One nor this platform knows is refused, listing
both."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from agents import events as ev
from agents.checks import hook_chain_of
from agents.fim_one_hooks import FIM_ONE_HOOKS
from agents.models import ConnectorCallLog, HookDeclaration, RunStatus
from agents.services import run_start
from approvals.models import ConfirmationRequest
from approvals.services import confirmation_decide
from console.hook_import import HookImportError, fim_one_config_plan, hook_import_save
from hooks.catalog import build_hooks
from tests.agents.engine_kit import Harness, RecordingTool, events_of
from tests.approvals.kit import set_policy
from tests.personas import make_agent, make_hook, scripted

ALL_OF_THEM = {
    "hooks": {
        "class_hooks": ["feishu_gate"],
        "builtin": ["connector_call_logger", "result_truncator", "rate_limiter"],
    }
}


def plan_for(doc) -> object:
    return fim_one_config_plan(json.dumps(doc))


# --- the mapping --------------------------------------------------------------------------------


def test_each_fim_one_built_in_becomes_the_hook_here_that_does_the_same() -> None:
    plan = plan_for(ALL_OF_THEM)

    assert [(h.kind, h.name, h.params) for h in plan.hooks] == [
        ("class", "audit_log", {"tools": "*__*"}),
        ("class", "result_truncate", {"max_chars": 8000}),
        ("class", "connector_rate_limit", {"calls": 10, "window_seconds": 60, "tools": "*__*"}),
    ]
    assert plan.skipped == []
    assert plan.notes == [
        "hooks.class_hooks[0] (feishu_gate): the approval gate (confirmation_gate), attached to every "
        "agent here: nothing to declare; the agent's require_confirmation_for_all is imported with it"
    ]


def test_a_fim_one_agent_or_its_model_config_json_alone_are_read_alike() -> None:
    agent_doc = {
        "name": "Procurement",
        "model_config_json": ALL_OF_THEM,
        "require_confirmation_for_all": False,
    }

    assert [h.name for h in plan_for(agent_doc).hooks] == [h.name for h in plan_for(ALL_OF_THEM).hooks]
    assert plan_for({"model_config_json": None}).hooks == []


def test_fim_one_parameters_become_ours_or_are_left_out_saying_where_their_equivalent_lives() -> None:
    plan = plan_for(
        {
            "hooks": {
                "class_hooks": [
                    {"name": "feishu_gate", "config": {"timeout_seconds": 300, "poll_interval_seconds": 2}},
                    {"name": "result_truncator", "params": {"tool_filter": "ledger__*", "priority": 40}},
                ]
            }
        }
    )

    [truncate] = plan.hooks
    assert (truncate.name, truncate.params, truncate.priority) == (
        "result_truncate",
        {"max_chars": 8000, "tools": "ledger__*"},
        40,
    )
    assert [(s.where, s.why) for s in plan.skipped] == [
        (
            "hooks.class_hooks[0].timeout_seconds",
            "the approval timeout is the approver policy's here (admin)",
        ),
        ("hooks.class_hooks[0].poll_interval_seconds", "not needed: a verdict wakes the waiting run at once"),
    ]


def test_a_parameter_a_fim_one_hook_does_not_have_refuses_the_file() -> None:
    with pytest.raises(HookImportError) as caught:
        plan_for({"hooks": {"builtin": [{"name": "rate_limiter", "params": {"calls": 3}}]}})

    assert str(caught.value) == (
        "hooks.builtin[0]: rate_limiter has no parameter 'calls' (its parameters: priority, tool_filter)"
    )


def test_our_own_hook_names_in_a_fim_one_configuration_are_taken_as_they_are() -> None:
    plan = plan_for(
        {"hooks": {"class_hooks": [{"name": "deny_tools", "params": {"tools": "oa__*"}}, "feishu_gate"]}}
    )

    assert [(h.name, h.params) for h in plan.hooks] == [("deny_tools", {"tools": "oa__*"})]


def test_an_unknown_hook_name_refuses_the_file_listing_fim_ones_names_and_ours() -> None:
    with pytest.raises(HookImportError) as caught:
        plan_for({"hooks": {"class_hooks": ["feishu_gate", "slack_gate"], "builtin": ["pii_scrubber"]}})

    message = str(caught.value)
    assert message.startswith("unknown hook name(s) 'pii_scrubber', 'slack_gate': known names are ")
    assert "FIM One's: connector_call_logger, feishu_gate, rate_limiter, result_truncator; ours: " in message
    assert "deny_tools" in message and "confirm_when" in message and "result_truncate" in message


def test_a_hook_listed_twice_is_declared_once() -> None:
    plan = plan_for({"hooks": {"class_hooks": ["result_truncator"], "builtin": ["result_truncator"]}})

    assert [h.name for h in plan.hooks] == ["result_truncate"]
    assert [s.why for s in plan.skipped] == ["listed already: declared once"]


def test_fim_ones_routing_settings_are_listed_as_skipped_with_where_they_live_here() -> None:
    plan = plan_for(
        {
            "model_config_json": {},
            "confirmation_mode": "channel_only",
            "confirmation_approver_scope": "org_members",
        }
    )

    assert [s.where for s in plan.skipped] == ["confirmation_mode", "confirmation_approver_scope"]
    assert "approver policy" in plan.skipped[1].why


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("[]", "(top): a FIM One agent (or its model_config_json) is a JSON object"),
        ('{"model_config_json": "x"}', "model_config_json: must be a JSON object"),
        ('{"hooks": ["feishu_gate"]}', 'hooks: must be an object with "class_hooks"'),
        ('{"hooks": {"class_hooks": "feishu_gate"}}', "hooks.class_hooks: must be a list of hook names"),
        ('{"hooks": {"class_hooks": [3]}}', 'hooks.class_hooks[0]: must be a hook name, or {"name": …'),
        ('{"model_config_json": {}, "require_confirmation_for_all": "yes"}', "must be true or false"),
        ("{oops", "not JSON"),
    ],
)
def test_a_configuration_of_the_wrong_shape_is_a_clear_error(doc, message) -> None:
    with pytest.raises(HookImportError) as caught:
        fim_one_config_plan(doc)

    assert message in str(caught.value)


def test_every_fim_one_alias_is_registered_with_fim_ones_defaults() -> None:
    hooks = {hook.hook_name: hook for hook in build_hooks(list(FIM_ONE_HOOKS))}

    assert set(hooks) == {"feishu_gate", "connector_call_logger", "result_truncator", "rate_limiter"}
    assert (hooks["rate_limiter"].calls, hooks["rate_limiter"].window_seconds) == (10, 60)
    assert hooks["rate_limiter"].tools == hooks["connector_call_logger"].tools == ("*__*",)
    assert hooks["result_truncator"].max_chars == 8000


# --- import and run ----------------------------------------------------------------------------


def test_import_fimone_adds_the_hooks_after_the_agents_own_and_says_what_each_name_became(
    personas, tmp_path
) -> None:
    agent = make_agent(personas.org, personas.operator)
    make_hook(agent, "deny_tools", params={"tools": "oa__danger"})
    path = tmp_path / "fim-one-agent.json"
    path.write_text(json.dumps({"name": "Procurement", "model_config_json": ALL_OF_THEM}))
    out = io.StringIO()

    call_command("hooks", "import-fimone", str(path), "--agent", str(agent.pk), stdout=out)

    names = list(HookDeclaration.objects.filter(agent=agent).order_by("pk").values_list("name", flat=True))
    assert names == ["deny_tools", "audit_log", "result_truncate", "connector_rate_limit"]
    report = out.getvalue()
    assert report.startswith("FIM One agent configuration: imported 3 hook declaration(s)")
    assert "FIM One's rate_limiter → connector_rate_limit, 10 calls per 60 s" in report
    assert "note: model_config_json.hooks.class_hooks[0] (feishu_gate): the approval gate" in report
    assert "error" not in hook_chain_of(agent)


def test_import_fimone_refuses_an_unknown_name_and_saves_nothing(personas, tmp_path) -> None:
    agent = make_agent(personas.org, personas.operator)
    path = tmp_path / "fim-one-agent.json"
    path.write_text(json.dumps({"hooks": {"class_hooks": ["result_truncator", "wecom_gate"]}}))

    with pytest.raises(CommandError) as caught:
        call_command("hooks", "import-fimone", str(path), "--agent", str(agent.pk))

    assert "unknown hook name(s) 'wecom_gate': known names are FIM One's: " in str(caught.value)
    assert not HookDeclaration.objects.exists()


def test_a_declaration_that_does_not_validate_rolls_the_whole_import_back(personas) -> None:
    agent = make_agent(personas.org, personas.operator)
    plan = plan_for({"hooks": {"class_hooks": ["result_truncator", {"name": "deny_tools", "params": {}}]}})

    with pytest.raises(HookImportError) as caught:
        hook_import_save(agent=agent, plan=plan, actor=personas.operator)

    assert str(caught.value).startswith("hooks.class_hooks[1] (deny_tools): hook 'deny_tools': bad params")
    assert not HookDeclaration.objects.exists(), "all or nothing"


@pytest.mark.django_db(transaction=True)
def test_a_fim_one_agent_that_asks_before_every_call_asks_here_too(personas, resumes, tmp_path) -> None:
    set_policy(personas)
    config = scripted(
        {"tool_calls": [{"name": "oa__purchase_list", "arguments": {}}]}, {"content": "Got {last}"}
    )
    agent = make_agent(personas.org, personas.operator, model_config_json=config)
    path = tmp_path / "fim-one-agent.json"
    fim_one = {
        "model_config_json": {"hooks": {"class_hooks": ["feishu_gate"]}},
        "require_confirmation_for_all": True,
    }
    path.write_text(json.dumps(fim_one))
    out = io.StringIO()
    call_command("hooks", "import-fimone", str(path), "--agent", str(agent.pk), stdout=out)
    assert "require_confirmation_for_all: on" in out.getvalue()
    listing = RecordingTool("oa__purchase_list", result=["PO-1"])  # not flagged requires_confirmation
    harness = Harness(listing)

    run = run_start(agent=agent, user=personas.member, input="list purchases")
    assert harness.execute(run) == RunStatus.AWAITING_APPROVAL and listing.calls == []
    request = ConfirmationRequest.objects.get(run=run)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    assert harness.resume(run) == RunStatus.COMPLETED

    assert listing.calls == [{}]


@pytest.mark.django_db(transaction=True)
def test_a_fim_one_configuration_kept_on_an_agent_runs_with_fim_ones_names(personas, resumes) -> None:
    """Stored as it is (``model_config_json.hooks.class_hooks`` with FIM One's names), the chain
    builds and each name does its work: the gate asks, the logger records, the truncator cuts."""
    set_policy(personas)
    config = scripted(
        {"tool_calls": [{"name": "oa__purchase_pay", "arguments": {"purchase_id": "PO-1"}}]},
        {"content": "Paid: {last}"},
        hooks=["feishu_gate", "connector_call_logger", "result_truncator", "rate_limiter"],
    )
    agent = make_agent(personas.org, personas.operator, model_config_json=config)
    pay = RecordingTool("oa__purchase_pay", result="r" * 9000, requires_confirmation=True)
    harness = Harness(pay)

    run = run_start(agent=agent, user=personas.member, input="pay PO-1")
    assert sorted(i["name"] for i in run.hook_chain["declared"]) == sorted(FIM_ONE_HOOKS)
    assert harness.execute(run) == RunStatus.AWAITING_APPROVAL and pay.calls == []
    request = ConfirmationRequest.objects.get(run=run)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    assert harness.resume(run) == RunStatus.COMPLETED

    assert pay.calls == [{"purchase_id": "PO-1"}]
    [finished] = events_of(run, ev.TOOL_FINISHED)
    assert "[truncated: 1,000 of 9,000 characters removed" in finished["observation"]
    [logged] = ConnectorCallLog.objects.filter(run=run)
    assert (logged.tool_name, logged.outcome, logged.result_size) == ("oa__purchase_pay", "succeeded", 9000)
