"""The record cannot be rewritten quietly (docs/design.md §1.15): audit rows are append-only in the ORM
and, on PostgreSQL, at the database; a settled request's verdict is final there and chained in its
organisation's history; the chain is keyed; and ``audit_verify`` names whatever was deleted,
edited or recomputed all the same by someone who holds the database itself."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from agents.audit import connector_call_log_record
from agents.models import ConnectorCallLog
from agents.services import run_start
from approvals.models import ConfirmationEvent, ConfirmationRequest, ConfirmationStatus, ConfirmationVote
from approvals.services import confirmation_expire_due, log_event
from fimone.audit_chain import AppendOnlyError, chain_verify, current_key
from fimone.models import ChainHead
from tests.agents.engine_kit import Harness, RecordingTool
from tests.approvals.audit_kit import (
    behind_the_triggers,
    rewrite_events,
    row_id,
    settled_history,
    table,
    verify,
)
from tests.personas import make_agent, scripted

Kind = ConfirmationEvent.Kind
EVENTS = "approvals.confirmationevent"
CALLS = "agents.connectorcalllog"


@pytest.fixture
def history(personas: Any, resumes: Any) -> Any:
    return settled_history(personas)


def acme(personas: Any, chain: str = EVENTS) -> str:
    return f"{chain} of organisation {personas.org.pk} (Acme)"


def log_one_call(personas: Any) -> ConnectorCallLog:
    connector_call_log_record(
        org_id=personas.org.pk,
        agent_id=None,
        user_id=personas.approver.pk,
        run_id=None,
        tool_call_id="call-1",
        tool_name="oa__purchases_list",
        arguments={"q": 1},
        outcome=ConnectorCallLog.Outcome.SUCCEEDED,
    )
    return ConnectorCallLog.objects.latest("pk")


def audit_rows(personas: Any, history: Any) -> dict[str, tuple[Any, str, Any]]:
    """One row of each audit table, with a column to try changing and a value to try."""
    return {
        "event": (history.approved.events.first(), "kind", Kind.EXPIRED),
        "vote": (ConfirmationVote.objects.get(request=history.approved), "approve", False),
        "call log": (log_one_call(personas), "outcome", ConnectorCallLog.Outcome.BLOCKED),
        "chain head": (ChainHead.objects.get(chain=EVENTS, partition=personas.org.pk), "seq", 1),
    }


def snapshot(row: Any) -> dict[str, Any]:
    return type(row)._base_manager.filter(pk=row.pk).values().get()


# --- the ORM refuses (both databases) ------------------------------------------------------------


@pytest.mark.parametrize("name", ["event", "vote", "call log", "chain head"])
def test_the_orm_refuses_to_update_or_delete_an_audit_row_by_queryset_or_instance(
    personas: Any, history: Any, name: str
) -> None:
    row, column, value = audit_rows(personas, history)[name]
    model, before = type(row), snapshot(row)

    for write in (
        lambda: model.objects.filter(pk=row.pk).update(**{column: value}),
        lambda: model.objects.filter(pk=row.pk).delete(),
        lambda: model.objects.all().delete(),
        lambda: model.objects.bulk_update([row], [column]),
        row.delete,
    ):
        with pytest.raises(AppendOnlyError, match="append-only"):
            write()
    setattr(row, column, value)
    with pytest.raises(AppendOnlyError, match="append-only"):
        row.save()

    assert snapshot(row) == before


def test_an_append_only_refusal_is_both_a_permission_error_and_a_value_error(history: Any) -> None:
    with pytest.raises(PermissionError):
        ConfirmationEvent.objects.all().delete()
    with pytest.raises(ValueError, match="confirmation events are append-only"):
        ConfirmationEvent.objects.all().update(kind=Kind.DECIDED)


# --- PostgreSQL refuses raw SQL ------------------------------------------------------------------


def refused(sql: str, params: list[Any]) -> str:
    """The database's refusal of ``sql`` (which must fail), in its own savepoint."""
    with pytest.raises(DatabaseError) as error, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
    return str(error.value)


@pytest.mark.postgres
@pytest.mark.parametrize("name", ["event", "vote", "call log"])
def test_postgresql_refuses_a_raw_update_or_delete_of_an_audit_row(
    personas: Any, history: Any, name: str
) -> None:
    row, column, value = audit_rows(personas, history)[name]
    model, before = type(row), snapshot(row)
    column = model._meta.get_field(column).column

    assert "UPDATE on" in refused(f"UPDATE {table(model)} SET {column} = %s WHERE id = %s", [value, row.pk])  # noqa: S608
    assert "append-only" in refused(f"DELETE FROM {table(model)} WHERE id = %s", [row.pk])  # noqa: S608
    assert "append-only" in refused(f"DELETE FROM {table(model)}", [])  # noqa: S608

    assert snapshot(row) == before


