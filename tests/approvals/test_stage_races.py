"""Stages under contention, on a real PostgreSQL (issue 26 acceptance): the lead's approval, a
finance approval and a finance rejection land at once. Whatever the order, the request moves to
finance once, a finance vote counts only if it came after finance was asked, a rejection that
counted rejects, there is at most one verdict, and the tool never runs on a rejection.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from agents.services import run_start
from approvals.models import ConfirmationEvent, ConfirmationStatus
from approvals.services import confirmation_decide
from tests.agents.engine_kit import Harness
from tests.approvals.stage_kit import pay_tool, paying, two_stage_policy

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

N = 30
Kind = ConfirmationEvent.Kind


def test_two_stages_approvals_and_a_rejection_at_once_leave_one_consistent_outcome(personas, resumes) -> None:
    staff = two_stage_policy(personas)
    tool = pay_tool()
    harness = Harness(tool)
    agent = paying(personas, 60_000)
    requests = []
    for _ in range(N):
        run = run_start(agent=agent, user=personas.member, input="pay")
        assert harness.execute(run) == "awaiting_approval"
        requests.append(run.confirmation_requests.get())

    voters = [(staff.lee, True), (staff.finn, True), (staff.fiona, False)]
    barrier = threading.Barrier(len(voters))
    errors: list[BaseException] = []

    def contender(user, approve: bool) -> None:
        try:
            for request in requests:
                barrier.wait(timeout=60)
                confirmation_decide(request_id=request.pk, user=user, approve=approve)
        except BaseException as exc:  # reported below: a thread's failure must fail the test
            errors.append(exc)
            barrier.abort()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=contender, args=voter) for voter in voters]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []

    outcomes = set()
    for request in requests:
        request.refresh_from_db()
        events = list(request.events.order_by("chain_seq"))
        kinds = [event.kind for event in events]
        assert kinds.count(Kind.STAGE_OPENED) == 1, "the lead's approval always moves it on, once"
        assert request.stage_index == 1
        opened_at = kinds.index(Kind.STAGE_OPENED)
        assert kinds.count(Kind.DECIDED) <= 1
        for vote in request.votes.exclude(user=staff.lee):
            assert vote.created_at >= request.stage_opened_at, "no finance vote before finance was asked"
        counted = [e for e in events if e.kind in (Kind.VOTED, Kind.DECIDED) and e.actor_id != staff.lee.pk]
        assert all(events.index(e) > opened_at for e in counted)
        if request.status == ConfirmationStatus.REJECTED:
            assert request.responded_by_id == staff.fiona.pk
        else:
            assert request.status == ConfirmationStatus.PENDING
            assert not request.votes.filter(user=staff.fiona).exists()
        outcomes.add(str(request.status))
    assert tool.calls == []
    assert outcomes <= {"pending", "rejected"}
