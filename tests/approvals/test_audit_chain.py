"""The confirmation history is tamper-evident: each event chains to the previous event of its
organisation by an HMAC-SHA256 under the audit key, and ``manage.py audit_verify`` names the first
link that does not hold. (Raw edits go ``behind_the_triggers``: on PostgreSQL only the database's
owner can still make them, tests/approvals/test_audit_record.py.)"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import itertools
import json
import threading
import time

import pytest
from django.db import close_old_connections, transaction
from django.utils import timezone

from agents.services import run_start
from approvals.models import ConfirmationEvent, ConfirmationRequest
from approvals.services import log_event
from fimone.audit_chain import (
    GENESIS,
    ChainHeadMissing,
    canonical_json,
    chain_verify,
    current_key,
    keyed_link_hash,
    link_hash,
)
from fimone.models import ChainHead
from tests.approvals.audit_kit import behind_the_triggers, table, verify
from tests.personas import make_agent

Kind = ConfirmationEvent.Kind
TABLE = table(ConfirmationEvent)


def open_request(org, owner, user, *, call: str = "call-1") -> ConfirmationRequest:
    agent = make_agent(org, owner, name=f"Payer {call}")
    run = run_start(agent=agent, user=user, input="pay")
    return ConfirmationRequest.objects.create(
        organization=org,
        agent=agent,
        requested_by=user,
        run=run,
        tool_call_id=call,
        tool_name="oa__purchase_pay",
        tool_args={"amount": 1250.5},
        args_sha256="0" * 64,
        expires_at=timezone.now() + dt.timedelta(hours=1),
    )


@pytest.fixture
def history(personas, resumes):
    """Five events in Acme, two in Globex, interleaved (votes: both requests stay pending)."""
    acme = open_request(personas.org, personas.operator, personas.member)
    globex = open_request(personas.other_org, personas.stranger, personas.stranger, call="call-g")
    log_event(request_id=acme.pk, kind=Kind.CREATED)
    log_event(request_id=globex.pk, kind=Kind.CREATED)
    log_event(request_id=acme.pk, kind=Kind.DELIVERED, via="web")
    log_event(request_id=acme.pk, kind=Kind.CLICK_REFUSED, external_id="ou_x", reason="not an approver")
    log_event(request_id=globex.pk, kind=Kind.VOTED, actor=personas.stranger, vote="rejected")
    log_event(request_id=acme.pk, kind=Kind.VOTED, actor=personas.approver, vote="approved", note="ok")
    log_event(request_id=acme.pk, kind=Kind.EXECUTED, tool_status="ok")
    return acme, globex


def acme_events(personas) -> list[ConfirmationEvent]:
    return list(ConfirmationEvent.objects.filter(organization=personas.org).order_by("chain_seq"))


def test_each_organisation_has_its_own_linear_chain_of_hmac_sha256_links(personas, history):
    for org, count in ((personas.org, 5), (personas.other_org, 2)):
        events = list(ConfirmationEvent.objects.filter(organization=org).order_by("chain_seq"))
        assert [e.chain_seq for e in events] == list(range(1, count + 1))
        assert events[0].prev_hash == GENESIS
        for before, after in itertools.pairwise(events):
            assert after.prev_hash == before.entry_hash
    first = acme_events(personas)[0]
    document = {
        "chain": "approvals.confirmationevent",
        "partition": personas.org.pk,
        "seq": 1,
        "row": {
            "request": str(first.request_id),
            "kind": "created",
            "actor": None,
            "actor_external_id": "",
            "details": {},
            "created_at": first.created_at.astimezone(dt.UTC).isoformat(timespec="microseconds"),
        },
    }
    text = canonical_json({"prev": GENESIS, "row": document}).encode()
    expected = hmac.new(current_key().secret, text, hashlib.sha256).hexdigest()
    assert first.entry_hash == expected == keyed_link_hash(current_key(), GENESIS, document)
    assert first.entry_hash != hashlib.sha256(text).hexdigest() == link_hash(GENESIS, document)


def test_audit_verify_passes_on_a_clean_history_and_prints_each_head(personas, history):
    ok, out = verify()
    assert ok, out
    head = acme_events(personas)[-1].entry_hash
    assert f"5 links, head {head}" in out
    assert "2 links" in out
    assert "every audit chain verifies" in out


def test_audit_verify_names_the_first_event_edited_through_raw_sql(personas, history):
    third = acme_events(personas)[2]
    with behind_the_triggers() as cursor:
        cursor.execute(
            f"UPDATE {TABLE} SET details = %s WHERE id = %s",  # noqa: S608
            [json.dumps({"external_id": "ou_x", "reason": "approved by the CFO"}), third.pk],
        )

    ok, out = verify()

    assert not ok
    assert f"first broken link #3 (row {third.pk})" in out
    assert "does not match its hash" in out
    assert "2 links before it verify" in out
    assert "1 audit chain(s) broken" in out
    assert f"ok      approvals.confirmationevent of organisation {personas.other_org.pk}" in out


@pytest.mark.parametrize(
    ("column", "value"),
    [("kind", "decided"), ("actor_external_id", "ou_boss"), ("created_at", "2020-01-01 00:00:00")],
)
def test_audit_verify_finds_an_edit_of_any_column(personas, history, column, value):
    second = acme_events(personas)[1]
    with behind_the_triggers() as cursor:
        cursor.execute(f"UPDATE {TABLE} SET {column} = %s WHERE id = %s", [value, second.pk])  # noqa: S608

    ok, out = verify("--organisation", personas.org.name)

    assert not ok
    assert f"first broken link #2 (row {second.pk})" in out


def test_audit_verify_finds_an_edit_whose_own_hash_was_recomputed_at_the_next_link(personas, history):
    """Someone who holds the key and rewrites a row and its hash breaks the following link instead."""
    events = acme_events(personas)
    forged = events[1]
    forged.details = {"via": "slack"}
    forged_hash = keyed_link_hash(current_key(), forged.prev_hash, forged.chain_document())
    with behind_the_triggers() as cursor:
        cursor.execute(
            f"UPDATE {TABLE} SET details = %s, entry_hash = %s WHERE id = %s",  # noqa: S608
            [json.dumps(forged.details), forged_hash, forged.pk],
        )

    ok, out = verify()

    assert not ok
    assert f"first broken link #3 (row {events[2].pk})" in out
    assert "previous hash does not match" in out


def test_audit_verify_finds_a_deleted_event(personas, history):
    events = acme_events(personas)
    with behind_the_triggers() as cursor:
        cursor.execute(f"DELETE FROM {TABLE} WHERE id = %s", [events[2].pk])  # noqa: S608

    ok, out = verify()

    assert not ok
    assert f"first broken link #4 (row {events[3].pk}): link #3 is missing" in out


def test_audit_verify_finds_events_cut_from_the_end_of_a_chain(personas, history):
    """The head row remembers where the chain ended: a history cut short no longer verifies."""
    events = acme_events(personas)
    with behind_the_triggers() as cursor:
        cursor.execute(f"DELETE FROM {TABLE} WHERE id IN (%s, %s)", [events[3].pk, events[4].pk])  # noqa: S608

    ok, out = verify()

    assert not ok
    assert "first broken link #4 (no row): link #4 to #5 is missing from the end of the chain" in out
    assert "3 links before it verify" in out


def test_audit_verify_finds_a_last_event_rewritten_with_a_valid_hash(personas, history):
    """Rewriting the last link and its hash with the key leaves a chain that recomputes, but not
    its head, whose seal only the chain's own code rewrites."""
    last = acme_events(personas)[-1]
    last.details = {"tool_status": "cancelled"}
    forged_hash = keyed_link_hash(current_key(), last.prev_hash, last.chain_document())
    with behind_the_triggers() as cursor:
        cursor.execute(
            f"UPDATE {TABLE} SET details = %s, entry_hash = %s WHERE id = %s",  # noqa: S608
            [json.dumps(last.details), forged_hash, last.pk],
        )

    ok, out = verify()

    assert not ok
    assert f"first broken link #5 (row {last.pk}): it is not the link the chain's head recorded" in out


