"""Operators and organisation admins write stages in the policy admin (issue 26, item 1): the
conditions are checked like ``confirm_when``'s, a stage names only approvers and asks somebody,
a tier can escalate one stage, and a membership says who a person's manager is."""

from __future__ import annotations

from typing import Any

import pytest

from approvals.models import ApprovalStage, ApproverPolicy
from tenancy.models import Membership, Organization
from tests.admin_kit import logged_in, page_text, url
from tests.approvals.kit import policy_form
from tests.console.admin_forms import organization_form

pytestmark = pytest.mark.django_db


def stage_rows(*stages: dict[str, Any]) -> dict[str, Any]:
    """The policy form's stage rows; a stage's ``conditions`` as the rows an operator fills in
    (``[(field, op, value)]``), posted as the editor posts them: a list per column."""
    data: dict[str, Any] = {"stages-TOTAL_FORMS": str(len(stages))}
    for index, stage in enumerate(stages):
        defaults = {
            "position": str(index + 1),
            "name": f"Stage {index + 1}",
            "conditions": [],
            "condition_mode": "all",
            "approvals_required": "1",
            "timeout_seconds": "",
        }
        for key, value in {**defaults, **stage}.items():
            if key == "conditions":
                for column, part in enumerate(("field", "op", "value")):
                    data[f"stages-{index}-conditions-{part}"] = [row[column] for row in value]
            else:
                data[f"stages-{index}-{key}"] = value
    return data


def test_an_org_admin_writes_the_lead_then_finance_policy(governed) -> None:
    policy = ApproverPolicy.objects.create(organization=governed.org)
    large = [("amount", ">=", "50,000"), ("", "==", "")]  # a blank row is left out
    data = policy_form(
        policy,
        **stage_rows(
            {"name": "Team lead", "conditions": large, "requester_manager": "on"},
            {
                "name": "Finance",
                "conditions": large,
                "named_users": str(governed.approver.pk),
                "roles": "admin",
                "approvals_required": "2",
                "timeout_seconds": "3600",
            },
        ),
    )

    answer = logged_in(governed.admin).post(url(ApproverPolicy, "change", policy.pk), data)

    assert answer.status_code == 302, page_text(answer)[:3000]
    lead, finance = ApprovalStage.objects.filter(policy=policy)
    assert lead.name == "Team lead" and lead.requester_manager and lead.conditions[0]["value"] == 50000
    assert finance.roles == ["admin"] and finance.approvals_required == 2 and finance.timeout_seconds == 3600
    assert list(finance.named_users.all()) == [governed.approver]
    assert policy.history.latest().history_user == governed.admin, (
        "the policy's history names who changed its stages"
    )


@pytest.mark.parametrize(
    ("conditions", "said"),
    [
        ([("amount", "~", "1")], "conditions[0]: field must be a name and op one of"),  # a forged post
        ([("amount", ">=", "lots")], "must be a number for '>='"),
        ([("vendor", "==", "Lumen"), ("amount", ">=", "")], "Condition 2: give a value for “amount”."),
    ],
)
def test_it_refuses_conditions_it_cannot_read_and_says_which(governed, conditions, said) -> None:
    policy = ApproverPolicy.objects.create(organization=governed.org)
    data = policy_form(
        policy, **stage_rows({"name": "Lead", "conditions": conditions, "requester_manager": "on"})
    )

    answer = logged_in(governed.admin).post(url(ApproverPolicy, "change", policy.pk), data)

    assert answer.status_code == 200
    text = page_text(answer)
    assert said in text
    assert not ApprovalStage.objects.exists()


def test_a_stage_asks_somebody_and_names_only_approvers(governed) -> None:
    policy = ApproverPolicy.objects.create(organization=governed.org)
    nobody = policy_form(policy, **stage_rows({"name": "Nobody"}))
    member = policy_form(policy, **stage_rows({"name": "Alice", "named_users": str(governed.member.pk)}))

    first = page_text(logged_in(governed.admin).post(url(ApproverPolicy, "change", policy.pk), nobody))
    second = page_text(logged_in(governed.admin).post(url(ApproverPolicy, "change", policy.pk), member))

    assert "A stage asks somebody: name approvers, tick a role or the requester" in first
    assert "Only approvers and admins of Acme can be named; not alice." in second
    assert not ApprovalStage.objects.exists()


def test_a_tier_escalates_a_stage_of_its_own_policy_only(governed) -> None:
    policy = ApproverPolicy.objects.create(organization=governed.org)
    stage = ApprovalStage.objects.create(policy=policy, name="Finance", requester_manager=True)
    other = ApproverPolicy.objects.create(organization=Organization.objects.create(name="Initech"))
    foreign = ApprovalStage.objects.create(policy=other, name="Theirs", requester_manager=True)
    tier = {
        "tiers-TOTAL_FORMS": "1",
        "tiers-0-after_seconds": "300",
        "tiers-0-named_users": str(governed.approver.pk),
        "tiers-0-channel_config": "",
    }
    existing = {
        "stages-TOTAL_FORMS": "1",
        "stages-INITIAL_FORMS": "1",
        "stages-0-id": str(stage.pk),
        "stages-0-policy": str(policy.pk),
        "stages-0-position": "1",
        "stages-0-name": "Finance",
        "stages-0-conditions": "[]",
        "stages-0-condition_mode": "all",
        "stages-0-requester_manager": "on",
        "stages-0-approvals_required": "1",
    }
    client = logged_in(governed.admin)

    refused = client.post(
        url(ApproverPolicy, "change", policy.pk),
        policy_form(policy, **existing, **tier, **{"tiers-0-stage": str(foreign.pk)}),
    )
    taken = client.post(
        url(ApproverPolicy, "change", policy.pk),
        policy_form(policy, **existing, **tier, **{"tiers-0-stage": str(stage.pk)}),
    )

    assert refused.status_code == 200 and "Select a valid choice" in page_text(refused)
    assert taken.status_code == 302, page_text(taken)[:3000]
    assert list(stage.tiers.values_list("after_seconds", flat=True)) == [300]


def test_a_manager_is_another_member_of_the_organisation(governed, superuser) -> None:
    org = governed.org
    rows = list(Membership.objects.filter(organization=org).order_by("pk"))
    at = [row.user_id for row in rows].index(governed.member.pk)
    data = organization_form(org, rows)

    def with_manager(user) -> dict:
        return dict(data, **{f"memberships-{at}-manager": str(user.pk)})

    client = logged_in(superuser)
    outsider = client.post(url(Organization, "change", org.pk), with_manager(governed.stranger))
    herself = client.post(url(Organization, "change", org.pk), with_manager(governed.member))
    april = client.post(url(Organization, "change", org.pk), with_manager(governed.approver))

    assert "Select a valid choice" in page_text(outsider), "only the organisation's members are offered"
    assert "A person cannot be their own manager." in page_text(herself)
    assert april.status_code == 302, page_text(april)[:3000]
    assert Membership.objects.get(pk=rows[at].pk).manager == governed.approver
