"""Connector calls logged before the call log was chained become links of their organisation's
chain, in the order they were written, and ``audit_verify`` accepts them and goes on from there."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.core.management import call_command

from tests.migration_kit import migrate, migrate_to_the_latest
from tests.migration_kit import schema_back_to_the_latest as schema_back_to_the_latest

# A data migration's logic is the same on either database; it runs where deployments upgrade
# (PostgreSQL), once, rather than again on the embedded default, where each of these tests costs
# seconds of migrating the whole graph back and forth.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

BEFORE = [("agents", "0014_run_children_and_delegates")]
AFTER = [("agents", "0015_connector_call_log_chain")]


def test_calls_logged_before_the_chain_are_chained_in_order_and_verify() -> None:
    apps = migrate(BEFORE)
    Organization = apps.get_model("agents", "Organization")
    Log = apps.get_model("agents", "ConnectorCallLog")
    acme, globex = Organization.objects.create(name="Acme"), Organization.objects.create(name="Globex")
    written = dt.datetime(2026, 11, 2, 9, 30, tzinfo=dt.UTC)
    for n, org in enumerate([acme, globex, acme, acme]):
        Log.objects.create(
            organization=org,
            tool_name="oa__purchases_list",
            arguments={"page": n, "note": "ünïcødé"},
            outcome="succeeded",
            duration_ms=[1.5, 2.0, None, 1e-3][n],
        )
    Log.objects.update(created_at=written)

    migrate(AFTER)
    migrate_to_the_latest()

    from agents.audit import connector_call_log_record
    from agents.models import ConnectorCallLog

    rows = list(ConnectorCallLog.objects.filter(organization_id=acme.pk).order_by("pk"))
    assert [(r.chain_seq, r.arguments["page"]) for r in rows] == [(1, 0), (2, 2), (3, 3)]
    connector_call_log_record(
        org_id=acme.pk,
        agent_id=None,
        user_id=None,
        run_id=None,
        tool_call_id="after",
        tool_name="oa__purchases_list",
        arguments={},
        outcome="succeeded",
    )
    newest = ConnectorCallLog.objects.filter(organization_id=acme.pk).order_by("-chain_seq").first()
    assert (newest.chain_seq, newest.prev_hash) == (4, rows[-1].entry_hash)
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    assert f"agents.connectorcalllog of organisation {acme.pk} (Acme): 4 links" in out.getvalue()
    assert f"agents.connectorcalllog of organisation {globex.pk} (Globex): 1 links" in out.getvalue()
