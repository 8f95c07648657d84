"""Every execution path runs the hooks (docs/design.md §1.2): one table, the same promises on each row.

A row (:class:`Path`) says how a user's request reaches a tool call on that path: which agents
(or workflow) it needs, where the hooks are declared, how it starts, how it is driven and which
run makes the tool call. Each test states one promise and runs it on every row:

* a blocking PreToolUse hook blocks; an arg-rewriting hook rewrites; a PostToolUse hook rewrites
  the observation;
* a chain that cannot be built stops the path before any tool runs;
* a ``requires_confirmation`` tool waits for a verdict and runs once after approval;
* a restart while parked loses nothing.

The rows, and how a path is started and driven, are in tests/every_path_kit.py: adding a path is
adding a row to its :data:`PATHS`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.core import mail
from django.db.models.signals import post_save
from django.test import Client
from django.utils import timezone

from agents import events as ev
from agents.models import Agent, ConnectorCallLog, ExecutionPath, Run, RunStatus, ShadowDecision
from approvals.models import ApprovalStage, ChannelConfig, ConfirmationRequest, StandingGrant
from approvals.services import BatchItem, confirmation_decide, confirmation_decide_batch
from approvals.services.absences import absence_set
from fimone import budgets
from hooks import HookContext
from hooks.catalog import build_hooks
from tests.agents.engine_kit import Harness, events_of
from tests.approvals.kit import recorded_request, set_policy
from tests.every_path_kit import (
    EVAL_PATHS,
    PATHS,
    PAY_ARGS,
    TEXT_OR_NUMBER_PAY_SCHEMA,
    drive,
    pay_tool,
    settle,
)
from tests.personas import make_hook

# Verdicts act after commit (they resume runs): let transactions really commit.
pytestmark = pytest.mark.django_db(transaction=True)

every_path = pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])


@pytest.fixture(autouse=True)
def _no_background_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A workflow node's run is driven by the test (``Path.drive``), not handed to an executor."""
    monkeypatch.setattr("agents.executors.dispatch_execute", lambda run_id: None)


# --- the promises -----------------------------------------------------------------------------------


@every_path
def test_a_blocking_pre_tool_use_hook_blocks(path, personas, resumes) -> None:
    pay = pay_tool()
    hooks = [{"name": "deny_tools", "params": {"tools": ["oa__*"], "message": "Payments are frozen."}}]

    root, tool_run = drive(path, personas, hooks, pay)

    assert pay.calls == []
    [blocked] = events_of(tool_run, ev.TOOL_BLOCKED)
    assert blocked["blocked_by"] == "deny_tools" and blocked["error"] == "Payments are frozen."
    if path.has_model:  # the model hears the refusal and answers
        assert root.status == RunStatus.COMPLETED
    else:  # no model to tell: the path fails, naming the refusal
        assert root.status == RunStatus.FAILED and "Payments are frozen." in root.error


@every_path
def test_an_organisation_enforced_hook_blocks_though_the_path_declares_none(path, personas, resumes) -> None:
    make_hook(personas.org, "deny_tools", params={"tools": ["oa__*"], "message": "Acme froze payments."})
    pay = pay_tool()

    _root, tool_run = drive(path, personas, None, pay)

    assert pay.calls == []
    [blocked] = events_of(tool_run, ev.TOOL_BLOCKED)
    assert blocked["blocked_by"] == "deny_tools" and blocked["error"] == "Acme froze payments."
    assert [i["source"] for i in tool_run.hook_chain["declared"]] == ["organisation"]


@every_path
def test_a_shadow_block_lets_the_call_run_and_records_the_block_it_would_have_made(
    path, personas, resumes
) -> None:
    frozen = make_hook(
        personas.org,
        "deny_tools",
        params={"tools": ["oa__*"], "message": "Payments are frozen."},
        mode="shadow",
    )
    pay = pay_tool()

    root, tool_run = drive(path, personas, None, pay)

    assert pay.calls == [PAY_ARGS], "the call ran as if the hook were absent"
    assert events_of(tool_run, ev.TOOL_BLOCKED) == []
    root.refresh_from_db()
    assert root.status == RunStatus.COMPLETED
    [note] = [e for e in events_of(tool_run, ev.HOOK_SIDE_EFFECT) if e.get("shadow")]
    assert note["shadow"] == "block" and note["hook"] == "deny_tools"
    assert note["message"] == "shadow: would have blocked the call: Payments are frozen."
    [decision] = ShadowDecision.objects.filter(run=tool_run)
    assert (decision.declaration_pk, decision.decision, decision.tool_name, decision.source) == (
        frozen.pk,
        "block",
        "oa__purchase_pay",
        "organisation",
    )


