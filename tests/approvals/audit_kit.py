"""What the audit record tests share: ``audit_verify`` as an operator runs it, a history settled
every way the platform settles a request, and the hands of someone who holds the database itself."""

from __future__ import annotations

import datetime as dt
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from approvals.models import ConfirmationEvent, ConfirmationRequest
from approvals.services import confirmation_cancel, confirmation_decide, confirmation_expire_due
from fimone.audit_chain import GENESIS, ChainKey, head_seal, keyed_link_hash, link_hash
from fimone.models import ChainHead
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool, set_policy, suspended_run


def verify(*args: str) -> tuple[bool, str]:
    """``manage.py audit_verify`` with ``args``: whether it passed (exit 0), and what it printed."""
    out = io.StringIO()
    try:
        call_command("audit_verify", *args, stdout=out)
    except CommandError as exc:
        return False, out.getvalue() + str(exc)
    return True, out.getvalue()


@contextmanager
def behind_the_triggers() -> Iterator[Any]:
    """A cursor of someone who holds the database itself, its tables' owner: on PostgreSQL the
    audit triggers do not stop them (``session_replication_role = replica``, as for whoever can
    drop a trigger). What still finds their edits is the keyed chain and its anchors."""
    postgres = connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        if postgres:
            cursor.execute("SET session_replication_role = replica")
        try:
            yield cursor
        finally:
            if postgres:
                cursor.execute("SET session_replication_role = DEFAULT")


def table(model: Any) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def row_id(row: Any) -> Any:
    """``row``'s primary key as raw SQL takes it (SQLite keeps a UUID as 32 hex digits)."""
    return type(row)._meta.pk.get_db_prep_value(row.pk, connection)


def settled_history(personas: Any) -> SimpleNamespace:
    """Five requests of Acme's payments agent, through the platform's own services: one approved
    by April, one rejected by her, one cancelled with its run, one expired, one still pending."""
    set_policy(personas)
    harness = Harness(pay_tool())
    requests = [suspended_run(personas, harness)[1] for _ in range(5)]
    approved, rejected, cancelled, expired, pending = requests
    assert confirmation_decide(
        request_id=approved.pk, user=personas.approver, approve=True, reason="ok"
    ).accepted
    assert confirmation_decide(
        request_id=rejected.pk, user=personas.approver, approve=False, reason="not this month"
    ).accepted
    assert confirmation_cancel(request_id=cancelled.pk, reason="the run was cancelled")
    ConfirmationRequest.objects.filter(pk=expired.pk).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)
    )
    assert confirmation_expire_due() == 1
    history = SimpleNamespace(
        approved=approved, rejected=rejected, cancelled=cancelled, expired=expired, pending=pending
    )
    for request in requests:
        request.refresh_from_db()
    return history


def rewrite_events(
    organization_id: int,
    *,
    from_seq: int,
    details: dict[str, Any],
    key: ChainKey | None,
    unkeyed: bool = False,
) -> None:
    """Someone behind the triggers rewrites the ``details`` of event ``from_seq`` of the
    organisation's chain and recomputes every link from there so that each follows the one
    before: with ``key`` as the platform would, without one as plain SHA-256; and moves the head
    to the new last link. Only with the key can they seal the head anew; ``unkeyed`` also has the
    head claim that every link is an unkeyed one written before the chain was keyed."""
    events = list(ConfirmationEvent.objects.filter(organization_id=organization_id).order_by("chain_seq"))
    prev_hash = events[from_seq - 2].entry_hash if from_seq > 1 else GENESIS
    with behind_the_triggers() as cursor:
        for event in events[from_seq - 1 :]:
            if event.chain_seq == from_seq:
                event.details = details
            document = event.chain_document()
            event.prev_hash = prev_hash
            event.entry_hash = (
                keyed_link_hash(key, prev_hash, document)
                if key is not None
                else link_hash(prev_hash, document)
            )
            cursor.execute(
                f"UPDATE {table(ConfirmationEvent)} SET details = %s, prev_hash = %s, entry_hash = %s "  # noqa: S608
                "WHERE id = %s",
                [json.dumps(event.details), event.prev_hash, event.entry_hash, event.pk],
            )
            prev_hash = event.entry_hash
        last = events[-1]
        chain = ConfirmationEvent._meta.label_lower
        head = ChainHead.objects.get(chain=chain, partition=organization_id)
        unkeyed_until = last.chain_seq if unkeyed else head.unkeyed_until
        seal = head.seal
        if key is not None:
            seal = head_seal(
                key,
                chain=chain,
                partition=organization_id,
                unkeyed_until=unkeyed_until,
                seq=last.chain_seq,
                entry_hash=last.entry_hash,
            )
        cursor.execute(
            f"UPDATE {table(ChainHead)} SET entry_hash = %s, prev_hash = %s, unkeyed_until = %s, seal = %s "  # noqa: S608
            "WHERE chain = %s AND partition = %s",
            [last.entry_hash, last.prev_hash, unkeyed_until, seal, chain, organization_id],
        )
