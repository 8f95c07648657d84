"""Shadow mode as operators use it: a declaration put in shadow runs on real calls, the calls go on,
and what it would have done is in the trace, in the tamper-evident record, on the hook's row as a
counter and in the Try panel; switching it to enforce is a recorded change (docs/design.md §1.1, §1.15)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse

from agents import events as ev
from agents.models import Agent, HookDeclaration, Run, RunStatus, ShadowDecision
from agents.services import run_start
from fimone.models import AppendOnlyError
from tenancy.models import Membership, Organization
from tests.admin_kit import logged_in, page_text, url
from tests.agents.engine_kit import Harness, events_of
from tests.console.admin_forms import hook_rows, organization_form
from tests.console.hook_editor_kit import payments as payments
from tests.console.test_hook_admin import row
from tests.every_path_kit import PAY_ARGS, pay_tool, paying_agent
from tests.personas import make_hook

pytestmark = pytest.mark.django_db

FROZEN = {"tools": ["oa__purchase_pay"], "message": "Payments are frozen."}


def paid_run(personas: Any, agent: Agent, tool: Any) -> Run:
    run = run_start(agent=agent, user=personas.member, input="pay PO-1", dispatch=False)
    Harness(tool).execute(run)
    run.refresh_from_db()
    return run


def test_an_agents_shadow_hook_lets_every_call_run_and_counts_what_it_would_have_done(governed) -> None:
    agent = paying_agent(governed, None)
    hook = make_hook(agent, "deny_tools", params=FROZEN, mode="shadow")
    pay = pay_tool()

    runs = [paid_run(governed, agent, pay) for _ in range(2)]

    assert pay.calls == [PAY_ARGS, PAY_ARGS]
    assert [r.status for r in runs] == [RunStatus.COMPLETED, RunStatus.COMPLETED]
    assert [d.run_id for d in ShadowDecision.objects.order_by("pk")] == [r.pk for r in runs]
    page = page_text(logged_in(governed.operator).get(url(Agent, "change", agent.pk)))
    link = f"{reverse('admin:agents_shadowdecision_changelist')}?declaration_pk={hook.pk}"
    assert f'<a href="{link}">2 would have blocked</a>' in page


def test_the_decisions_list_shows_an_organisations_own_decisions_to_its_readers_only(governed) -> None:
    agent = paying_agent(governed, None)
    hook = make_hook(governed.org, "deny_tools", params=FROZEN, mode="shadow")
    paid_run(governed, agent, pay_tool())
    listing = f"{reverse('admin:agents_shadowdecision_changelist')}?declaration_pk={hook.pk}"

    for reader in (governed.operator, governed.auditor, governed.admin):
        text = page_text(logged_in(reader).get(listing))
        assert "1 shadow decision" in text and "would have blocked" in text, reader

    rogue = page_text(logged_in(governed.other_operator).get(listing))  # Globex's operator
    assert "0 shadow decisions" in rogue and "deny_tools" not in rogue


def test_a_shadow_decision_is_append_only_and_verified_with_the_audit_chains(governed) -> None:
    agent = paying_agent(governed, None)
    make_hook(agent, "deny_tools", params=FROZEN, mode="shadow")
    paid_run(governed, agent, pay_tool())
    decision = ShadowDecision.objects.get()

    with pytest.raises(AppendOnlyError):
        ShadowDecision.objects.filter(pk=decision.pk).update(detail="nothing to see")
    with pytest.raises(AppendOnlyError):
        decision.delete()
    call_command("audit_verify")  # raises on a broken chain


def test_a_decision_that_cannot_be_recorded_still_lets_the_call_run(governed, monkeypatch) -> None:
    def broken(**fields: Any) -> None:
        raise RuntimeError("audit table unavailable")

    monkeypatch.setattr("agents.shadow_log.shadow_decisions_record", broken)
    agent = paying_agent(governed, None)
    make_hook(agent, "deny_tools", params=FROZEN, mode="shadow")
    pay = pay_tool()

    run = paid_run(governed, agent, pay)

    assert run.status == RunStatus.COMPLETED and pay.calls == [PAY_ARGS]
    notes = [e for e in events_of(run, ev.HOOK_SIDE_EFFECT) if e.get("shadow")]
    assert [n["shadow"] for n in notes] == ["block"], "the trace keeps the note all the same"
    assert not ShadowDecision.objects.exists()


def test_an_off_hook_does_not_run_at_all(governed) -> None:
    agent = paying_agent(governed, None)
    make_hook(agent, "deny_tools", params=FROZEN, mode="off")
    pay = pay_tool()

    run = paid_run(governed, agent, pay)

    assert pay.calls == [PAY_ARGS] and events_of(run, ev.HOOK_SIDE_EFFECT) == []
    assert [i["name"] for i in run.hook_chain["declared"]] == []


def test_the_chain_and_the_try_panel_mark_a_shadow_hook_and_say_what_it_would_do(governed, payments) -> None:
    make_hook(payments, "deny_tools", params=FROZEN, mode="shadow")
    operator = logged_in(governed.operator)

    page = page_text(operator.get(url(Agent, "change", payments.pk)))
    tried = page_text(
        operator.post(
            reverse("admin:agents_agent_try_chain", args=[payments.pk]),
            {"tool_name": "oa__purchase_pay", "arguments": '{"purchase_id": "PO-1", "amount": 10}'},
        )
    )

    assert re.search(r'data-hook="deny_tools">.*?<span class="mode-shadow"', page, re.S)
    assert "In shadow mode" in page
    assert "<strong>Allowed</strong>" in tried, "the call would go on"
    assert "would block (shadow)" in tried and "Payments are frozen." in tried
    assert not ShadowDecision.objects.exists(), "a trial records nothing"


def test_switching_an_enforced_hook_from_shadow_to_enforce_is_a_recorded_change(governed) -> None:
    org = governed.org
    hook = make_hook(org, "deny_tools", params=FROZEN, mode="shadow")

    def post(user: Any, mode: str):
        fields = row(id=hook.pk, name="deny_tools", params=FROZEN, mode=mode)
        memberships = list(Membership.objects.filter(organization=org).order_by("pk"))
        data = {**organization_form(org, memberships), **hook_rows(fields, initial=1)}
        return logged_in(user).post(url(Organization, "change", org.pk), data)

    refused = post(governed.operator, "enforce")  # an operator may not touch enforced hooks
    hook.refresh_from_db()
    assert hook.mode == "shadow", refused.status_code

    assert post(governed.admin, "enforce").status_code == 302
    hook.refresh_from_db()
    assert hook.mode == "enforce"
    last = HookDeclaration.history.filter(id=hook.pk).order_by("-history_id").first()
    assert (last.mode, last.history_user, last.prev_record.mode) == ("enforce", governed.admin, "shadow")
