"""The shadow decisions are part of the record that cannot be rewritten quietly (docs/design.md §1.15):
beyond the ORM's refusal (``test_shadow_mode``), PostgreSQL's trigger refuses raw SQL, and
``audit_verify`` names a decision that someone holding the database itself edited, deleted or
recomputed without the audit key."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction

from agents.models import ShadowDecision
from agents.shadow_log import shadow_decisions_record
from fimone.audit_chain import link_hash
from hooks import SideEffect
from tests.approvals.audit_kit import behind_the_triggers, table, verify

pytestmark = pytest.mark.django_db

CHAIN = "agents.shadowdecision"


def decided(organization: Any, *details: str) -> list[ShadowDecision]:
    """One shadow decision per ``details``, through the record's only writer, as a ``deny_tools``
    declaration in shadow would leave them on one call."""
    notes = [
        SideEffect(
            "deny_tools",
            detail,
            shadow={"decision": "block", "declaration": 7, "source": "agent"},
        )
        for detail in details
    ]
    return shadow_decisions_record(
        org_id=organization.pk,
        agent_id=None,
        run_id=None,
        point="PreToolUse",
        tool_call_id="call-1",
        tool_name="oa__purchase_pay",
        notes=notes,
    )


def acme_and_globex(personas: Any) -> list[ShadowDecision]:
    """Three decisions in Acme's chain, one in Globex's; ``audit_verify`` passes on them."""
    rows = decided(personas.org, "Payments are frozen.", "Payments are frozen (2).", "Frozen (3).")
    decided(personas.other_org, "Globex payments are frozen.")
    ok, out = verify()
    assert ok, out
    assert f"ok      {CHAIN} of organisation {personas.org.pk} (Acme): 3 links" in out
    return rows


def snapshot(row: ShadowDecision) -> dict[str, Any]:
    return ShadowDecision._base_manager.filter(pk=row.pk).values().get()


def refused(sql: str, params: list[Any]) -> str:
    """The database's refusal of ``sql`` (which must fail), in its own savepoint."""
    with pytest.raises(DatabaseError) as error, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
    return str(error.value)


@pytest.mark.postgres
def test_postgresql_refuses_a_raw_update_or_delete_of_a_shadow_decision(personas) -> None:
    [row] = decided(personas.org, "Payments are frozen.")
    before = snapshot(row)

    for column, value in (("decision", "fail_open"), ("detail", "nothing to see")):
        message = refused(f"UPDATE {table(ShadowDecision)} SET {column} = %s WHERE id = %s", [value, row.pk])  # noqa: S608
        assert "UPDATE on agents_shadowdecision refused" in message and "append-only" in message
    message = refused(f"DELETE FROM {table(ShadowDecision)} WHERE id = %s", [row.pk])  # noqa: S608
    assert "DELETE on agents_shadowdecision refused" in message
    assert "append-only" in refused(f"DELETE FROM {table(ShadowDecision)}", [])  # noqa: S608

    assert snapshot(row) == before


def test_audit_verify_names_a_shadow_decision_edited_behind_the_orm_and_the_triggers(personas) -> None:
    rows = acme_and_globex(personas)

    with behind_the_triggers() as cursor:  # "would have blocked" becomes "would have let it fail open"
        cursor.execute(
            f"UPDATE {table(ShadowDecision)} SET decision = %s WHERE id = %s",  # noqa: S608
            ["fail_open", rows[1].pk],
        )

    ok, out = verify()
    assert not ok
    acme = f"{CHAIN} of organisation {personas.org.pk} (Acme)"
    assert (
        f"BROKEN  {acme}: first broken link #2 (row {rows[1].pk}): its content does not match its "
        "hash (edited?); 1 links before it verify"
    ) in out
    assert f"ok      {CHAIN} of organisation {personas.other_org.pk} (Globex" in out


def test_audit_verify_names_a_shadow_decision_deleted_behind_the_orm_and_the_triggers(personas) -> None:
    rows = acme_and_globex(personas)

    with behind_the_triggers() as cursor:
        cursor.execute(f"DELETE FROM {table(ShadowDecision)} WHERE id = %s", [rows[1].pk])  # noqa: S608

    ok, out = verify()
    assert not ok
    acme = f"{CHAIN} of organisation {personas.org.pk} (Acme)"
    assert f"BROKEN  {acme}: first broken link #3 (row {rows[2].pk}): link #2 is missing (deleted?)" in out


def test_audit_verify_names_a_shadow_decision_recomputed_without_the_audit_key(personas) -> None:
    rows = acme_and_globex(personas)
    last = rows[2]
    last.detail = "nothing to see"
    rehashed = link_hash(last.prev_hash, last.chain_document())  # all one can do without the key

    with behind_the_triggers() as cursor:
        cursor.execute(
            f"UPDATE {table(ShadowDecision)} SET detail = %s, entry_hash = %s WHERE id = %s",  # noqa: S608
            [last.detail, rehashed, last.pk],
        )

    ok, out = verify()
    assert not ok
    acme = f"{CHAIN} of organisation {personas.org.pk} (Acme)"
    assert (
        f"BROKEN  {acme}: first broken link #3 (row {last.pk}): its hash is a plain SHA-256, not "
        "keyed: it was recomputed without the audit key"
    ) in out
