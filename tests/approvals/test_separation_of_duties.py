"""Those who configure do not decide (docs/design.md §1.13).

Whoever configures an agent (its owner, and whoever the configuration history records changing
the agent, its hooks, the organisation's enforced hooks, its approver policy or the
organisation's default policy) decides its requests only if an organisation admin made them an
approver, and never their own call. The policy admin names only approvers and leaves the
self-approval settings to organisation admins. Checked on save, when the approver snapshot is
taken, and again at decision time on every path (the service, the web inbox, the REST API, a card
click; the click decided on the server's event loop is in
tests/channels_im/test_click_guards.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from agents.demo import demo_setup
from agents.models import Agent, Conversation, Run
from agents.services import run_start
from approvals.models import (
    ApproverPolicy,
    ChannelConfig,
    ConfirmationEvent,
    ConfirmationRequest,
    ConfirmationStatus,
    EscalationTier,
)
from approvals.policy import approver_ids, policy_for
from approvals.services import confirmation_decide, confirmation_escalate_due, confirmation_request_open
from channels_im.models import ImIdentity
from tenancy.models import Membership, Role
from tests.admin_kit import logged_in, page_text, url
from tests.agents.engine_kit import Harness
from tests.approvals.kit import (
    make_approver,
    pay_tool,
    paying_agent,
    policy_form,
    set_policy,
)
from tests.channels_im.click_kit import APRIL, post_click
from tests.channels_im.feishu_fake import FakeFeishu, configure_channel
from tests.personas import make_hook, make_user

Kind = ConfirmationEvent.Kind

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def feishu(personas: Any) -> Iterator[ChannelConfig]:
    """The organisation's default channel, Feishu, where April is linked."""
    with FakeFeishu(hang_seconds=1.0) as server:
        ImIdentity.objects.create(
            organization=personas.org, user=personas.approver, provider="feishu", external_id=APRIL
        )
        yield configure_channel(personas.org, fake=server)


def configures(user: Any, obj: Any) -> None:
    """``user`` changes ``obj`` (an agent, a hook declaration, a policy), recorded in its history
    as the admin records a change."""
    obj._history_user = user
    obj.save()


def a_hook(owner: Any) -> Any:
    """A hook declaration of an agent, or one its organisation enforces."""
    return make_hook(owner, "deny_tools", params={"tools": "oa__danger"})


def parked_by(personas: Any, requester: Any, agent: Agent | None = None) -> ConfirmationRequest:
    """``requester``'s run of the paying agent, parked on its approval."""
    agent = agent or paying_agent(personas)
    run = run_start(agent=agent, user=requester, input="pay PO-1001")
    assert Harness(pay_tool()).execute(run) == "awaiting_approval"
    return ConfirmationRequest.objects.get(run=run)


# --- the paths a decision can take ---------------------------------------------------------------


def by_service(request: ConfirmationRequest, user: Any, **_: Any) -> None:
    confirmation_decide(request_id=request.pk, user=user, approve=True)


def in_the_inbox(request: ConfirmationRequest, user: Any, **_: Any) -> None:
    client = Client()
    client.force_login(user)
    client.post(f"/approvals/{request.pk}/decide/", {"decision": "approve"})


def through_the_api(request: ConfirmationRequest, user: Any, **_: Any) -> None:
    client = APIClient()
    client.force_login(user)
    client.post(f"/api/approvals/{request.pk}/decision/", {"decision": "approve"}, format="json")


def by_card_click(request: ConfirmationRequest, user: Any, *, feishu: Any) -> None:
    """April's signed Feishu click (on PostgreSQL the two-statement click path reads her standing
    first; the ORM path logs the refusal)."""
    assert user.username == "april", "the Feishu channel links April only"
    response = post_click(Client(), feishu, request, decision="approve")
    assert response.status_code == 200 and response.json()["toast"]["type"] == "error"


PATHS: dict[str, Callable[..., None]] = {
    "service": by_service,
    "inbox": in_the_inbox,
    "api": through_the_api,
    "card-click": by_card_click,
}


