"""Delegation and absence (issue 26, item 3): an approver away until a date names who decides in
their place; the stand-in takes their seat (one vote between them) with their standing, never
more, while the absence runs; delegation never chains; an organisation admin reassigns a person's
pending requests; the audit names both people."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.utils import timezone

from agents.models import RunStatus
from approvals.models import ConfirmationEvent, ConfirmationStatus
from approvals.selectors import inbox_for
from approvals.services import confirmation_decide
from approvals.services.absences import AbsenceRefused, absence_end, absence_set, confirmation_reassign
from tenancy.models import Membership, Role
from tests.admin_kit import logged_in
from tests.agents.engine_kit import Harness
from tests.approvals.kit import set_policy
from tests.approvals.stage_kit import parked_payment, pay_tool, two_stage_policy
from tests.personas import make_user

Kind = ConfirmationEvent.Kind

pytestmark = pytest.mark.django_db(transaction=True)


def soon(days: int = 7) -> dt.datetime:
    return timezone.now() + dt.timedelta(days=days)


def asked(user: Any) -> list[Any]:
    return list(inbox_for(user=user).values_list("pk", flat=True))


def vote(request: Any, user: Any, approve: bool = True) -> Any:
    return confirmation_decide(request_id=request.pk, user=user, approve=approve)


@pytest.fixture
def deputy(personas) -> Any:
    return make_user("dora", personas.org, Role.APPROVER)


def test_the_pending_requests_of_someone_away_go_to_their_delegate_and_the_log_names_both(
    personas, resumes, deputy
) -> None:
    set_policy(personas, allow_org_approvers=False).named_users.set([personas.approver])
    harness = Harness(pay_tool())
    run, request = parked_payment(personas, harness, 1_000)
    assert asked(deputy) == []

    absence_set(user=personas.approver, organization_id=personas.org.pk, delegate=deputy, ends_at=soon())

    assert asked(deputy) == [request.pk]
    delegated = request.events.get(kind=Kind.DELEGATED)
    assert delegated.actor == personas.approver
    assert delegated.details["approvers"] == [deputy.pk] and delegated.details["stands_in_for"] == [
        personas.approver.pk
    ]
    outcome = vote(request, deputy)
    assert outcome.accepted, outcome.message
    assert harness.resume(run) == RunStatus.COMPLETED


def test_requests_opened_while_away_ask_the_delegate_too(personas, resumes, deputy) -> None:
    set_policy(personas, allow_org_approvers=False).named_users.set([personas.approver])
    absence_set(user=personas.approver, organization_id=personas.org.pk, delegate=deputy, ends_at=soon())

    _, request = parked_payment(personas, Harness(pay_tool()), 1_000)

    assert asked(deputy) == [request.pk] and asked(personas.approver) == [request.pk]
    assert request.events.filter(kind=Kind.DELEGATED).count() == 1


def test_one_seat_one_vote_the_delegate_and_the_absent_person_never_both_count(
    personas, resumes, deputy
) -> None:
    set_policy(personas, approvals_required=2, allow_org_approvers=False).named_users.set(
        [personas.approver, personas.admin]
    )
    absence_set(user=personas.approver, organization_id=personas.org.pk, delegate=deputy, ends_at=soon())
    _, request = parked_payment(personas, Harness(pay_tool()), 1_000)

    assert vote(request, personas.approver).status == "recorded"
    refused = vote(request, deputy)

    assert (
        refused.status == "already_voted"
        and "april, whom you stand in for, has already voted" in refused.message
    )
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.PENDING, "april's seat counted once: the quorum is not met"
    assert vote(request, personas.admin).accepted


def test_a_delegate_decides_with_the_absent_persons_standing_never_more(personas, resumes, deputy) -> None:
    staff = two_stage_policy(personas)
    absence_set(user=staff.finn, organization_id=personas.org.pk, delegate=deputy, ends_at=soon())
    _, request = parked_payment(personas, Harness(pay_tool()), 60_000)

    early = vote(request, deputy)
    assert early.refused and "still at stage 1 of 2 (Team lead)" in early.message
    vote(request, staff.lee)
    Membership.objects.filter(user=staff.finn).update(role=Role.MEMBER)  # finn lost the role meanwhile

    refused = vote(request, deputy)
    assert refused.refused and "you stand in for finn, who may not decide it" in refused.message


def test_the_delegate_decides_only_while_the_absence_runs(personas, resumes, deputy) -> None:
    set_policy(personas, allow_org_approvers=False).named_users.set([personas.approver])
    absence = absence_set(
        user=personas.approver, organization_id=personas.org.pk, delegate=deputy, ends_at=soon()
    )
    _, request = parked_payment(personas, Harness(pay_tool()), 1_000)

    absence_end(absence=absence)

    refused = vote(request, deputy)
    assert refused.refused and "your stand-in for april has ended" in refused.message
    assert vote(request, personas.approver).accepted


@pytest.mark.parametrize(
    ("setup", "said"),
    [
        ("delegate_away", "is away too: choose someone who is here (delegation never chains)"),
        ("standing_in", "you stand in for adam until"),
        ("self", "choose someone else to decide in your place"),
        ("member", "alice is not an approver of the organisation"),
        ("past", "the end of the absence must be in the future"),
    ],
)
def test_delegation_never_chains_nor_loops_and_says_why(personas, deputy, setup, said) -> None:
    org = personas.org.pk
    delegate, ends_at = deputy, soon()
    if setup == "delegate_away":
        absence_set(user=deputy, organization_id=org, delegate=personas.admin, ends_at=soon())
    elif setup == "standing_in":
        absence_set(user=personas.admin, organization_id=org, delegate=personas.approver, ends_at=soon())
    elif setup == "self":
        delegate = personas.approver
    elif setup == "member":
        delegate = personas.member
    elif setup == "past":
        ends_at = timezone.now() - dt.timedelta(minutes=1)

    with pytest.raises(AbsenceRefused, match=re.escape(said)):
        absence_set(user=personas.approver, organization_id=org, delegate=delegate, ends_at=ends_at)


def test_an_admin_reassigns_a_persons_pending_requests(personas, resumes, deputy) -> None:
    set_policy(personas, allow_org_approvers=False).named_users.set([personas.approver])
    _, request = parked_payment(personas, Harness(pay_tool()), 1_000)

    moved = confirmation_reassign(
        organization_id=personas.org.pk, person=personas.approver, to=deputy, by=personas.admin
    )

    assert moved == 1
    assert asked(personas.approver) == [] and asked(deputy) == [request.pk]
    refused = vote(request, personas.approver)
    assert refused.refused and "reassigned your part of this request" in refused.message
    event = request.events.get(kind=Kind.REASSIGNED)
    assert event.actor == personas.admin and event.details["stands_in_for"] == [personas.approver.pk]
    assert vote(request, deputy).accepted


def test_a_stand_in_never_decides_their_own_call(personas, resumes) -> None:
    set_policy(personas, allow_org_approvers=False).named_users.set([personas.approver])
    Membership.objects.create(organization=personas.org, user=personas.member, role=Role.APPROVER)
    absence_set(
        user=personas.approver, organization_id=personas.org.pk, delegate=personas.member, ends_at=soon()
    )

    _, request = parked_payment(personas, Harness(pay_tool()), 1_000)  # alice's own call

    assert asked(personas.member) == [], "alice is not asked to approve her own call"
    assert vote(request, personas.member).refused


def test_the_away_page_sets_and_ends_an_absence(personas, deputy) -> None:
    client = logged_in(personas.approver)
    until = soon().strftime("%Y-%m-%dT%H:%M")

    answer = client.post(
        "/approvals/away/",
        {"action": "away", "organization": personas.org.pk, "until": until, "delegate": deputy.pk},
        follow=True,
    )

    assert "dora decides in your place" in answer.content.decode()
    absence = personas.approver.absences.get()
    bad = client.post(
        "/approvals/away/", {"action": "away", "organization": personas.org.pk, "until": "soon"}
    )
    assert bad.status_code == 400 and "Enter a valid date/time" in bad.content.decode()
    client.post("/approvals/away/", {"action": "back", "absence": absence.pk})
    absence.refresh_from_db()
    assert absence.ended_at is not None
    assert logged_in(personas.member).get("/approvals/away/").status_code == 403
    assert logged_in(personas.approver).post("/approvals/away/", {"action": "reassign"}).status_code == 403


def test_the_delegates_inbox_says_in_whose_place_they_decide(personas, resumes, deputy) -> None:
    set_policy(personas, allow_org_approvers=False).named_users.set([personas.approver])
    absence_set(user=personas.approver, organization_id=personas.org.pk, delegate=deputy, ends_at=soon())
    parked_payment(personas, Harness(pay_tool()), 1_000)

    page = re.sub(r"<[^>]+>", "", logged_in(deputy).get("/approvals/").content.decode())
    live = logged_in(deputy).get("/approvals/live/?cards=1").json()

    assert "You decide this in the place of april: one vote between you." in page
    assert "in the place of <b>april</b>" in live["cards"][0]["html"]
    assert "in the place of" not in logged_in(personas.approver).get("/approvals/").content.decode()