def test_a_chain_whose_head_was_deleted_takes_no_more_links_and_audit_verify_names_it(personas, history):
    """A head made up again at the remaining last link would hide rows cut from the end with it."""
    with behind_the_triggers() as cursor:
        cursor.execute(f"DELETE FROM {table(ChainHead)} WHERE partition = %s", [personas.org.pk])  # noqa: S608
    acme = acme_events(personas)[0].request_id

    with pytest.raises(ChainHeadMissing, match="has links but no head row"), transaction.atomic():
        log_event(request_id=acme, kind=Kind.DELIVERED)

    assert [e.chain_seq for e in acme_events(personas)] == [1, 2, 3, 4, 5]
    ok, out = verify()
    assert not ok
    assert (
        f"BROKEN  approvals.confirmationevent of organisation {personas.org.pk} (Acme): its head row is "
        "missing (deleted?) and 5 links remain without it, although it has 1 confirmation request"
    ) in out


def test_audit_verify_finds_an_event_inserted_into_the_history(personas, history):
    events = acme_events(personas)
    with behind_the_triggers() as cursor:  # make room after link 2 and slip a forged decision in
        cursor.execute(
            f"UPDATE {TABLE} SET chain_seq = chain_seq + 100 WHERE organization_id = %s AND chain_seq > 2",  # noqa: S608
            [personas.org.pk],
        )
    forged = ConfirmationEvent(
        organization=personas.org,
        request_id=events[0].request_id,
        kind=Kind.DECIDED,
        details={"decision": "approve"},
        chain_seq=3,
        prev_hash=events[1].entry_hash,
    )
    forged.entry_hash = keyed_link_hash(current_key(), forged.prev_hash, forged.chain_document())
    forged.save(force_insert=True)

    result = chain_verify(ConfirmationEvent, personas.org.pk)

    assert result.broken is not None
    assert result.broken.seq == 103 and result.verified == 3


