"""Exactly one verdict under contention, on a real PostgreSQL (docs/design.md §1.4, §1.5)."""

from __future__ import annotations

import datetime as dt
import threading
from collections import Counter

import pytest
from asgiref.sync import async_to_sync
from django.db import connections
from django.utils import timezone

from agents.engine.runner import run_resume
from approvals.models import ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from approvals.services import confirmation_decide, confirmation_expire_due
from tests.agents.engine_kit import Harness
from tests.approvals.kit import PAY_ARGS, pay_tool, paying_agent, set_policy, suspended_run

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

N = 100


def test_approve_reject_and_expiry_racing_on_each_request_leave_exactly_one_verdict(
    personas, resumes
) -> None:
    set_policy(personas)
    tool = pay_tool()
    harness = Harness(tool)
    agent = paying_agent(personas)
    requests = [suspended_run(personas, harness, agent)[1] for _ in range(N)]
    # Deadlines fall while the contenders work through the list, so every kind of winner occurs.
    start = timezone.now() + dt.timedelta(milliseconds=300)
    for i, request in enumerate(requests):
        ConfirmationRequest.objects.filter(pk=request.pk).update(
            expires_at=start + dt.timedelta(milliseconds=15 * i)
        )

    barrier = threading.Barrier(3)
    outcomes: dict[str, list] = {"approve": [], "reject": [], "sweep": []}

    def contender(kind: str) -> None:
        try:
            for request in requests:
                barrier.wait(timeout=30)
                if kind == "sweep":
                    outcomes[kind].append(confirmation_expire_due())
                else:
                    outcome = confirmation_decide(
                        request_id=request.pk, user=personas.approver, approve=kind == "approve", reason=kind
                    )
                    outcomes[kind].append(outcome)
        finally:
            connections.close_all()  # each thread had its own connection

    threads = [threading.Thread(target=contender, args=(kind,)) for kind in outcomes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    confirmation_expire_due(now=timezone.now() + dt.timedelta(hours=1))  # settle any stragglers

    finals = Counter()
    for request in requests:
        request.refresh_from_db()
        assert request.status != ConfirmationStatus.PENDING
        finals[request.status] += 1
        verdicts = request.events.filter(
            kind__in=[ConfirmationEvent.Kind.DECIDED, ConfirmationEvent.Kind.EXPIRED]
        )
        assert verdicts.count() == 1, f"{request.pk} has {verdicts.count()} verdict events"
    accepted = [o for o in outcomes["approve"] + outcomes["reject"] if o.accepted]
    assert len(accepted) == finals["approved"] + finals["rejected"]
    for outcome in outcomes["approve"] + outcomes["reject"]:
        if not outcome.accepted:
            assert outcome.message.startswith("This request was already")
    assert sum(finals.values()) == N

    # Resume every run twice at once: an approved call runs exactly once, the others never.
    async def resume_twice(run_id: int) -> None:
        import asyncio

        await asyncio.gather(
            run_resume(run_id, reason="a", **harness.options()),
            run_resume(run_id, reason="b", **harness.options()),
        )

    for request in requests:
        async_to_sync(resume_twice)(request.run_id)
    assert len(tool.calls) == finals["approved"]
    assert all(call == PAY_ARGS for call in tool.calls)
    executed = ConfirmationEvent.objects.filter(kind=ConfirmationEvent.Kind.EXECUTED)
    assert executed.count() == finals["approved"]
    print(f"race outcome over {N} requests: {dict(finals)}")