def assert_refused(request: ConfirmationRequest, user: Any, why: str) -> None:
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING and not request.votes.exists()
    refusal = request.events.filter(kind=Kind.CLICK_REFUSED, actor=user).last()
    assert refusal is not None, "the refusal is recorded"
    assert why in refusal.details["reason"]


@pytest.mark.parametrize("path", list(PATHS))
def test_it_refuses_a_named_approver_who_configures_the_agent_after_losing_the_approver_role(
    personas,
    resumes,
    feishu,
    path,
) -> None:
    policy = set_policy(personas, allow_org_approvers=False, allow_agent_owner=False)
    policy.named_users.set([personas.approver])
    request = parked_by(personas, personas.member)
    assert set(request.approvers.all()) == {personas.approver}
    # Since the card went out, April became an operator and changed the agent.
    Membership.objects.filter(user=personas.approver).update(role=Role.OPERATOR)
    configures(personas.approver, request.agent)

    PATHS[path](request, personas.approver, feishu=feishu)

    assert_refused(request, personas.approver, "decides only if an organisation admin made them an approver")


@pytest.mark.parametrize("path", list(PATHS))
def test_it_refuses_an_approver_their_own_call_once_they_changed_the_agents_hooks(
    personas,
    resumes,
    feishu,
    path,
) -> None:
    set_policy(personas, allow_initiator=True, allow_self_approval=True)
    agent = paying_agent(personas)
    request = parked_by(personas, personas.approver, agent)
    assert request.approvers.filter(pk=personas.approver.pk).exists(), "she asked before configuring"
    configures(personas.approver, a_hook(agent))

    PATHS[path](request, personas.approver, feishu=feishu)

    assert_refused(request, personas.approver, "may not decide their own call")


@pytest.mark.parametrize("path", ["service", "inbox", "api"])
def test_it_refuses_an_operator_a_policy_names_around_the_admin(personas, resumes, path) -> None:
    # The finding: oscar names himself (here without the admin, which refuses it) and approves.
    set_policy(personas).named_users.set([personas.operator])
    request = parked_by(personas, personas.member)
    assert not request.approvers.filter(pk=personas.operator.pk).exists(), "not in the snapshot"

    PATHS[path](request, personas.operator)

    assert_refused(request, personas.operator, "not an approver of this request")


# --- the approver snapshot ------------------------------------------------------------------------


def test_the_owner_who_is_not_an_approver_is_left_out_of_the_snapshot(personas, resumes) -> None:
    set_policy(personas)  # allow_agent_owner on
    request = parked_by(personas, personas.member)

    assert set(request.approvers.all()) == {personas.approver, personas.admin}


def test_the_owner_an_admin_made_an_approver_decides_others_calls(personas, resumes) -> None:
    make_approver(personas, personas.operator)
    set_policy(personas, allow_org_approvers=False)
    request = parked_by(personas, personas.member)

    assert set(request.approvers.all()) == {personas.operator}
    assert confirmation_decide(request_id=request.pk, user=personas.operator, approve=True).accepted


@pytest.mark.parametrize(
    "changed",
    ["the agent", "its own hook", "an enforced hook", "its policy", "the default policy"],
)
def test_whoever_changed_the_agent_its_hooks_or_its_policies_is_left_out_unless_an_approver(
    personas, resumes, changed
) -> None:
    ivy = make_user("ivy", personas.org, Role.OPERATOR, is_staff=True)
    agent = paying_agent(personas)
    default = set_policy(personas)
    own = set_policy(personas, agent=agent, allow_org_approvers=True)
    own.named_users.set([ivy])  # as written before the rule (the admin now refuses it)
    touched = {
        "the agent": agent,
        "its own hook": a_hook(agent),
        "an enforced hook": a_hook(personas.org),
        "its policy": own,
        "the default policy": default,
    }[changed]
    policy = policy_for(agent=agent)
    assert ivy.pk in approver_ids(policy=policy, agent=agent, requester_id=personas.member.pk)

    configures(ivy, touched)

    assert ivy.pk not in approver_ids(policy=policy, agent=agent, requester_id=personas.member.pk)
    make_approver(personas, ivy)  # an organisation admin makes her an approver
    assert ivy.pk in approver_ids(policy=policy, agent=agent, requester_id=personas.member.pk)
    assert ivy.pk not in approver_ids(policy=policy, agent=agent, requester_id=ivy.pk), "never her own"