def test_audit_verify_checks_one_organisation_and_refuses_an_unknown_one(personas, history):
    globex_event = ConfirmationEvent.objects.filter(organization=personas.other_org).first()
    with behind_the_triggers() as cursor:
        cursor.execute(f"UPDATE {TABLE} SET kind = 'expired' WHERE id = %s", [globex_event.pk])  # noqa: S608

    ok, out = verify("--organisation", str(personas.org.pk))
    assert ok, out
    assert f"organisation {personas.other_org.pk}" not in out

    ok, out = verify("--organisation", "Globex")
    assert not ok and "#1" in out

    ok, out = verify("--organisation", "Initech'; DROP TABLE x; --")
    assert not ok and "no organisation with id or name" in out


def test_hostile_details_survive_the_database_and_still_verify(personas, resumes):
    request = open_request(personas.org, personas.operator, personas.member)
    log_event(
        request_id=request.pk,
        kind=Kind.CLICK_REFUSED,
        external_id="ou_\u202ex",
        reason='ünïcødé 🚨 "quotes" \\ back</script>',
        big=1e20,
        tiny=1.5e-7,
        whole=3.0,
        huge=2**62,
        nested={"b": [1, 2.5, {"z": None, "a": True}], "a": ("tuple", "kept")},
    )
    ok, out = verify()
    assert ok, out


def test_a_rolled_back_event_leaves_no_gap_in_the_chain(personas, resumes):
    request = open_request(personas.org, personas.operator, personas.member)
    log_event(request_id=request.pk, kind=Kind.CREATED)
    with pytest.raises(RuntimeError), transaction.atomic():
        log_event(request_id=request.pk, kind=Kind.DECIDED, decision="approve")
        raise RuntimeError("the decision's transaction fails")
    log_event(request_id=request.pk, kind=Kind.EXPIRED)

    assert list(ConfirmationEvent.objects.values_list("chain_seq", "kind")) == [
        (1, "created"),
        (2, "expired"),
    ]
    assert chain_verify(ConfirmationEvent, personas.org.pk).broken is None


# --- concurrency (PostgreSQL: real row-level concurrency) --------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_of_one_organisation_keep_its_chain_linear(personas):
    from unittest import mock

    with mock.patch("agents.services.dispatch_execute", lambda run_id: None):
        requests = [
            open_request(personas.org, personas.operator, personas.member, call=f"c{i}") for i in range(4)
        ]
    threads, errors = 8, []
    start = threading.Barrier(threads)

    def writer(index: int) -> None:
        try:
            start.wait()
            for n in range(15):
                with transaction.atomic():
                    log_event(request_id=requests[(index + n) % 4].pk, kind=Kind.DELIVERED, writer=index, n=n)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))
        finally:
            close_old_connections()

    workers = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)

    assert errors == []
    events = acme_events(personas)
    assert [e.chain_seq for e in events] == list(range(1, threads * 15 + 1))
    for before, after in itertools.pairwise(events):
        assert after.prev_hash == before.entry_hash, f"the chain forked at #{after.chain_seq}"
    ok, out = verify()
    assert ok, out


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_chain_lock_is_per_organisation_not_global(personas):
    from unittest import mock

    with mock.patch("agents.services.dispatch_execute", lambda run_id: None):
        acme = open_request(personas.org, personas.operator, personas.member)
        globex = open_request(personas.other_org, personas.stranger, personas.stranger, call="g")
    holding, release = threading.Event(), threading.Event()
    finished: dict[str, float] = {}

    def hold_acme() -> None:
        with transaction.atomic():
            log_event(request_id=acme.pk, kind=Kind.CREATED)
            holding.set()
            release.wait(10)
        close_old_connections()

    def log_for(name: str, request_id) -> None:
        log_event(request_id=request_id, kind=Kind.DELIVERED)
        finished[name] = time.monotonic()
        close_old_connections()

    holder = threading.Thread(target=hold_acme)
    holder.start()
    assert holding.wait(10)
    other = threading.Thread(target=log_for, args=("globex", globex.pk))
    same = threading.Thread(target=log_for, args=("acme", acme.pk))
    other.start()
    same.start()
    other.join(10)
    assert "globex" in finished, "another organisation's writer was blocked"
    time.sleep(0.3)
    assert "acme" not in finished, "a second writer of the same organisation did not wait its turn"
    release.set()
    holder.join(10)
    same.join(10)
    assert "acme" in finished
    assert list(
        ConfirmationEvent.objects.filter(organization=personas.org).order_by("chain_seq").values_list("kind")
    ) == [("created",), ("delivered",)]
    assert chain_verify(ConfirmationEvent, personas.org.pk).broken is None