@every_path
def test_an_argument_rewriting_hook_rewrites(path, personas, resumes) -> None:
    pay = pay_tool()
    hooks = [{"name": "set_arguments", "params": {"tools": "oa__purchase_pay", "values": {"amount": 1000}}}]

    root, tool_run = drive(path, personas, hooks, pay)

    assert root.status == RunStatus.COMPLETED
    assert pay.calls == [{"purchase_id": "PO-1", "amount": 1000}]
    [started] = events_of(tool_run, ev.TOOL_STARTED)
    assert started["arguments"]["amount"] == 1000


@every_path
def test_a_post_tool_use_hook_rewrites_the_observation(path, personas, resumes) -> None:
    pay = pay_tool()
    hooks = [{"name": "redact_result", "params": {"patterns": [r"\d{4}-\d{4}-\d{4}-\d{4}"]}}]

    root, tool_run = drive(path, personas, hooks, pay)

    assert root.status == RunStatus.COMPLETED and len(pay.calls) == 1
    [finished] = events_of(tool_run, ev.TOOL_FINISHED)
    assert "[redacted]" in finished["observation"] and "6222" not in finished["observation"]
    assert "6222" not in root.output


@every_path
def test_a_chain_that_cannot_be_built_stops_the_path_before_any_tool_runs(path, personas, resumes) -> None:
    pay = pay_tool()

    root, tool_run = drive(path, personas, ["no_such_hook"], pay)

    assert pay.calls == []
    failed = tool_run if tool_run is not None else root
    failed.refresh_from_db()
    assert failed.status == RunStatus.FAILED and "hooks cannot be built" in failed.error
    assert f"the {path.chain_owner}'s hooks cannot be built" in failed.error
    assert events_of(failed, ev.RUN_FAILED)[-1]["stage"] == "hooks"
    assert events_of(failed, ev.TOOL_STARTED) == []
    root.refresh_from_db()
    assert "hooks cannot be built" in root.error + root.output, "the user is told why"


@every_path
def test_a_tool_requiring_confirmation_waits_for_the_verdict_and_runs_once_after_approval(
    path, personas, resumes
) -> None:
    set_policy(personas)
    pay = pay_tool(requires_confirmation=True)

    root, tool_run = drive(path, personas, None, pay)

    assert root.status == RunStatus.AWAITING_APPROVAL and pay.calls == []
    request = ConfirmationRequest.objects.get()
    assert request.run == tool_run

    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    settle(resumes, pay)

    root.refresh_from_db()
    assert root.status == RunStatus.COMPLETED, root.error
    assert pay.calls == [PAY_ARGS]


@every_path
def test_a_restart_while_parked_loses_nothing(path, personas, resumes) -> None:
    set_policy(personas)
    pay = pay_tool(requires_confirmation=True)
    root, tool_run = drive(path, personas, None, pay)
    parked = {run.pk: run.checkpoint for run in Run.objects.filter(status=RunStatus.AWAITING_APPROVAL)}
    assert root.status == RunStatus.AWAITING_APPROVAL and tool_run.pk in parked

    # A restart: fresh engines pick every parked run up again (as the orphan sweep does) before
    # anyone decided. Each parks again; nothing runs, nothing is asked twice.
    for run_id in sorted(parked, reverse=True):
        assert Harness(pay).resume(Run.objects.get(pk=run_id)) == RunStatus.AWAITING_APPROVAL
    assert pay.calls == [] and ConfirmationRequest.objects.count() == 1

    request = ConfirmationRequest.objects.get()
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    settle(resumes, pay)

    root.refresh_from_db()
    assert root.status == RunStatus.COMPLETED and pay.calls == [PAY_ARGS]
    for run in Run.objects.filter(pk__in=parked):
        seqs = list(run.events.values_list("seq", flat=True))
        assert seqs == list(range(1, len(seqs) + 1)), "every run's trace is whole and gap-free"


