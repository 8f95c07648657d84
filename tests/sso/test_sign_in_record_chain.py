"""The sign-in record cannot be rewritten quietly (docs/design.md §1.15): each record is a link of its
organisation's keyed audit chain, append-only in the ORM and, on PostgreSQL, at the database; and
``audit_verify`` names a record edited or deleted all the same by someone who holds the database
itself."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction

from fimone.audit_chain import AppendOnlyError
from sso import services
from sso.models import IdentityProvider, SignInRecord
from tests.approvals.audit_kit import behind_the_triggers, table, verify
from tests.sso.kit import configure

pytestmark = pytest.mark.django_db

Kind = SignInRecord.Kind
CHAIN = "sso.signinrecord"


def where(org: Any) -> str:
    return f"{CHAIN} of organisation {org.pk} ({org.name})"


@pytest.fixture
def provider(personas: Any) -> IdentityProvider:
    return configure(personas.org, SimpleNamespace(issuer="https://login.acme.test"), passwords_allowed=False)


@pytest.fixture
def records(personas: Any, provider: IdentityProvider) -> list[SignInRecord]:
    """Acme's record of a refusal, a break-glass password sign-in and a sign-out, written by the
    platform's own services; and Globex's refusal, in a chain of its own."""
    services.sign_in_refused(
        provider=provider,
        reason="eve@evil.test may not sign in to Acme",
        claims={"sub": "42", "email": "eve@evil.test"},
        address="203.0.113.7",
    )
    services.password_sign_in_record(
        user=personas.admin, organization_ids={personas.org.pk}, kind=Kind.BREAK_GLASS, address="2001:DB8::1"
    )
    services.sign_out_record(provider=provider, user=personas.admin, address=None)
    globex = configure(personas.other_org, SimpleNamespace(issuer="https://login.globex.test"), slug="globex")
    services.sign_in_refused(provider=globex, reason="no subject", address="::ffff:198.51.100.1")
    return list(SignInRecord.objects.filter(organization=personas.org).order_by("chain_seq"))


def test_each_sign_in_record_is_a_link_of_its_organisations_chain_and_verifies(
    personas: Any, provider: IdentityProvider, records: list[SignInRecord]
) -> None:
    # Even a record saved without its place in the chain (a fixture's objects.create) is appended.
    records.append(
        SignInRecord.objects.create(organization=personas.org, provider=provider, kind=Kind.REFUSED)
    )

    assert [r.chain_seq for r in records] == [1, 2, 3, 4]
    assert [r.prev_hash for r in records[1:]] == [r.entry_hash for r in records[:-1]]
    assert SignInRecord.objects.get(organization=personas.other_org).chain_seq == 1
    ok, out = verify()
    assert ok, out
    assert f"ok      {where(personas.org)}: 4 links" in out
    assert f"ok      {where(personas.other_org)}: 1 links" in out


def test_the_orm_refuses_to_update_or_delete_a_sign_in_record(records: list[SignInRecord]) -> None:
    record = records[0]

    for write in (
        lambda: SignInRecord.objects.filter(pk=record.pk).update(detail="nothing to see"),
        lambda: SignInRecord.objects.all().delete(),
        lambda: SignInRecord.objects.bulk_update([record], ["detail"]),
        record.delete,
        record.save,
    ):
        with pytest.raises(AppendOnlyError, match="append-only"):
            write()

    assert SignInRecord.objects.get(pk=record.pk).detail == "eve@evil.test may not sign in to Acme"


@pytest.mark.postgres
def test_postgresql_refuses_a_raw_update_or_delete_of_a_sign_in_record(records: list[SignInRecord]) -> None:
    record = records[0]

    for sql, params in (
        (f"UPDATE {table(SignInRecord)} SET detail = %s WHERE id = %s", ["nothing to see", record.pk]),  # noqa: S608
        (f"DELETE FROM {table(SignInRecord)} WHERE id = %s", [record.pk]),  # noqa: S608
    ):
        with (
            pytest.raises(DatabaseError, match="the sign-in record is append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(sql, params)

    assert SignInRecord.objects.get(pk=record.pk).detail == "eve@evil.test may not sign in to Acme"


def test_audit_verify_names_a_sign_in_record_edited_behind_the_platforms_back(
    personas: Any, records: list[SignInRecord]
) -> None:
    """The database's owner turns the break-glass sign-in into an ordinary sign-out."""
    edited = records[1]
    with behind_the_triggers() as cursor:
        cursor.execute(
            f"UPDATE {table(SignInRecord)} SET kind = %s WHERE id = %s",  # noqa: S608
            [Kind.SIGNED_OUT, edited.pk],
        )

    ok, out = verify()

    assert not ok
    assert (
        f"BROKEN  {where(personas.org)}: first broken link #2 (row {edited.pk}): its content does not "
        "match its hash (edited?); 1 links before it verify"
    ) in out
    assert f"ok      {where(personas.other_org)}: 1 links" in out


def test_audit_verify_names_a_sign_in_record_deleted_behind_the_platforms_back(
    personas: Any, records: list[SignInRecord]
) -> None:
    """The database's owner removes the refusal, then the last record too."""
    first, second, last = records
    with behind_the_triggers() as cursor:
        cursor.execute(f"DELETE FROM {table(SignInRecord)} WHERE id = %s", [first.pk])  # noqa: S608

    ok, out = verify()

    assert not ok
    assert (
        f"BROKEN  {where(personas.org)}: first broken link #2 (row {second.pk}): link #1 is missing "
        "(deleted?) before it; 0 links before it verify"
    ) in out

    with behind_the_triggers() as cursor:
        cursor.execute(f"DELETE FROM {table(SignInRecord)} WHERE id IN (%s, %s)", [second.pk, last.pk])  # noqa: S608

    ok, out = verify()

    assert not ok
    assert (
        f"BROKEN  {where(personas.org)}: first broken link #1 (no row): link #1 to #3 is missing from "
        "the end of the chain (deleted?): its head is at #3"
    ) in out