@pytest.mark.postgres
def test_postgresql_lets_a_chain_head_only_move_one_link_on(personas: Any, history: Any) -> None:
    head = ChainHead.objects.get(chain=EVENTS, partition=personas.org.pk)
    before = snapshot(head)
    where = "WHERE chain = %s AND partition = %s"
    key = [EVENTS, personas.org.pk]

    assert "never deleted" in refused(f"DELETE FROM {table(ChainHead)} {where}", key)  # noqa: S608
    for change, params in (
        ("seq = seq - 1", []),  # back over rows cut from the end
        ("entry_hash = %s", ["f" * 64]),
        ("unkeyed_until = seq", []),  # every link passed off as unkeyed
    ):
        message = refused(f"UPDATE {table(ChainHead)} SET {change} {where}", [*params, *key])  # noqa: S608
        assert "only moves one link on" in message

    assert snapshot(head) == before
    log_event(request_id=history.pending.pk, kind=Kind.DELIVERED)  # the chain's own code still moves it
    assert ChainHead.objects.get(pk=head.pk).seq == before["seq"] + 1


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("change", "params"),
    [
        ("status = 'approved'", []),
        ("responded_by_id = %s", ["member"]),
        ("responded_at = now()", []),
        ("reason = 'fine after all'", []),
        ("tool_args = '{\"amount\": 1}'::jsonb", []),
        ("args_sha256 = repeat('0', 64)", []),
        ("status = 'pending', responded_at = NULL", []),
    ],
)
def test_postgresql_refuses_to_change_a_settled_verdict(
    personas: Any, history: Any, change: str, params: list[Any]
) -> None:
    rejected = history.rejected
    before = snapshot(rejected)
    params = [personas.member.pk if p == "member" else p for p in params]

    message = refused(
        f"UPDATE {table(ConfirmationRequest)} SET {change} WHERE id = %s",  # noqa: S608
        [*params, row_id(rejected)],
    )

    assert f"request {rejected.pk} is rejected, and a verdict is final" in message
    assert snapshot(rejected) == before


@pytest.mark.postgres
def test_postgresql_refuses_to_delete_a_request_settled_or_not(history: Any) -> None:
    for request in (history.approved, history.pending):
        delete = f"DELETE FROM {table(ConfirmationRequest)} WHERE id = %s"  # noqa: S608
        assert "never deleted" in refused(delete, [row_id(request)])
    assert ConfirmationRequest.objects.count() == 5


@pytest.mark.postgres
def test_postgresql_still_lets_what_the_platform_does_to_requests_happen(personas: Any, history: Any) -> None:
    # A settled request's card moves on (its message id); a pending one escalates, is edited, expires.
    ConfirmationRequest.objects.filter(pk=history.approved.pk).update(external_message_id="om_2")
    ConfirmationRequest.objects.filter(pk=history.pending.pk).update(
        escalation_level=1, tool_args={"purchase_id": "PO-1001", "amount": 1}, expires_at=timezone.now()
    )
    assert confirmation_expire_due() == 1

    assert ConfirmationRequest.objects.get(pk=history.pending.pk).status == ConfirmationStatus.EXPIRED
    ok, out = verify()
    assert ok, out


# --- audit_verify names what was rewritten all the same (both databases) --------------------------


def test_a_history_settled_every_way_verifies_and_each_settling_event_records_its_verdict(
    personas: Any, history: Any
) -> None:
    ok, out = verify()

    assert ok, out
    assert f"ok      {acme(personas)}: " in out
    for request in (history.approved, history.rejected, history.cancelled, history.expired):
        [settling] = request.events.filter(kind__in=[Kind.DECIDED, Kind.EXPIRED, Kind.CANCELLED])
        assert settling.details["verdict"] == request.verdict_record()
    assert history.rejected.verdict_record() == {
        "status": "rejected",
        "responded_by": personas.approver.pk,
        "responded_by_external_id": "",
        "reason": "not this month",
        "args_sha256": history.rejected.args_sha256,
        "tool_args": history.rejected.verdict_record()["tool_args"],
    }


