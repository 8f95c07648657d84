"""Sign-in records written before the record was chained become links of their organisation's
chain, in the order they were written; ``audit_verify`` accepts them, the platform goes on from
there, and on PostgreSQL the append-only trigger is back in force once the migration is done."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import DatabaseError, connection, transaction

from tests.approvals.audit_kit import verify
from tests.migration_kit import migrate, migrate_to_the_latest
from tests.migration_kit import schema_back_to_the_latest as schema_back_to_the_latest

# A data migration's logic is the same on either database; it runs where deployments upgrade
# (PostgreSQL), once, rather than again on the embedded default, where each of these tests costs
# seconds of migrating the whole graph back and forth.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

BEFORE = [("sso", "0002_record_append_only_and_roles")]
AFTER = [("sso", "0003_sign_in_record_chain")]


def test_records_written_before_the_chain_are_chained_in_order_and_verify() -> None:
    apps = migrate(BEFORE)
    Organization = apps.get_model("agents", "Organization")
    Provider = apps.get_model("sso", "IdentityProvider")
    Record = apps.get_model("sso", "SignInRecord")
    acme, globex = Organization.objects.create(name="Acme"), Organization.objects.create(name="Globex")
    providers = {
        org.pk: Provider.objects.create(
            organization=org,
            name=org.name,
            slug=org.name.lower(),
            issuer="https://login.example.test",
            client_id="c",
        )
        for org in (acme, globex)
    }
    written = dt.datetime(2026, 11, 2, 9, 30, 0, 123456, tzinfo=dt.UTC)
    for n, (org, address) in enumerate(
        [(acme, "203.0.113.7"), (globex, None), (acme, "2001:db8::1"), (acme, "::ffff:198.51.100.1")]
    ):
        Record.objects.create(
            organization=org,
            provider=providers[org.pk],
            kind="refused",
            email=f"n{n}@ünïcødé.test",
            detail=f"refusal {n}",
            address=address,
            created_at=written + dt.timedelta(minutes=n),
        )

    migrate(AFTER)
    migrate_to_the_latest()

    from sso import services
    from sso.models import IdentityProvider, SignInRecord

    rows = list(SignInRecord.objects.filter(organization_id=acme.pk).order_by("pk"))
    assert [(r.chain_seq, r.detail) for r in rows] == [(1, "refusal 0"), (2, "refusal 2"), (3, "refusal 3")]
    services.sign_in_refused(provider=IdentityProvider.objects.get(slug="acme"), reason="after the chain")
    newest = SignInRecord.objects.filter(organization_id=acme.pk).order_by("-chain_seq").first()
    assert (newest.chain_seq, newest.prev_hash) == (4, rows[-1].entry_hash)
    ok, out = verify()
    assert ok, out
    assert f"sso.signinrecord of organisation {acme.pk} (Acme): 4 links" in out
    assert f"sso.signinrecord of organisation {globex.pk} (Globex): 1 links" in out
    if connection.vendor == "postgresql":
        with (
            pytest.raises(DatabaseError, match="append-only"),
            transaction.atomic(),
            connection.cursor() as c,
        ):
            c.execute("UPDATE sso_signinrecord SET detail = 'quietly' WHERE id = %s", [rows[0].pk])

    # Undone (the chain's heads go with its columns) and done again, the chain is whole again.
    migrate(BEFORE)
    migrate_to_the_latest()

    ok, out = verify()
    assert ok, out
    assert f"sso.signinrecord of organisation {acme.pk} (Acme): 4 links" in out