# --- enforced means last word (docs/design.md §1.12) --------------------------------------------------------
# (``test_add_card_note``, the agent hook the redaction promise declares: tests/every_path_kit.py)


RAISE_TO_999_999 = {
    "name": "set_arguments",
    "params": {"tools": "oa__purchase_pay", "values": {"amount": 999_999}},
}


@every_path
def test_an_agent_hook_cannot_rewrite_arguments_the_organisation_set(path, personas, resumes) -> None:
    make_hook(personas.org, "set_arguments", params={"tools": "oa__purchase_pay", "values": {"amount": 1}})
    pay = pay_tool()
    hooks = [{**RAISE_TO_999_999, "params": {**RAISE_TO_999_999["params"], "priority": 999}}]

    _root, tool_run = drive(path, personas, hooks, pay)

    assert pay.calls == [{"purchase_id": "PO-1", "amount": 1}]
    assert [i["source"] for i in tool_run.hook_chain["declared"]][-1] == "organisation", "recorded last"


@every_path
def test_an_enforced_approval_condition_sees_the_amount_an_agent_hook_wrote(path, personas, resumes) -> None:
    """The organisation asks a person for payments from 10,000; an agent hook raises a payment
    of 5,000 to 999,999 after the model proposed it: the call waits for a person, who is shown
    999,999 (before, the condition was checked first and the raised payment ran unasked)."""
    set_policy(personas)
    make_hook(personas.org, "confirm_when", priority=1,
              params={"conditions": [{"field": "amount", "op": ">=", "value": 10_000}]})  # fmt: skip
    pay = pay_tool()

    root, tool_run = drive(path, personas, [RAISE_TO_999_999], pay)

    assert root.status == RunStatus.AWAITING_APPROVAL and pay.calls == []
    request = ConfirmationRequest.objects.get()
    assert request.run == tool_run and request.tool_args["amount"] == 999_999


@every_path
def test_enforced_redaction_has_the_last_word_on_what_the_model_reads(path, personas, resumes) -> None:
    make_hook(personas.org, "redact_result", params={"patterns": [r"\d{4}-\d{4}-\d{4}-\d{4}"]})
    pay = pay_tool()

    root, tool_run = drive(path, personas, ["test_add_card_note"], pay)

    [finished] = events_of(tool_run, ev.TOOL_FINISHED)
    assert "card on file: [redacted]" in finished["observation"], "the agent's hook ran, then the org's"
    assert "6222" not in finished["observation"] and "6222" not in root.output + root.error


# --- evals touch nothing, on every path inside them (docs/design.md §1.2) ----------------------------


@pytest.mark.parametrize("eval_path", EVAL_PATHS, ids=[p.name for p in EVAL_PATHS])
@pytest.mark.parametrize("flagged", [False, True], ids=["payment", "payment-requiring-confirmation"])
def test_an_eval_reaches_no_tool_and_asks_nobody(eval_path, flagged, personas, resumes) -> None:
    from evals.services import eval_run_start, eval_set_create

    set_policy(personas)
    make_hook(
        personas.org, "confirm_when", params={"conditions": [{"field": "amount", "op": ">=", "value": 1}]}
    )
    make_hook(personas.org, "audit_log")
    pay = pay_tool(requires_confirmation=flagged)
    agent = eval_path.agent(personas, [{"name": "deny_tools", "params": {"tools": ["*"]}}])
    cases = [{"input": "pay PO-1", "expectation": "contains", "expected": ""}]
    eval_set = eval_set_create(
        user=personas.operator, organization_id=personas.org.pk, name="Pay", cases=cases
    )

    eval_run = eval_run_start(eval_set=eval_set, agent=agent, user=personas.operator)
    root = eval_run.results.get().run
    Harness(pay).execute(root)

    root.refresh_from_db()
    assert root.status == RunStatus.COMPLETED, root.error
    assert pay.calls == [] and not ConfirmationRequest.objects.exists()
    tool_run = eval_path.tool_run(root)
    assert tool_run.execution_path == eval_path.execution_path and tool_run.hooks_bypassed
    assert tool_run.hook_chain["sandbox"] == root.hook_chain["sandbox"]
    assert events_of(tool_run, ev.TOOL_BLOCKED) == [], "the agent's own hooks were bypassed"
    assert tool_run.output.startswith("Result: Dry run (eval): oa__purchase_pay")
    # The enforced audit log records live calls only (a delegate's call_agent is one).
    assert not ConnectorCallLog.objects.filter(tool_name="oa__purchase_pay").exists()
    assert eval_run.results.get().outcome == "passed"


