"""A standing approval revoked while a matching call is being approved by it, on a real
PostgreSQL (issue 26 acceptance): the gate uses a grant under a lock on its row and a revocation
takes the same lock, so either the call was approved before the revocation (and is recorded so),
or it is asked of a person; never a use after the revocation."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections, transaction

from agents.models import RunStatus
from agents.services import run_start
from approvals.models import ApproverPolicy, ConfirmationRequest, ConfirmationStatus, StandingGrant
from approvals.services import opening
from approvals.services.grants import GrantAsk, confirmation_approve_granting, grant_revoke
from tests.agents.engine_kit import Harness
from tests.approvals.kit import set_policy
from tests.approvals.stage_kit import pay_tool, paying

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WAIT = 30  # seconds: a bound on waiting for the other thread, never a measured delay


def granted(personas: Any) -> tuple[Harness, Any, StandingGrant]:
    set_policy(personas, standing_grants=ApproverPolicy.Grants.AGENT)
    tool = pay_tool()
    harness = Harness(tool)
    agent = paying(personas, 1_000)
    first = run_start(agent=agent, user=personas.member, input="pay")
    harness.execute(first)
    request = ConfirmationRequest.objects.get(run=first)
    ask = GrantAsk(scope="agent", hours=4, conditions=[{"field": "amount", "op": "<=", "value": 5000}])
    _, grant = confirmation_approve_granting(request_id=request.pk, user=personas.approver, ask=ask)
    harness.resume(first)
    return harness, agent, grant


def in_thread(target, *args) -> tuple[threading.Thread, list]:
    out: list = []

    def run() -> None:
        try:
            out.append(target(*args))
        except BaseException as exc:  # reported by the test
            out.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def test_a_call_that_holds_the_grant_is_approved_and_the_revocation_waits_for_it(
    personas, resumes, monkeypatch
) -> None:
    harness, agent, grant = granted(personas)
    using, go = threading.Event(), threading.Event()
    settle = opening.grant_settle

    def settle_slowly(**kwargs):
        using.set()
        assert go.wait(WAIT), "the test never let the call go on"
        return settle(**kwargs)

    monkeypatch.setattr(opening, "grant_settle", settle_slowly)

    def call() -> str:
        run = run_start(agent=agent, user=personas.member, input="pay")
        return harness.execute(run)

    caller, called = in_thread(call)
    assert using.wait(WAIT)
    revoker, revoked = in_thread(lambda: grant_revoke(grant=grant, by=personas.approver))
    revoker.join(0.5)
    still_waiting = revoker.is_alive()
    go.set()
    caller.join(WAIT)
    revoker.join(WAIT)

    assert called == [RunStatus.COMPLETED] and not isinstance(revoked[0], BaseException)
    assert still_waiting, "the revocation waited for the call holding the grant"
    used = ConfirmationRequest.objects.get(grant=grant)
    grant.refresh_from_db()
    assert used.status == ConfirmationStatus.APPROVED and grant.uses == 1
    assert grant.revoked_at >= used.responded_at
    later = run_start(agent=agent, user=personas.member, input="pay")
    assert harness.execute(later) == RunStatus.AWAITING_APPROVAL, "nothing uses it after the revocation"


def test_a_call_arriving_during_a_revocation_is_asked_of_a_person(personas, resumes) -> None:
    harness, agent, grant = granted(personas)
    locked, release = threading.Event(), threading.Event()

    def revoke_slowly() -> None:
        with transaction.atomic():
            StandingGrant.objects.select_for_update().get(pk=grant.pk)
            locked.set()
            assert release.wait(WAIT)
            grant_revoke(grant=grant, by=personas.approver)

    revoker, _ = in_thread(revoke_slowly)
    assert locked.wait(WAIT)

    def call() -> str:
        run = run_start(agent=agent, user=personas.member, input="pay")
        return harness.execute(run)

    caller, called = in_thread(call)
    caller.join(0.5)
    release.set()
    revoker.join(WAIT)
    caller.join(WAIT)

    assert called == [RunStatus.AWAITING_APPROVAL]
    assert not ConfirmationRequest.objects.filter(grant=grant).exists()
    grant.refresh_from_db()
    assert grant.uses == 0 and grant.revoked_at is not None