def test_another_agents_configuration_does_not_count(personas, resumes) -> None:
    other = paying_agent(personas, name="Ledger bot")
    configures(personas.approver, a_hook(other))
    set_policy(personas, allow_initiator=True, allow_self_approval=True)

    request = parked_by(personas, personas.approver)

    assert request.approvers.filter(pk=personas.approver.pk).exists()


def test_an_operator_running_their_own_agent_cannot_approve_it_even_with_self_approval(
    personas, resumes
) -> None:
    set_policy(personas, allow_initiator=True, allow_self_approval=True)
    request = parked_by(personas, personas.operator)

    assert personas.operator not in request.approvers.all()
    outcome = confirmation_decide(request_id=request.pk, user=personas.operator, approve=True)
    assert outcome.refused
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING


def test_an_escalation_tier_adds_no_configurer_without_the_approver_role(personas, resumes) -> None:
    ivy = make_user("ivy", personas.org, Role.APPROVER)
    policy = set_policy(personas, allow_org_approvers=False, allow_agent_owner=False)
    policy.named_users.set([personas.approver])
    tier = EscalationTier.objects.create(policy=policy, after_seconds=60)
    tier.named_users.set([ivy])
    request = parked_by(personas, personas.member)
    Membership.objects.filter(user=ivy).update(role=Role.OPERATOR)
    configures(ivy, request.agent)

    confirmation_escalate_due(now=request.created_at + dt.timedelta(seconds=61))

    assert not request.approvers.filter(pk=ivy.pk).exists()
    assert request.events.get(kind=Kind.ESCALATED).details["added_approvers"] == []


def test_the_demo_still_lets_april_approve_alices_payment(resumes) -> None:
    demo_setup(base_url="http://127.0.0.1:9")
    agent = Agent.objects.get(name="Procurement assistant")
    april, alice, oscar = (
        Membership.objects.get(organization=agent.organization, user__username=name).user
        for name in ("april", "alice", "oscar")
    )
    request = parked_by_agent(agent, alice)

    assert april in request.approvers.all() and oscar not in request.approvers.all()
    assert confirmation_decide(request_id=request.pk, user=april, approve=True).accepted


def parked_by_agent(agent: Agent, user: Any) -> ConfirmationRequest:
    """A request of ``agent`` for ``user``, as the gate opens it (no engine: the demo's agent
    talks to a real model)."""
    conversation = Conversation.objects.create(organization=agent.organization, agent=agent, user=user)
    run = Run.objects.create(conversation=conversation, agent=agent, user=user, input="pay")
    # A payment below the demo's stages (from 50,000 on): a call without its amount would be in
    # doubt, and doubt asks the stages' people (docs/design.md §1.16).
    args = {"purchase_id": "PO-1001", "amount": 1200}
    return confirmation_request_open(
        run=run, tool_call_id="call-1", tool_name="oa__purchase_pay", tool_args=args, args_sha256="0" * 64
    ).request


# --- the policy admin ------------------------------------------------------------------------------


def test_the_policy_admin_explains_that_configurers_decide_only_as_approvers(governed) -> None:
    page = page_text(logged_in(governed.operator).get(url(ApproverPolicy, "add")))

    assert "Operators decide nothing unless they are also approvers" in page
    assert "decides that agent's requests only if an organisation admin made them an approver" in page
    assert "approvers and admins of the organisation only" in page


def test_it_refuses_an_operator_naming_himself_in_a_policy_and_he_cannot_approve(governed, resumes) -> None:
    agent = paying_agent(governed)
    data = policy_form(
        ApproverPolicy(organization=governed.org), agent=str(agent.pk), named_users=str(governed.operator.pk)
    )

    answer = logged_in(governed.operator).post(url(ApproverPolicy, "add"), data)

    assert answer.status_code == 200
    assert "Only approvers and admins of Acme can be named; not oscar." in page_text(answer)
    assert not ApproverPolicy.objects.filter(agent=agent).exists()