# --- those who configure do not decide (docs/design.md §1.13) -----------------------------------------


@every_path
def test_the_operator_who_configured_the_agent_cannot_decide_its_request(path, personas, resumes) -> None:
    """Oscar owns and configures every agent here, is not an approver, and a policy written around
    the admin even names him: whatever path opened the request, he is not in its approver
    snapshot and his approval changes nothing; April's decides."""
    set_policy(personas).named_users.set([personas.operator])
    pay = pay_tool(requires_confirmation=True)

    root, tool_run = drive(path, personas, None, pay)

    request = ConfirmationRequest.objects.get()
    assert request.run == tool_run
    assert personas.operator not in request.approvers.all()
    refused = confirmation_decide(request_id=request.pk, user=personas.operator, approve=True)
    request.refresh_from_db()
    assert not refused.accepted and request.status == "pending" and pay.calls == []

    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    settle(resumes, pay)
    root.refresh_from_db()
    assert root.status == RunStatus.COMPLETED and pay.calls == [PAY_ARGS]


@every_path
def test_a_batch_decision_keeps_a_single_decisions_rules(path, personas, resumes) -> None:
    """The inbox's batch door decides each request as alone: oscar's batch (he configured the
    agent) changes nothing, april's approves, and the call runs once, whatever path opened it."""
    set_policy(personas).named_users.set([personas.operator])
    pay = pay_tool(requires_confirmation=True)

    root, _tool_run = drive(path, personas, None, pay)

    request = ConfirmationRequest.objects.get()
    [refused] = confirmation_decide_batch(
        items=[BatchItem(request.pk, request.args_sha256)], user=personas.operator, approve=True
    )
    request.refresh_from_db()
    assert refused.outcome.refused and request.status == "pending" and pay.calls == []

    [line] = confirmation_decide_batch(
        items=[BatchItem(request.pk, request.args_sha256)], user=personas.approver, approve=True
    )
    assert line.outcome.accepted
    settle(resumes, pay)
    root.refresh_from_db()
    assert root.status == RunStatus.COMPLETED and pay.calls == [PAY_ARGS]


@every_path
def test_a_staged_request_is_decided_stage_by_stage(path, personas, resumes) -> None:
    """A policy's stages apply on every path: april's stage first (adam, asked second, is refused
    until then), then adam's; the call runs once, after the last stage approved."""
    policy = set_policy(personas)
    on_payments = [{"field": "@tool", "op": "==", "value": "oa__purchase_pay"}]
    ApprovalStage.objects.create(
        policy=policy, position=1, name="Approvers", conditions=on_payments
    ).named_users.set([personas.approver])
    ApprovalStage.objects.create(
        policy=policy, position=2, name="Admins", roles=["admin"], conditions=on_payments
    )
    pay = pay_tool(requires_confirmation=True)

    root, _tool_run = drive(path, personas, None, pay)

    request = ConfirmationRequest.objects.get()
    assert [stage["name"] for stage in request.stage_plan] == ["Approvers", "Admins"]
    assert confirmation_decide(request_id=request.pk, user=personas.admin, approve=True).refused
    first = confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    assert first.status == "recorded" and resumes.run_ids == [] and pay.calls == []
    last = confirmation_decide(request_id=request.pk, user=personas.admin, approve=True)
    assert last.accepted
    settle(resumes, pay)
    root.refresh_from_db()
    assert root.status == RunStatus.COMPLETED and pay.calls == [PAY_ARGS]


