"""The demo as people use it: its agent greets, pays the pending purchases one by one and says so
in sentences, says plainly when nothing is pending, tells who rejected a payment and why, raises
purchase orders (asking an approver from 50,000 on); approvers see what a payment is for; and
``manage.py demo_setup`` puts everything back.

The agent talks to the demo payments service over real HTTP (the live server), through the
platform's engine, hooks and approval gate; april decides as she would in her inbox."""

from __future__ import annotations

import datetime as dt
import io
import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.core.management import call_command

from agents.demo import DEMO_AGENT_NAME, ORDER_APPROVAL_HOOK, demo_setup
from agents.engine.runner import run_execute, run_resume
from agents.models import Agent, Conversation, HookDeclaration, Run, RunStatus, ToolExecution
from agents.services import run_start
from approvals.models import ApproverPolicy, ConfirmationRequest
from approvals.services import confirmation_decide, confirmation_expire_due
from demo_payments.models import Purchase

pytestmark = pytest.mark.django_db(transaction=True)

User = get_user_model()


class Demo:
    """The demo served by the live server; alice chats in one conversation, april decides."""

    def __init__(self, base_url: str) -> None:
        demo_setup(base_url=base_url)
        self.agent = Agent.objects.get(name=DEMO_AGENT_NAME)
        # Parked at once instead of waiting inline: the test decides, then resumes the run.
        ApproverPolicy.objects.filter(organization=self.agent.organization, agent=None).update(
            inline_wait_seconds=0
        )
        self.alice, self.april = User.objects.get(username="alice"), User.objects.get(username="april")
        self.conversation = Conversation.objects.create(
            organization=self.agent.organization, agent=self.agent, user=self.alice, title="Demo"
        )

    def says(self, text: str) -> Run:
        """Alice sends ``text``; the run goes as far as it can without a person."""
        run = run_start(agent=self.agent, user=self.alice, input=text, conversation=self.conversation)
        async_to_sync(run_execute)(run.pk)
        run.refresh_from_db()
        return run

    def request_of(self, run: Run) -> ConfirmationRequest:
        assert run.status == RunStatus.AWAITING_APPROVAL, run.status
        return ConfirmationRequest.objects.get(run=run)

    def april_decides(self, run: Run, *, approve: bool, reason: str = "") -> Run:
        request = self.request_of(run)
        assert confirmation_decide(
            request_id=request.pk, user=self.april, approve=approve, reason=reason
        ).accepted
        return self.resumed(run)

    def resumed(self, run: Run) -> Run:
        async_to_sync(run_resume)(run.pk, reason="decided")
        run.refresh_from_db()
        assert run.status == RunStatus.COMPLETED, run.status
        return run

    def pays(self) -> str:
        """Alice asks to pay the pending purchase; april approves when asked. The final answer."""
        run = self.says("please pay the pending purchase")
        if run.status == RunStatus.AWAITING_APPROVAL:
            run = self.april_decides(run, approve=True, reason="within budget")
        return run.output


@pytest.fixture
def demo(live_server: Any, resumes: Any) -> Demo:
    return Demo(live_server.url)


def test_hello_greets_and_says_what_the_agent_can_do_without_calling_a_tool(demo: Demo) -> None:
    run = demo.says("hello")

    assert run.status == RunStatus.COMPLETED
    assert run.output.startswith("Hello! I'm the procurement assistant of the Acme demo.")
    assert "pay the pending purchase" in run.output and "order 2,000 USD from Contoso" in run.output
    assert not ToolExecution.objects.filter(run=run).exists()


def test_four_payments_pay_the_two_pending_purchases_in_sentences_then_say_nothing_is_pending(
    demo: Demo,
) -> None:
    answers = [demo.pays() for _ in range(4)]

    references = dict(Purchase.objects.values_list("id", "paid_reference"))
    assert answers[:2] == [
        f"Paid PO-1001: 1,200.00 USD to Lumen Office Supplies, reference {references['PO-1001']}.",
        f"Paid PO-1002: 4,800.00 USD to Northwind Cloud, reference {references['PO-1002']}.",
    ]
    for answer in answers[2:]:
        # Said to a person in the chat: no developer's command (the demo payments page has them).
        assert answer == "Nothing is pending: every purchase is paid."
        assert "manage.py" not in answer and "make run" not in answer
    assert ConfirmationRequest.objects.count() == 2  # nothing was asked when nothing was pending


def test_a_rejected_payment_is_reported_with_who_rejected_it_and_why(demo: Demo) -> None:
    run = demo.april_decides(
        demo.says("please pay the pending purchase"), approve=False, reason="Not this month."
    )

    assert run.output == "Nothing was paid: april rejected the payment (Not this month)."
    assert Purchase.objects.get(pk="PO-1001").status == Purchase.Status.PENDING


def test_an_expired_payment_is_reported_plainly(demo: Demo) -> None:
    run = demo.says("please pay the pending purchase")
    request = demo.request_of(run)

    assert confirmation_expire_due(now=request.expires_at + dt.timedelta(seconds=1)) == 1
    run = demo.resumed(run)

    assert run.output == (
        "Nothing was paid: nobody decided on the payment within 600 seconds, so the request expired. "
        "Ask me again to send a new request."
    )


