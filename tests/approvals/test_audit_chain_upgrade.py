"""Upgrading to keyed chains (fimone/migrations/0003_chain_heads_keyed.py): the links written
before stay plain SHA-256 and keep verifying, with the head an operator noted; new links are
keyed; and no keyed link can be passed off as one of the old ones afterwards."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from approvals.models import ConfirmationEvent
from approvals.services import log_event
from fimone.audit_chain import GENESIS, link_hash
from fimone.models import ChainHead
from tests.approvals.audit_kit import rewrite_events, verify
from tests.approvals.kit import recorded_request

# A data migration's logic is the same on either database; it runs where deployments upgrade
# (PostgreSQL), once, rather than again on the embedded default, where each of these tests costs
# seconds of migrating the whole graph back and forth.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

# Before chains were keyed; sign-in records joined the (keyed) chain later, so they stay before it,
# and so does the agents app's hand-over of the organisation models (it follows sso's).
BEFORE = [
    ("fimone", "0002_outbox"),
    ("sso", "0002_record_append_only_and_roles"),
    ("agents", "0027_mcp_listing_to_review"),
]
EVENTS = "approvals.confirmationevent"


def migrate(targets: list[tuple[str, str]] | None = None) -> Any:
    """Every app at its latest migration but those ``targets`` name; the models as they are then."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    named = {app for app, _ in targets or []}
    targets = [node for node in executor.loader.graph.leaf_nodes() if node[0] not in named] + (targets or [])
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture(autouse=True)
def _schema_back_to_the_latest():
    """Later tests share the database: leave it at the latest migration of every app."""
    yield
    migrate()


def write_unkeyed_history(apps: Any, request: Any, count: int) -> str:
    """``count`` events of ``request`` as the platform wrote them before the chain was keyed:
    plain SHA-256 links and a head at the last one. Returns that head's hash."""
    event_model = apps.get_model("approvals", "ConfirmationEvent")
    head_model = apps.get_model("fimone", "ChainHead")
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
        event_model.objects.create(**fields, prev_hash=prev_hash, entry_hash=entry_hash)
        last_prev, prev_hash = prev_hash, entry_hash
    head_model.objects.create(
        chain=EVENTS, partition=organization_id, seq=count, entry_hash=prev_hash, prev_hash=last_prev
    )
    return prev_hash


def test_an_unkeyed_chain_keeps_verifying_with_the_head_its_operator_noted_and_goes_on_keyed(
    personas: Any,
) -> None:
    request = recorded_request(personas)
    noted = write_unkeyed_history(migrate(BEFORE), request, 3)

    migrate()

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


def test_after_the_upgrade_a_keyed_link_rewritten_as_an_unkeyed_one_is_named(personas: Any) -> None:
    request = recorded_request(personas)
    write_unkeyed_history(migrate(BEFORE), request, 2)
    migrate()
    log_event(request_id=request.pk, kind=ConfirmationEvent.Kind.DELIVERED)

    rewrite_events(personas.org.pk, from_seq=3, details={"attempt": 1}, key=None)

    ok, out = verify()
    assert not ok
    assert "its head's seal does not match it under the audit key" in out