@every_path
def test_an_absent_approvers_delegate_decides_in_their_seat(path, personas, resumes) -> None:
    """april is away and adam stands in: on every path the request asks adam too; his approval is
    april's seat, and the call runs once."""
    set_policy(personas, allow_org_approvers=False).named_users.set([personas.approver])
    until = timezone.now() + dt.timedelta(days=1)
    absence_set(
        user=personas.approver, organization_id=personas.org.pk, delegate=personas.admin, ends_at=until
    )
    pay = pay_tool(requires_confirmation=True)

    root, _tool_run = drive(path, personas, None, pay)

    request = ConfirmationRequest.objects.get()
    assert set(request.approvers.values_list("username", flat=True)) == {"april", "adam"}
    assert confirmation_decide(request_id=request.pk, user=personas.admin, approve=True).accepted
    settle(resumes, pay)
    root.refresh_from_db()
    assert root.status == RunStatus.COMPLETED and pay.calls == [PAY_ARGS]


def spent_before(personas, budget: dict, amount: int) -> str:
    """The organisation's budget ``budget`` with ``amount`` spent already this period; its key."""
    hook = build_hooks([{"name": "budget", "params": budget}])[0]
    key, until = hook.key(HookContext(metadata={"org_id": personas.org.pk}), timezone.now())
    budgets.reserve(
        key=key, call="earlier", amount=budgets.units(amount), limit=hook.limit_units, until=until
    )
    return key


@every_path
@pytest.mark.parametrize(("spent", "runs"), [(4000, True), (4001, False)], ids=["within", "past"])
def test_an_enforced_budget_counts_the_call_or_blocks_it_past_the_budget(
    path, personas, resumes, fresh_budgets, spent, runs
) -> None:
    """The organisation's budget of 9,000 for payments, 4,000 or 4,001 spent already: the payment
    of 5,000 runs and is counted, or is past the budget, never reaches the tool and counts nothing."""
    budget = {"limit": 9000, "per": "organisation", "tools": ["oa__purchase_pay"]}
    make_hook(personas.org, "budget", params=budget)
    key = spent_before(personas, budget, spent)
    pay = pay_tool()

    drive(path, personas, None, pay)

    assert pay.calls == ([PAY_ARGS] if runs else [])
    assert budgets.used(key=key) == spent + (5000 if runs else 0)


@every_path
def test_an_e_mail_link_decides_only_with_the_approvers_code(path, personas, resumes) -> None:
    """The request goes out by e-mail; april's approve link, opened with no session, decides
    nothing without the code sent to her address, then approves; the call runs once."""
    personas.approver.email = "april@acme.test"
    personas.approver.save()
    set_policy(personas, allow_org_approvers=False).named_users.set([personas.approver])
    ChannelConfig.objects.create(organization=personas.org, kind="email", name="E-mail", is_default=True)
    pay = pay_tool(requires_confirmation=True)

    root, _tool_run = drive(path, personas, None, pay)

    [message] = [m for m in mail.outbox if m.to == ["april@acme.test"]]
    link = re.search(r"^Approve: \S+?(/im/email/\S+)$", message.body, re.M).group(1)
    reader = Client()
    assert reader.post(link, {"action": "decide", "code": "000000"}).status_code == 400
    reader.post(link, {"action": "code"})
    code = re.search(r"Your code: (\d{6})", mail.outbox[-1].subject).group(1)
    assert reader.post(link, {"action": "decide", "code": code}).status_code == 200
    settle(resumes, pay)
    root.refresh_from_db()
    assert root.status == RunStatus.COMPLETED and pay.calls == [PAY_ARGS]


@contextlib.contextmanager
def payments_up_to_5000_granted(personas: Any) -> Iterator[None]:
    """april's standing approval of payments up to 5,000 on every agent made meanwhile (the path's
    agents, granted as each is made)."""
    set_policy(personas, standing_grants="agent")
    source = recorded_request(personas, status="approved", decided_by=personas.approver)

    def grant_on(sender, instance, created, **kwargs) -> None:
        if created:
            StandingGrant.objects.create(
                organization=personas.org,
                agent=instance,
                scope="agent",
                tool_name="oa__purchase_pay",
                conditions=[{"field": "amount", "op": "<=", "value": 5000}],
                granted_by=personas.approver,
                source_request=source,
            )

    post_save.connect(grant_on, sender=Agent, weak=False, dispatch_uid="every-path-grant")
    try:
        yield
    finally:
        post_save.disconnect(sender=Agent, dispatch_uid="every-path-grant")