@pytest.mark.parametrize("length", [32, 64, 200], ids=["short", "one block", "longer than a block"])
def test_links_hashed_by_the_database_or_by_python_are_the_hmac_of_any_key_length(
    personas: Any, resumes: Any, settings: Any, length: int
) -> None:
    settings.AUDIT_CHAIN_KEY = "k" * length
    settled_history(personas)

    ok, out = verify()

    assert ok, out
    assert "k" * length not in repr(current_key())


def test_audit_verify_names_an_organisations_chain_deleted_with_its_head(personas: Any, history: Any) -> None:
    with behind_the_triggers() as cursor:
        delete = f"DELETE FROM {table(ConfirmationEvent)} WHERE organization_id = %s"  # noqa: S608
        cursor.execute(delete, [personas.org.pk])
        cursor.execute(f"DELETE FROM {table(ChainHead)} WHERE partition = %s", [personas.org.pk])  # noqa: S608
    assert ConfirmationRequest.objects.filter(organization=personas.org).count() == 5

    ok, out = verify()

    assert not ok
    assert (
        f"BROKEN  {acme(personas)}: no link and no head: the whole chain is missing (deleted?), "
        "although it has 5 confirmation requests"
    ) in out


def test_audit_verify_names_a_tail_cut_with_the_head(personas: Any, history: Any) -> None:
    last_two = list(
        ConfirmationEvent.objects.filter(organization=personas.org)
        .order_by("-chain_seq")
        .values_list("pk", "chain_seq")[:2]
    )
    count = ConfirmationEvent.objects.filter(organization=personas.org).count()
    with behind_the_triggers() as cursor:
        cursor.execute(
            f"DELETE FROM {table(ConfirmationEvent)} WHERE id IN (%s, %s)",  # noqa: S608
            [pk for pk, _ in last_two],
        )
        cursor.execute(f"DELETE FROM {table(ChainHead)} WHERE partition = %s", [personas.org.pk])  # noqa: S608

    ok, out = verify()

    assert not ok
    assert (
        f"BROKEN  {acme(personas)}: its head row is missing (deleted?) and {count - 2} links remain "
        "without it, although it has 5 confirmation requests"
    ) in out


def test_audit_verify_names_a_verdict_edited_on_its_request(personas: Any, history: Any) -> None:
    """Rejected becomes approved, by someone else: the request row is not a link, but the event
    that settled it recorded the verdict."""
    rejected = history.rejected
    with behind_the_triggers() as cursor:
        cursor.execute(
            f"UPDATE {table(ConfirmationRequest)} SET status = 'approved', responded_by_id = %s "  # noqa: S608
            "WHERE id = %s",
            [personas.admin.pk, row_id(rejected)],
        )
    seq = rejected.events.get(kind=Kind.DECIDED).chain_seq

    ok, out = verify()

    assert not ok
    assert (
        f"BROKEN  {acme(personas)}: request {rejected.pk}: its verdict differs from the one link #{seq} "
        f"recorded (edited?): responded_by {personas.approver.pk} when settled, {personas.admin.pk} now; "
        "status 'rejected' when settled, 'approved' now"
    ) in out
    assert "1 audit chain(s) broken" in out


