"""Roles in the admin, for every role on every admin model: what each may list, view, add,
change and delete (pages and POSTs), with the permissions the product really gives them
(``tenancy.roles``), and the wall between organisations.

The expectations below are written out by hand, as the product's contract, not derived from the
role map: a permission added to a role by mistake makes a test fail here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission

from agents.audit import connector_call_log_record
from agents.demo import demo_setup
from agents.models import Agent, Connector, ConnectorCallLog, Conversation, Run, ShadowDecision, ToolExecution
from agents.shadow_log import shadow_decisions_record
from approvals.models import ApproverPolicy, ChannelConfig, ConfirmationRequest
from approvals.services import confirmation_decide
from channels_im.models import ImIdentity
from evals.models import EvalRun, EvalSet
from hooks import SideEffect
from mcp_gateway.models import Gateway, GatewayCall
from sso.models import IdentityProvider, SignInRecord
from tenancy.models import Invitation, Membership, Organization, Role
from tenancy.roles import GROUP_NAMES, role_groups_sync, user_roles_sync
from tests.admin_kit import logged_in, page_text, url
from tests.approvals.kit import recorded_request
from tests.personas import (
    kept_for_the_module,
    make_action,
    make_agent,
    make_governed,
    make_http_connector,
    make_personas,
    make_user,
    with_roles,
)
from workflows.models import Workflow, WorkflowRun

VIEW, ADD, CHANGE, DELETE = "view", "add", "change", "delete"
CONFIGURE = {VIEW, ADD, CHANGE}

# model -> role -> what the role may do there (anything not listed: 403).
CONTRACT: dict[type, dict[str, set[str]]] = {
    Agent: {"auditor": {VIEW}, "operator": CONFIGURE, "admin": CONFIGURE},
    Connector: {"auditor": {VIEW}, "operator": CONFIGURE, "admin": CONFIGURE},
    Organization: {"auditor": {VIEW}, "operator": {VIEW}, "admin": {VIEW, CHANGE}},
    Invitation: {"admin": {VIEW, ADD, DELETE}},
    Conversation: {"auditor": {VIEW}, "operator": {VIEW}, "admin": {VIEW}},
    Run: {"auditor": {VIEW}, "operator": {VIEW}, "admin": {VIEW}},
    ToolExecution: {"auditor": {VIEW}, "operator": {VIEW}, "admin": {VIEW}},
    ApproverPolicy: {"auditor": {VIEW}, "operator": CONFIGURE | {DELETE}, "admin": CONFIGURE | {DELETE}},
    ConfirmationRequest: {"auditor": {VIEW}, "operator": {VIEW}, "admin": {VIEW}},
    ChannelConfig: {"auditor": {VIEW}, "operator": CONFIGURE | {DELETE}, "admin": CONFIGURE | {DELETE}},
    ImIdentity: {"auditor": {VIEW}, "operator": {VIEW, DELETE}, "admin": {VIEW, DELETE}},
    ConnectorCallLog: {"auditor": {VIEW}, "operator": {VIEW}, "admin": {VIEW}},
    ShadowDecision: {"auditor": {VIEW}, "operator": {VIEW}, "admin": {VIEW}},
    Workflow: {"auditor": {VIEW}, "operator": CONFIGURE, "admin": CONFIGURE},
    WorkflowRun: {"auditor": {VIEW}, "operator": {VIEW}, "admin": {VIEW}},
    EvalSet: {"auditor": {VIEW}, "operator": CONFIGURE, "admin": CONFIGURE},
    EvalRun: {"auditor": {VIEW}, "operator": {VIEW, ADD}, "admin": {VIEW, ADD}},
    Gateway: {"auditor": {VIEW}, "operator": CONFIGURE, "admin": CONFIGURE},  # never deleted
    GatewayCall: {"auditor": {VIEW}, "operator": {VIEW}, "admin": {VIEW}},
    # Who signs in with which roles is the organisation admin's to configure.
    IdentityProvider: {"auditor": {VIEW}, "operator": {VIEW}, "admin": CONFIGURE | {DELETE}},
    SignInRecord: {"auditor": {VIEW}, "operator": {VIEW}, "admin": {VIEW}},
}
STAFF_ROLES = ("auditor", "operator", "admin")
SUPERUSER_ONLY = [model for model in admin.site._registry if model not in CONTRACT]


def estate_of(org: Organization, owner: Any, requester: Any, approver: Any, prefix: str) -> dict[type, Any]:
    """One object of every organisation-owned admin model, named with ``prefix``."""
    agent = make_agent(org, owner, name=f"{prefix} agent")
    connector = make_http_connector(org, "https://example.test/", slug=f"{prefix.lower()}conn")
    connector.name = f"{prefix} connector"
    connector.save()
    make_action(connector, "lookup")
    request = recorded_request(
        None, agent=agent, requester=requester, approvers=[approver], tool_name=f"{prefix.lower()}_tool"
    )
    tool_execution = ToolExecution.objects.create(
        run=request.run,
        tool_call_id="c1",
        tool_name=f"{prefix.lower()}_lookup",
        args={},
        args_sha256="0" * 64,
    )
    invitation = Invitation.objects.create(
        organization=org,
        email=f"{prefix.lower()}@example.test",
        token_sha256=f"{prefix}" * 8,
        expires_at=request.expires_at,
    )
    graph = {
        "nodes": [{"id": "s", "type": "start"}, {"id": "e", "type": "end"}],
        "edges": [{"from": "s", "to": "e"}],
    }
    workflow = Workflow.objects.create(organization=org, name=f"{prefix} workflow", graph=graph)
    workflow_run = WorkflowRun.objects.create(
        workflow=workflow,
        organization=org,
        started_by=requester,
        graph=graph,
        hook_chain={},
        status="completed",
    )
    eval_set = EvalSet.objects.create(organization=org, name=f"{prefix} evals")
    eval_run = EvalRun.objects.create(organization=org, eval_set=eval_set, agent=agent, started_by=owner)
    gateway = Gateway.objects.create(organization=org, agent=agent, name=f"{prefix} gateway")
    gateway_call = GatewayCall.objects.create(
        gateway=gateway,
        run=request.run,
        user=requester,
        tool_name=f"{prefix.lower()}_tool",
        args_sha256="0" * 64,
        tool_call_id="c1",
    )
    provider = IdentityProvider.objects.create(
        organization=org,
        name=f"{prefix} IdP",
        slug=f"{prefix.lower()}-idp",
        issuer=f"https://login.{prefix.lower()}.test",
        client_id="fim-one",
        secrets={"client_secret": "s"},
    )
    return {
        IdentityProvider: provider,
        SignInRecord: SignInRecord.objects.create(
            organization=org, provider=provider, kind=SignInRecord.Kind.REFUSED, detail=f"{prefix} refusal"
        ),
        Gateway: gateway,
        GatewayCall: gateway_call,
        Workflow: workflow,
        WorkflowRun: workflow_run,
        EvalSet: eval_set,
        EvalRun: eval_run,
        Organization: org,
        Agent: agent,
        Connector: connector,
        Conversation: request.run.conversation,
        Run: request.run,
        ToolExecution: tool_execution,
        ApproverPolicy: ApproverPolicy.objects.create(organization=org, timeout_seconds=321),
        ConfirmationRequest: request,
        ChannelConfig: ChannelConfig.objects.create(organization=org, kind="web", name=f"{prefix} channel"),
        ImIdentity: ImIdentity.objects.create(
            organization=org, user=approver, provider="slack", external_id=f"U{prefix.upper()}"
        ),
        Invitation: invitation,
        ConnectorCallLog: call_log_row(org, agent, request.run, prefix),
        ShadowDecision: shadow_decision_row(org, agent, request.run, prefix),
    }


def shadow_decision_row(org: Any, agent: Any, run: Any, prefix: str) -> ShadowDecision:
    """A chained shadow decision, written the way the engine writes one."""
    note = SideEffect("deny_tools", "shadow: would have blocked the call", shadow={"decision": "block"})
    [row] = shadow_decisions_record(
        org_id=org.pk,
        agent_id=agent.pk,
        run_id=run.pk,
        point="PreToolUse",
        tool_call_id="c1",
        tool_name=f"{prefix.lower()}_lookup",
        notes=[note],
    )
    return row


def call_log_row(org: Any, agent: Any, run: Any, prefix: str) -> ConnectorCallLog:
    """A chained log row, written the way the ``audit_log`` hook writes one."""
    connector_call_log_record(
        org_id=org.pk,
        agent_id=agent.pk,
        user_id=None,
        run_id=run.pk,
        tool_call_id="c1",
        tool_name=f"{prefix.lower()}_lookup",
        arguments={},
        outcome="succeeded",
    )
    return ConnectorCallLog.objects.get(run=run, tool_call_id="c1")


@pytest.fixture(scope="module")
def _made_once(
    request: pytest.FixtureRequest, django_db_setup: None, django_db_blocker: Any
) -> Iterator[tuple[Any, dict]]:
    """The governed personas and both estates, made once for the module's ~400 cases (each rolled
    back on its own: ``kept_for_the_module``)."""
    with kept_for_the_module(request, django_db_blocker):
        p = make_governed(make_personas())
        yield (
            p,
            {
                "acme": estate_of(p.org, p.operator, p.member, p.approver, "Acme"),
                "globex": estate_of(p.other_org, p.other_operator, p.stranger, p.stranger, "Globex"),
            },
        )


@pytest.fixture
def governed(_made_once: tuple[Any, dict], db: None) -> Any:
    return _made_once[0]


@pytest.fixture
def estates(_made_once: tuple[Any, dict], db: None) -> dict[str, dict[type, Any]]:
    return _made_once[1]


def role_user(personas: Any, role: str) -> Any:
    return getattr(personas, role)


def cases() -> list[tuple[str, type, str]]:
    return [
        (role, model, action)
        for role in STAFF_ROLES
        for model in CONTRACT
        for action in (VIEW, ADD, CHANGE, DELETE)
    ]


@pytest.mark.parametrize(("role", "model", "action"), cases(), ids=lambda v: getattr(v, "__name__", v))
def test_each_role_may_do_exactly_what_its_contract_says_on_each_model(
    governed, estates, role, model, action
) -> None:
    client = logged_in(role_user(governed, role))
    obj = estates["acme"][model]
    allowed = action in CONTRACT[model].get(role, set())

    if action == VIEW:
        listing = client.get(url(model, "changelist"))
        page = client.get(url(model, "change", obj.pk))
        assert (listing.status_code, page.status_code) == ((200, 200) if allowed else (403, 403))
    elif action == ADD:
        page = client.get(url(model, "add"))
        posted = client.post(url(model, "add"), {})
        assert page.status_code == (200 if allowed else 403)
        assert posted.status_code == (200 if allowed else 403), (
            "an empty add form is answered with its errors"
        )
        assert model.objects.count() == 2, "nothing was added"
    elif action == CHANGE:
        posted = client.post(url(model, "change", obj.pk), {})
        # Allowed: the form comes back with errors (nothing saved); refused: 403.
        assert posted.status_code == (200 if allowed else 403)
    else:
        page = client.get(url(model, "delete", obj.pk))
        assert page.status_code == (200 if allowed else 403)
        refused = client.post(url(model, "delete", obj.pk), {"post": "yes"})
        if not allowed:
            assert refused.status_code == 403 and model.objects.filter(pk=obj.pk).exists()


@pytest.mark.parametrize("role", STAFF_ROLES)
@pytest.mark.parametrize("model", SUPERUSER_ONLY, ids=lambda m: m._meta.label)
def test_auth_celery_beat_lockouts_and_tokens_are_for_superusers_only(governed, role, model) -> None:
    response = logged_in(role_user(governed, role)).get(url(model, "changelist"))

    assert response.status_code == 403


@pytest.mark.parametrize("role", ["member", "approver"])
def test_a_member_or_approver_cannot_reach_the_admin(governed, estates, role) -> None:
    client = logged_in(role_user(governed, role))

    assert client.get("/admin/").status_code == 302
    for model in CONTRACT:
        assert client.get(url(model, "changelist")).status_code == 302
    assert client.post(url(Agent, "change", estates["acme"][Agent].pk), {"name": "x"}).status_code == 302
    # Where those redirects lead: a page that says whose the admin is and leads back, not Django's
    # bare sign-in form saying "not authorized".
    landed = client.get("/admin/", follow=True)
    text = landed.content.decode()
    assert landed.status_code == 403 and "The administration is for operators and admins" in text
    assert "not authorized" not in text and 'href="/"' in text
    assert Agent.objects.get(pk=estates["acme"][Agent].pk).name != "x"


@pytest.mark.parametrize(
    ("role", "model"),
    [(role, model) for model in CONTRACT for role in STAFF_ROLES if VIEW in CONTRACT[model].get(role, set())],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_staff_of_one_organisation_see_nothing_of_another(governed, estates, role, model) -> None:
    client = logged_in(role_user(governed, role))
    theirs = estates["globex"][model]

    listing = page_text(client.get(url(model, "changelist")))
    page = client.get(url(model, "change", theirs.pk))
    posted = client.post(url(model, "change", theirs.pk), {"name": "taken over"})

    assert "Globex" not in listing and "globex" not in listing
    assert page.status_code == 302, "answered as an unknown object"
    assert posted.status_code in (302, 403)
    assert client.get(url(model, "delete", theirs.pk)).status_code in (302, 403)


def test_an_operator_of_acme_who_audits_globex_reads_globex_and_changes_nothing_there(
    governed, estates
) -> None:
    Membership.objects.create(organization=governed.other_org, user=governed.operator, role=Role.AUDITOR)
    with_roles(governed.operator)
    client = logged_in(governed.operator)
    agent = estates["globex"][Agent]

    assert client.get(url(Agent, "change", agent.pk)).status_code == 200
    assert client.post(url(Agent, "change", agent.pk), {"name": "taken over"}).status_code == 403
    assert (
        client.post(url(ChannelConfig, "change", estates["globex"][ChannelConfig].pk), {}).status_code == 403
    )
    assert client.get(url(ImIdentity, "delete", estates["globex"][ImIdentity].pk)).status_code == 403
    policy = estates["globex"][ApproverPolicy]
    assert client.post(url(ApproverPolicy, "change", policy.pk), {}).status_code == 403
    agent.refresh_from_db()
    assert agent.name == "Globex agent"
    assert client.post(url(Agent, "change", estates["acme"][Agent].pk), {}).status_code == 200


def test_an_operator_cannot_decide_an_approval_unless_also_an_approver(governed, estates) -> None:
    request = estates["acme"][ConfirmationRequest]
    ConfirmationRequest.objects.filter(pk=request.pk).update(expires_at=request.created_at.replace(year=2100))
    request.approvers.add(governed.operator)  # even in the snapshot, the policy must still allow them
    # Owners are approvers while the policy says so; this operator decides nothing as an operator.
    ApproverPolicy.objects.filter(pk=estates["acme"][ApproverPolicy].pk).update(allow_agent_owner=False)

    refused = confirmation_decide(request_id=request.pk, user=governed.operator, approve=True, reason="")
    accepted = confirmation_decide(request_id=request.pk, user=governed.approver, approve=True, reason="")

    assert refused.refused and accepted.accepted


def test_memberships_keep_groups_and_the_staff_flag_in_step(governed) -> None:
    user = make_user("ursula")
    assert not user.is_staff and not user.groups.exists()

    membership = Membership.objects.create(organization=governed.org, user=user, role=Role.AUDITOR)
    user_roles_sync(user=user)
    user.refresh_from_db()
    assert user.is_staff and [g.name for g in user.groups.all()] == [GROUP_NAMES[Role.AUDITOR]]

    membership.role = Role.APPROVER
    membership.save()
    user_roles_sync(user=user)
    user.refresh_from_db()
    assert not user.is_staff and [g.name for g in user.groups.all()] == [GROUP_NAMES[Role.APPROVER]]

    membership.delete()
    user_roles_sync(user=user)
    user.refresh_from_db()
    assert not user.is_staff and not user.groups.exists()


def test_an_organisation_admin_changing_roles_in_the_admin_changes_groups_and_staff(governed) -> None:
    membership = Membership.objects.get(user=governed.approver, organization=governed.org)
    client = logged_in(governed.admin)
    org = governed.org
    memberships = list(Membership.objects.filter(organization=org).order_by("pk"))
    form = {"name": org.name, "read_only": "", "memberships-TOTAL_FORMS": str(len(memberships))}
    form.update({"memberships-INITIAL_FORMS": str(len(memberships)), "memberships-MIN_NUM_FORMS": "0"})
    form["memberships-MAX_NUM_FORMS"] = "1000"
    for i, m in enumerate(memberships):
        form[f"memberships-{i}-id"] = str(m.pk)
        form[f"memberships-{i}-organization"] = str(org.pk)
        form[f"memberships-{i}-role"] = Role.OPERATOR if m.pk == membership.pk else m.role
    page = client.get(url(Organization, "change", org.pk))
    for inline in page.context["inline_admin_formsets"]:  # the other inlines (enforced hooks), unchanged
        management = inline.formset.management_form
        if management.prefix != "memberships":
            form.update({f"{management.prefix}-{k}": v for k, v in management.initial.items()})

    response = client.post(url(Organization, "change", org.pk), form)

    assert response.status_code == 302, page_text(response)[:2000]
    governed.approver.refresh_from_db()
    assert governed.approver.is_staff
    assert [g.name for g in governed.approver.groups.all()] == [GROUP_NAMES[Role.OPERATOR]]


def test_the_role_groups_migration_can_run_again_and_restores_the_map(governed) -> None:
    auditors = Group.objects.get(name=GROUP_NAMES[Role.AUDITOR])
    expected = set(auditors.permissions.values_list("codename", flat=True))
    auditors.permissions.set(Permission.objects.filter(codename__in=["add_agent", "change_agent"]))

    role_groups_sync(apps=django_apps)
    role_groups_sync(apps=django_apps)

    codenames = set(auditors.permissions.values_list("codename", flat=True))
    assert codenames == expected and all(c.startswith("view_") for c in codenames)
    assert {"view_confirmationrequest", "view_toolexecution", "view_run"} <= codenames
    assert Group.objects.filter(name__in=GROUP_NAMES.values()).count() == 4


def test_the_demo_users_get_their_roles_admin(db) -> None:
    demo_setup(base_url="http://127.0.0.1:8000")

    names = ["alice", "oscar", "aude", "adam", "april"]
    users = {u.username: u for u in get_user_model().objects.filter(username__in=names)}
    assert not users["alice"].is_staff and not users["april"].is_staff
    assert users["oscar"].is_staff and users["aude"].is_staff and users["adam"].is_staff
    assert logged_in(users["aude"]).get(url(ConfirmationRequest, "changelist")).status_code == 200
    assert logged_in(users["oscar"]).get(url(Agent, "add")).status_code == 200
    index = page_text(logged_in(users["oscar"]).get("/admin/"))
    assert "have permission to view or edit anything" not in index