def test_the_approver_reads_what_the_payment_is_for_from_the_purchase_itself(demo: Demo) -> None:
    request = demo.request_of(demo.says("please pay the pending purchase"))

    assert request.tool_title == "Pay a purchase"
    assert request.context == [
        {"label": "Vendor", "value": "Lumen Office Supplies"},
        {"label": "Description", "value": "200 reams of A4 paper and 12 toner cartridges"},
        {"label": "Amount", "value": "1,200.00 USD"},
    ]
    assert {u.username for u in request.approvers.all()} == {"april", "lee", "fiona", "adam"}


def test_a_purchase_named_by_its_number_is_paid_or_said_to_be_paid_or_unknown(demo: Demo) -> None:
    paying = demo.says("pay PO-1002")
    assert demo.request_of(paying).tool_args["purchase_id"] == "PO-1002"
    paid = demo.april_decides(paying, approve=True).output
    reference = Purchase.objects.get(pk="PO-1002").paid_reference

    assert paid == f"Paid PO-1002: 4,800.00 USD to Northwind Cloud, reference {reference}."
    assert demo.says("pay PO-1002").output == (
        f"PO-1002 is already paid: 4,800.00 USD to Northwind Cloud, reference {reference}."
    )
    assert demo.says("pay PO-4242").output == "There is no purchase PO-4242."


def test_the_list_of_purchases_reads_as_a_list_not_json(demo: Demo) -> None:
    answer = demo.says("show the purchases").output

    assert answer.splitlines()[2:] == [
        "- **PO-1001** · Lumen Office Supplies, 200 reams of A4 paper and 12 toner cartridges: "
        "1,200.00 USD · pending",
        "- **PO-1002** · Northwind Cloud, Annual hosting renewal: 4,800.00 USD · pending",
        "- **PO-1003** · Bolt Couriers, Courier services, March: 350.50 USD · paid",
    ]
    assert "{" not in answer


def test_a_small_purchase_order_is_raised_at_once(demo: Demo) -> None:
    run = demo.says("order 2,000 USD from Contoso for 10 monitors")

    assert run.output == (
        'Raised PO-1004: 2,000.00 USD to Contoso for 10 monitors. It is pending; say "pay PO-1004" to pay it.'
    )
    assert not ConfirmationRequest.objects.exists()


def test_a_purchase_order_of_50000_or_more_asks_the_team_lead_then_finance(demo: Demo) -> None:
    run = demo.says("Order 60,000 from Contoso for 40 laptops")
    request = demo.request_of(run)

    assert request.tool_args == {"vendor": "Contoso", "amount": 60000, "description": "40 laptops"}
    assert [stage["name"] for stage in request.stage_plan] == ["Team lead", "Finance"]
    assert not Purchase.objects.filter(vendor="Contoso").exists()
    lee = get_user_model().objects.get(username="lee")
    assert confirmation_decide(request_id=request.pk, user=lee, approve=True).counted
    rejected = demo.april_decides(run, approve=False, reason="Too many laptops")
    assert (
        rejected.output
        == "No purchase order was raised: april rejected the purchase order (Too many laptops)."
    )


def test_something_it_does_not_understand_is_answered_with_what_it_can_do(demo: Demo) -> None:
    answer = demo.says("make me a sandwich").output

    assert answer.startswith("I'm not sure what you mean. I can:")


def test_the_demo_ships_an_approver_policy_and_an_order_rule_and_reseeding_puts_them_back(demo: Demo) -> None:
    policy = ApproverPolicy.objects.get(organization=demo.agent.organization, agent=None)
    rule = HookDeclaration.objects.get(agent=demo.agent, name="confirm_when")
    assert (policy.allow_org_approvers, policy.allow_agent_owner, policy.timeout_seconds) == (
        True,
        False,
        600,
    )
    assert rule.params == ORDER_APPROVAL_HOOK and rule.enabled
    demo.pays()
    ApproverPolicy.objects.filter(pk=policy.pk).update(timeout_seconds=30)
    HookDeclaration.objects.filter(pk=rule.pk).update(mode="off")
    policy.stages.filter(name="Finance").update(approvals_required=1)

    out = io.StringIO()
    call_command("demo_setup", base_url="http://127.0.0.1:1", stdout=out)

    policy.refresh_from_db()
    rule.refresh_from_db()
    assert (policy.timeout_seconds, policy.inline_wait_seconds, rule.mode) == (600, 20, "enforce")
    assert Purchase.objects.filter(status=Purchase.Status.PENDING).count() == 2
    text = out.getvalue()
    assert "Demo data is ready (reset to its first state)." in text
    assert list(policy.stages.values_list("name", "approvals_required")) == [("Team lead", 1), ("Finance", 2)]
    assert (
        "Approver policy: approvers and admins decide, within 10 minutes; from 50,000 on, alice's team "
        "lead (lee) first, then two of finance (april, fiona, adam)." in text
    )
    assert re.search(r"Run `manage.py demo_setup` again to reset it", text)