def test_audit_verify_names_a_request_settled_behind_the_platforms_back(personas: Any, history: Any) -> None:
    """Moving a pending request on is what the platform does too (no trigger stops it), but no
    link of the chain settled it."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table(ConfirmationRequest)} SET status = 'approved', responded_by_id = %s, "  # noqa: S608
            "responded_at = %s WHERE id = %s",
            [personas.approver.pk, timezone.now(), row_id(history.pending)],
        )

    ok, out = verify()

    assert not ok
    assert (
        f"request {history.pending.pk}: it is approved, but no link of its organisation's chain settled it"
    ) in out


def test_audit_verify_names_a_settled_request_set_back_to_pending(personas: Any, history: Any) -> None:
    with behind_the_triggers() as cursor:
        cursor.execute(
            f"UPDATE {table(ConfirmationRequest)} SET status = 'pending', responded_by_id = NULL, "  # noqa: S608
            "responded_at = NULL WHERE id = %s",
            [row_id(history.approved)],
        )

    ok, out = verify()

    assert not ok
    seq = history.approved.events.get(kind=Kind.DECIDED).chain_seq
    assert f"request {history.approved.pk}: it is pending, but link #{seq} settled it (decided)" in out


def test_audit_verify_names_arguments_edited_after_the_approval(personas: Any, history: Any) -> None:
    with behind_the_triggers() as cursor:
        cursor.execute(
            f"UPDATE {table(ConfirmationRequest)} SET tool_args = %s WHERE id = %s",  # noqa: S608
            ['{"purchase_id": "PO-1001", "amount": 99999}', row_id(history.approved)],
        )

    ok, out = verify()

    assert not ok
    assert f"request {history.approved.pk}: its verdict differs" in out and "tool_args" in out


def test_audit_verify_names_a_chain_recomputed_without_the_key(personas: Any, history: Any) -> None:
    """Someone rewrites what April decided and recomputes every link after it, and the head, as
    plain SHA-256 links: each link follows the one before, but the chain is keyed."""
    decided = history.rejected.events.get(kind=Kind.DECIDED)
    rewrite_events(personas.org.pk, from_seq=decided.chain_seq, details={"status": "approved"}, key=None)
    assert chain_verify(ConfirmationEvent, personas.org.pk).broken is not None

    ok, out = verify()

    assert not ok
    assert f"BROKEN  {acme(personas)}: its head's seal does not match it under the audit key" in out


def test_audit_verify_names_links_recomputed_without_the_key_under_a_head_left_alone(
    personas: Any, history: Any
) -> None:
    events = list(ConfirmationEvent.objects.filter(organization=personas.org).order_by("chain_seq"))
    decided = history.rejected.events.get(kind=Kind.DECIDED)
    rewrite_events(personas.org.pk, from_seq=decided.chain_seq, details={"status": "approved"}, key=None)
    with behind_the_triggers() as cursor:  # the head as it was: its seal still matches it
        cursor.execute(
            f"UPDATE {table(ChainHead)} SET entry_hash = %s, prev_hash = %s "  # noqa: S608
            "WHERE chain = %s AND partition = %s",
            [events[-1].entry_hash, events[-1].prev_hash, EVENTS, personas.org.pk],
        )

    ok, out = verify()

    assert not ok
    assert (
        f"first broken link #{decided.chain_seq} (row {decided.pk}): its hash is a plain SHA-256, not keyed: "
        "it was recomputed without the audit key"
    ) in out


def test_audit_verify_names_keyed_links_passed_off_as_unkeyed_ones(personas: Any, history: Any) -> None:
    """Claiming every link predates the key (and recomputing them as plain SHA-256) needs a new
    seal of the head, which only the key makes."""
    rewrite_events(personas.org.pk, from_seq=1, details={"forged": True}, key=None, unkeyed=True)

    ok, out = verify()

    assert not ok
    assert f"BROKEN  {acme(personas)}: its head's seal does not match it under the audit key" in out


def test_with_the_key_a_rewrite_of_the_whole_chain_verifies_which_is_what_anchors_are_for(
    personas: Any, history: Any
) -> None:
    rejected = history.rejected
    decided = rejected.events.get(kind=Kind.DECIDED)
    verdict = {**decided.details["verdict"], "status": "approved"}
    details = {**decided.details, "status": "approved", "verdict": verdict}
    rewrite_events(personas.org.pk, from_seq=decided.chain_seq, details=details, key=current_key())
    with behind_the_triggers() as cursor:
        cursor.execute(
            f"UPDATE {table(ConfirmationRequest)} SET status = 'approved' WHERE id = %s",  # noqa: S608
            [row_id(rejected)],
        )

    ok, out = verify()

    assert ok, out  # tests/approvals/test_audit_anchor.py: --anchor finds it


def test_audit_verify_names_a_call_log_chain_deleted_with_its_head(personas: Any, resumes: Any) -> None:
    tool = RecordingTool("oa__purchases_list", parameters={"type": "object"})
    config = scripted(
        {"tool_calls": [{"name": "oa__purchases_list", "arguments": {}}]},
        {"content": "Outcome: {last}"},
        hooks=["audit_log"],
    )
    agent = make_agent(personas.org, personas.operator, model_config_json=config)
    Harness(tool).execute(run_start(agent=agent, user=personas.member, input="list"))
    assert ConnectorCallLog.objects.filter(organization=personas.org).count() == 1
    ok, out = verify()
    assert ok, out
    with behind_the_triggers() as cursor:
        cursor.execute(f"DELETE FROM {table(ConnectorCallLog)}")  # noqa: S608
        cursor.execute(f"DELETE FROM {table(ChainHead)} WHERE chain = %s", [CALLS])  # noqa: S608

    ok, out = verify()

    assert not ok
    assert (
        f"BROKEN  {acme(personas, CALLS)}: no link and no head: the whole chain is missing (deleted?), "
        "although its runs executed tool calls that an audit_log hook records"
    ) in out