def test_it_refuses_a_member_in_an_escalation_tier(governed) -> None:
    policy = ApproverPolicy.objects.create(organization=governed.org)
    data = policy_form(
        policy,
        **{
            "tiers-TOTAL_FORMS": "1",
            "tiers-0-after_seconds": "300",
            "tiers-0-named_users": str(governed.member.pk),
            "tiers-0-channel_config": "",
        },
    )

    answer = logged_in(governed.admin).post(url(ApproverPolicy, "change", policy.pk), data)

    assert answer.status_code == 200
    assert "Only approvers and admins of Acme can be named; not alice." in page_text(answer)
    assert not EscalationTier.objects.filter(policy=policy).exists()


def test_an_organisation_admin_names_an_approver_and_turns_self_approval_on(governed) -> None:
    policy = ApproverPolicy.objects.create(organization=governed.org)
    data = policy_form(
        policy, named_users=str(governed.approver.pk), allow_self_approval="on", allow_initiator="on"
    )

    answer = logged_in(governed.admin).post(url(ApproverPolicy, "change", policy.pk), data)

    assert answer.status_code == 302, page_text(answer)[:2000]
    policy.refresh_from_db()
    assert policy.allow_self_approval and policy.allow_initiator
    assert list(policy.named_users.all()) == [governed.approver]


def test_the_self_approval_settings_are_disabled_for_an_operator(governed) -> None:
    policy = ApproverPolicy.objects.create(organization=governed.org)

    page = page_text(logged_in(governed.operator).get(url(ApproverPolicy, "change", policy.pk)))

    for name in ("allow_self_approval", "allow_initiator"):
        field = page.split(f'name="{name}"')[1].split(">")[0]
        assert "disabled" in field, name
    assert "Set by organisation admins only." in page


@pytest.mark.parametrize("forged", ["allow_self_approval", "allow_initiator"])
def test_it_refuses_an_operators_forged_post_turning_a_self_approval_setting_on(governed, forged) -> None:
    policy = ApproverPolicy.objects.create(organization=governed.org)

    answer = logged_in(governed.operator).post(
        url(ApproverPolicy, "change", policy.pk), policy_form(policy, **{forged: "on"})
    )

    assert answer.status_code == 200
    assert "Only an organisation admin of Acme can change this." in page_text(answer)
    policy.refresh_from_db()
    assert not policy.allow_self_approval and not policy.allow_initiator


def test_it_refuses_an_operator_a_new_policy_with_self_approval_on(governed) -> None:
    agent = paying_agent(governed)
    data = policy_form(ApproverPolicy(organization=governed.org), agent=str(agent.pk), allow_initiator="on")

    answer = logged_in(governed.operator).post(url(ApproverPolicy, "add"), data)

    assert answer.status_code == 200
    assert "Only an organisation admin of Acme can change this." in page_text(answer)
    assert not ApproverPolicy.objects.filter(agent=agent).exists()


def test_an_operator_saving_other_settings_keeps_what_the_admin_set(governed) -> None:
    policy = ApproverPolicy.objects.create(
        organization=governed.org, allow_initiator=True, allow_self_approval=True
    )
    data = policy_form(policy, timeout_seconds="900")  # the disabled boxes are not sent

    answer = logged_in(governed.operator).post(url(ApproverPolicy, "change", policy.pk), data)

    assert answer.status_code == 302, page_text(answer)[:2000]
    policy.refresh_from_db()
    assert policy.timeout_seconds == 900 and policy.allow_initiator and policy.allow_self_approval


def test_a_policy_the_admin_saves_makes_its_editor_a_configurer(governed, resumes) -> None:
    # Adam (an admin, so an approver) sets self-approval on through the admin, then runs the
    # agent himself: he decides others' calls, never his own.
    policy = ApproverPolicy.objects.create(organization=governed.org, inline_wait_seconds=0)
    data = policy_form(policy, allow_self_approval="on", allow_initiator="on", inline_wait_seconds="0")
    assert logged_in(governed.admin).post(url(ApproverPolicy, "change", policy.pk), data).status_code == 302

    own = parked_by(governed, governed.admin)
    others = parked_by(governed, governed.member)

    assert governed.admin not in own.approvers.all()
    assert governed.admin in others.approvers.all()
