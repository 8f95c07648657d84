"""A quorum under contention, on a real PostgreSQL (issue 15 acceptance, docs/design.md §1.4, §1.5).

100 requests needing 2 approvals of 3, each hit at once by the three approvers approving and one
of them also rejecting (their second vote, which counts only if it lands first): every request
ends with exactly one verdict consistent with the rule, every vote is recorded once, and the tool
runs at most once.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from asgiref.sync import async_to_sync
from django.db import connections

from agents.engine.runner import run_resume
from approvals.models import ConfirmationEvent, ConfirmationStatus, ConfirmationVote
from approvals.services import confirmation_decide
from tests.agents.engine_kit import Harness
from tests.approvals.kit import (
    PAY_ARGS,
    make_approver,
    pay_tool,
    paying_agent,
    set_policy,
    suspended_run,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

N = 100
Kind = ConfirmationEvent.Kind


def test_three_approvals_and_a_rejection_at_once_leave_one_verdict_consistent_with_the_quorum(
    personas, resumes
) -> None:
    # Three may decide: oscar (the owner, made an approver), april and adam; two approvals are
    # needed and one rejection rejects.
    make_approver(personas, personas.operator)
    set_policy(personas, approvals_required=2, any_rejection_rejects=True)
    tool = pay_tool()
    harness = Harness(tool)
    agent = paying_agent(personas)
    requests = [suspended_run(personas, harness, agent)[1] for _ in range(N)]
    assert requests[0].approvers.count() == 3

    adam = personas.admin
    voters = [(personas.operator, True), (personas.approver, True), (adam, True), (adam, False)]
    barrier = threading.Barrier(len(voters))
    outcomes: dict[int, list] = {i: [] for i in range(len(voters))}
    errors: list[BaseException] = []

    def contender(i: int, user, approve: bool) -> None:
        try:
            for request in requests:
                barrier.wait(timeout=60)
                outcomes[i].append(confirmation_decide(request_id=request.pk, user=user, approve=approve))
        except BaseException as exc:  # reported below: a thread's failure must fail the test
            errors.append(exc)
            barrier.abort()
        finally:
            connections.close_all()  # each thread had its own connection

    threads = [threading.Thread(target=contender, args=(i, *voter)) for i, voter in enumerate(voters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not errors, errors

    finals: Counter[str] = Counter()
    for i, request in enumerate(requests):
        request.refresh_from_db()
        assert request.status in (ConfirmationStatus.APPROVED, ConfirmationStatus.REJECTED)
        finals[request.status] += 1
        assert request.events.filter(kind=Kind.DECIDED).count() == 1
        votes = list(ConfirmationVote.objects.filter(request=request).order_by("pk"))
        approvals = sum(v.approve for v in votes)
        rejections = len(votes) - approvals
        # Consistent with the rule: the votes that counted are exactly those before the verdict.
        if request.status == ConfirmationStatus.APPROVED:
            assert approvals == 2 and rejections == 0, f"request {i}: {approvals=} {rejections=}"
        else:
            assert rejections == 1 and approvals <= 1, f"request {i}: {approvals=} {rejections=}"
        assert votes[-1].user_id == request.responded_by_id, "the last vote counted set the verdict"
        assert len({v.user_id for v in votes}) == len(votes), "one vote per person"
        # Every vote counted is in the log, and every other click too (late, or a second vote).
        logged = request.events.filter(kind__in=[Kind.VOTED, Kind.DECIDED]).count()
        assert logged == len(votes)
        refused = request.events.filter(kind=Kind.CLICK_REFUSED).count()
        assert len(votes) + refused == len(voters)

    for answers in outcomes.values():
        assert len(answers) == N
    accepted = sum(o.accepted for answers in outcomes.values() for o in answers)
    assert accepted == N, "exactly one click per request set its verdict"

    async def resume_twice(run_id: int) -> None:
        import asyncio

        await asyncio.gather(
            run_resume(run_id, reason="a", **harness.options()),
            run_resume(run_id, reason="b", **harness.options()),
        )

    for request in requests:
        async_to_sync(resume_twice)(request.run_id)
    assert len(tool.calls) == finals[ConfirmationStatus.APPROVED]
    assert all(call == PAY_ARGS for call in tool.calls)
    print(f"quorum race over {N} requests: {dict(finals)}")
