"""Chains written before they were keyed: the links stay plain SHA-256 and keep verifying, with the
head an operator noted, sealed with the key and saying how many links are unkeyed (as the upgrade
to keyed chains left every such chain); new links are keyed; and no keyed link can be passed off
as one of the old ones afterwards."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from approvals.models import ConfirmationEvent
from approvals.services import log_event
from fimone.audit_chain import GENESIS, current_key, head_seal, link_hash
from fimone.models import ChainHead
from tests.approvals.audit_kit import rewrite_events, verify
from tests.approvals.kit import recorded_request

pytestmark = pytest.mark.django_db

EVENTS = "approvals.confirmationevent"


def write_unkeyed_history(request: Any, count: int) -> str:
    """``count`` events of ``request`` as the platform wrote them before the chain was keyed
    (plain SHA-256 links), and their head as the upgrade to keyed chains left it: at the last
    one, all of them unkeyed, sealed with the key. Returns that head's hash."""
    organization_id, prev_hash = request.organization_id, GENESIS
    for seq in range(1, count + 1):
        fields = {
            "organization_id": organization_id,
            "request_id": request.pk,
            "kind": "delivered" if seq > 1 else "created",
            "details": {"attempt": seq, "note": "ünïcødé"},
            "created_at": dt.datetime(2026, 11, 2, 9, 30, seq, tzinfo=dt.UTC),
            "chain_seq": seq,
        }
        entry_hash = link_hash(prev_hash, ConfirmationEvent(**fields).chain_document())
        ConfirmationEvent.objects.create(**fields, prev_hash=prev_hash, entry_hash=entry_hash)
        last_prev, prev_hash = prev_hash, entry_hash
    seal = head_seal(
        current_key(),
        chain=EVENTS,
        partition=organization_id,
        unkeyed_until=count,
        seq=count,
        entry_hash=prev_hash,
    )
    ChainHead.objects.create(
        chain=EVENTS,
        partition=organization_id,
        seq=count,
        entry_hash=prev_hash,
        prev_hash=last_prev,
        unkeyed_until=count,
        seal=seal,
    )
    return prev_hash


def test_an_unkeyed_chain_keeps_verifying_with_the_head_its_operator_noted_and_goes_on_keyed(
    personas: Any,
) -> None:
    request = recorded_request(personas)
    noted = write_unkeyed_history(request, 3)

    head = ChainHead.objects.get(chain=EVENTS, partition=personas.org.pk)
    assert (head.seq, head.entry_hash, head.unkeyed_until) == (3, noted, 3) and head.seal
    ok, out = verify()
    assert ok, out
    assert f"{EVENTS} of organisation {personas.org.pk} (Acme): 3 links, head {noted}" in out

    log_event(request_id=request.pk, kind=ConfirmationEvent.Kind.DELIVERED)

    fourth = ConfirmationEvent.objects.get(organization=personas.org, chain_seq=4)
    assert fourth.prev_hash == noted and fourth.entry_hash != link_hash(noted, fourth.chain_document())
    ok, out = verify()
    assert ok, out
    assert f"{EVENTS} of organisation {personas.org.pk} (Acme): 4 links" in out


def test_a_keyed_link_rewritten_as_an_unkeyed_one_is_named(personas: Any) -> None:
    request = recorded_request(personas)
    write_unkeyed_history(request, 2)
    log_event(request_id=request.pk, kind=ConfirmationEvent.Kind.DELIVERED)

    rewrite_events(personas.org.pk, from_seq=3, details={"attempt": 1}, key=None)

    ok, out = verify()
    assert not ok
    assert "its head's seal does not match it under the audit key" in out
