"""The policy admin edits the quorum, edit-on-approve and escalation options (issue 15, item 4)."""

from __future__ import annotations

import pytest

from approvals.models import ApproverPolicy, EscalationTier
from tests.admin_kit import logged_in, page_text, url
from tests.approvals.kit import policy_form

pytestmark = pytest.mark.django_db


def test_an_org_admin_sees_every_new_option_with_its_help(governed) -> None:
    policy = ApproverPolicy.objects.create(organization=governed.org)

    page = page_text(logged_in(governed.admin).get(url(ApproverPolicy, "change", policy.pk)))

    for text in (
        "How many distinct approvers must approve",
        "One rejection rejects the call",
        "Approvers may change the arguments before approving",
        "the people first asked may still decide it",
        "Escalation tiers",
    ):
        assert text in page


def test_an_org_admin_sets_a_quorum_edits_and_a_tier(governed) -> None:
    policy = ApproverPolicy.objects.create(organization=governed.org)
    data = policy_form(
        policy,
        approvals_required="2",
        any_rejection_rejects=None,
        allow_edit_on_approve="on",
        **{
            "tiers-TOTAL_FORMS": "1",
            "tiers-0-after_seconds": "300",
            "tiers-0-named_users": str(governed.approver.pk),
            "tiers-0-channel_config": "",
        },
    )

    answer = logged_in(governed.admin).post(url(ApproverPolicy, "change", policy.pk), data)

    assert answer.status_code == 302, page_text(answer)[:3000]
    policy.refresh_from_db()
    assert (
        policy.approvals_required == 2 and not policy.any_rejection_rejects and policy.allow_edit_on_approve
    )
    [tier] = EscalationTier.objects.filter(policy=policy)
    assert tier.after_seconds == 300 and list(tier.named_users.all()) == [governed.approver]


def test_a_quorum_of_zero_is_refused_with_a_message(governed) -> None:
    policy = ApproverPolicy.objects.create(organization=governed.org)

    answer = logged_in(governed.admin).post(
        url(ApproverPolicy, "change", policy.pk), policy_form(policy, approvals_required="0")
    )

    assert answer.status_code == 200
    assert answer.context["adminform"].form.errors == {
        "approvals_required": ["Approvals required: at least 1."]
    }
    policy.refresh_from_db()
    assert policy.approvals_required == 1


def test_the_named_users_picker_lists_only_approvers_and_admins_of_ones_own_organisations(governed) -> None:
    import re

    response = logged_in(governed.operator).get(url(ApproverPolicy, "add"))

    # A box to tick per person (a short list that wraps, not two tall lists with arrows).
    page = response.content.decode()
    assert '<div id="id_named_users" class="tick-line">' in page
    listed = set(re.findall(r'type="checkbox" name="named_users" value="\d+"[^>]*>\s*([a-z]+)</label>', page))
    assert listed == {"april", "adam"}, "no member, operator or auditor, and nobody of another organisation"