@every_path
def test_a_standing_approval_approves_the_call_without_asking_anyone(path, personas, resumes) -> None:
    """The call is approved at once, recorded as approved by the grant, and runs once."""
    pay = pay_tool(requires_confirmation=True)
    with payments_up_to_5000_granted(personas):
        root, _tool_run = drive(path, personas, None, pay)

    root.refresh_from_db()
    assert root.status == RunStatus.COMPLETED and pay.calls == [PAY_ARGS]
    [used] = ConfirmationRequest.objects.filter(grant__isnull=False)
    assert used.status == "approved" and used.reason == f"standing approval #{used.grant_id}"


@every_path
def test_a_standing_approval_never_approves_an_amount_it_cannot_compare(path, personas, resumes) -> None:
    """Doubt goes to a person (docs/design.md §1.16): the tool takes its amount as a number or a text, and
    the path's hook writes "5,000.00" — which a service may read as 5000 or as 5. The grant of
    payments up to 5,000 cannot tell, so a person is asked and nothing runs meanwhile."""
    pay = pay_tool(requires_confirmation=True, parameters=TEXT_OR_NUMBER_PAY_SCHEMA)
    as_text = [
        {"name": "set_arguments", "params": {"tools": "oa__purchase_pay", "values": {"amount": "5,000.00"}}}
    ]
    with payments_up_to_5000_granted(personas):
        root, tool_run = drive(path, personas, as_text, pay)

    root.refresh_from_db()
    assert root.status == RunStatus.AWAITING_APPROVAL and pay.calls == []
    [request] = ConfirmationRequest.objects.filter(run=tool_run)
    assert request.status == "pending" and request.grant_id is None
    assert request.tool_args["amount"] == "5,000.00"


@every_path
def test_with_telemetry_on_the_approval_is_a_child_of_the_call_that_asked(
    path, personas, resumes, recorded
) -> None:
    """One trace from the asking call to its verdict, whichever path asked; names, never values."""
    set_policy(personas)
    pay = pay_tool(requires_confirmation=True)

    root, tool_run = drive(path, personas, None, pay)
    request = ConfirmationRequest.objects.get()
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    settle(resumes, pay)

    root.refresh_from_db()
    assert root.status == RunStatus.COMPLETED and pay.calls == [PAY_ARGS]
    calls = [s for s in recorded.spans("fim.tool") if s.attributes["fim.run.id"] == tool_run.pk]
    [asking] = [s for s in calls if s.attributes["fim.tool.outcome"] == "waiting"]
    [approval] = recorded.spans("fim.approval")
    assert approval.parent.span_id == asking.context.span_id
    assert approval.context.trace_id == asking.context.trace_id
    assert approval.attributes["fim.approval.status"] == "approved"
    assert any(s.attributes["fim.tool.outcome"] == "succeeded" for s in calls)
    # Each attribute, not the repr of them all: a duration of 12.5000 ms is no amount of 5000.
    values = [value for span in recorded.spans() for value in span.attributes.values()]
    texts = [value for value in values if isinstance(value, str)]
    for argument in PAY_ARGS.values():
        token = re.compile(rf"(?<![\w.]){re.escape(str(argument))}(?![\w.])")
        assert argument not in values, "argument values stay out"
        assert not any(token.search(text) for text in texts), "argument values stay out"


def test_every_execution_path_has_a_row() -> None:
    """A path added to the product without a row here would go untested: seven rows, one per way
    a tool call is reached, and the eval's rows for the runner that bypasses the agent's hooks."""
    assert len(PATHS) == 7
    covered = {p.execution_path for p in PATHS} | {p.execution_path for p in EVAL_PATHS}
    assert covered == set(ExecutionPath)
