"""Anchors (docs/design.md §1.15): ``manage.py audit_anchor`` prints the signed head of every audit chain
for safekeeping outside the database, and ``audit_verify --anchor`` finds a chain rewritten after
it, even by someone who holds the audit key. The key can be rotated without losing what the
retired one signed."""

from __future__ import annotations

import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from agents.audit import connector_call_log_record
from approvals.models import ConfirmationEvent, ConfirmationRequest
from approvals.services import log_event
from fimone.audit_chain import anchor_unsigned, current_key
from fimone.models import ChainHead
from tests.approvals.audit_kit import (
    behind_the_triggers,
    rewrite_events,
    row_id,
    settled_history,
    table,
    verify,
)

Kind = ConfirmationEvent.Kind
EVENTS = "approvals.confirmationevent"


@pytest.fixture
def history(personas: Any, resumes: Any) -> Any:
    return settled_history(personas)


def anchor(*args: str) -> list[dict[str, Any]]:
    out = io.StringIO()
    call_command("audit_anchor", *args, stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def acme_head(personas: Any) -> ChainHead:
    return ChainHead.objects.get(chain=EVENTS, partition=personas.org.pk)


def rewrite_a_rejection_as_an_approval_with_the_key(history: Any, organization_id: int) -> None:
    """What someone holding both the database and the key can do: April's rejection becomes an
    approval, in the request row and in the event that settled it, every link after recomputed
    and the head sealed anew. The chain verifies."""
    decided = history.rejected.events.get(kind=Kind.DECIDED)
    verdict = {**decided.details["verdict"], "status": "approved"}
    details = {**decided.details, "status": "approved", "verdict": verdict}
    rewrite_events(organization_id, from_seq=decided.chain_seq, details=details, key=current_key())
    with behind_the_triggers() as cursor:
        cursor.execute(
            f"UPDATE {table(ConfirmationRequest)} SET status = 'approved' WHERE id = %s",  # noqa: S608
            [row_id(history.rejected)],
        )


def test_audit_anchor_prints_the_signed_head_of_every_chain_and_appends_them_to_a_file(
    personas: Any, history: Any, tmp_path: Path
) -> None:
    path = tmp_path / "anchors.jsonl"
    connector_call_log_record(
        org_id=personas.other_org.pk,
        agent_id=None,
        user_id=None,
        run_id=None,
        tool_call_id="call-1",
        tool_name="oa__purchases_list",
        arguments={},
        outcome="succeeded",
    )

    first = anchor("--output", str(path))
    second = anchor("--output", str(path))

    head = acme_head(personas)
    [entry] = [e for e in first if (e["chain"], e["organisation"]) == (EVENTS, personas.org.pk)]
    assert (entry["seq"], entry["hash"], entry["key"]) == (head.seq, head.entry_hash, current_key().key_id)
    assert not anchor_unsigned(entry)
    assert [(e["chain"], e["organisation"], e["seq"]) for e in first] == [
        ("agents.connectorcalllog", personas.other_org.pk, 1),
        (EVENTS, personas.org.pk, head.seq),
    ]
    lines = path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == first + second


def test_an_untouched_history_holds_its_anchors(personas: Any, history: Any, tmp_path: Path) -> None:
    path = tmp_path / "anchors.jsonl"
    anchor("--output", str(path))
    log_event(request_id=history.pending.pk, kind=Kind.DELIVERED)  # the chain grows past its anchor

    ok, out = verify("--anchor", str(path))

    assert ok, out
    assert f"anchors {path}: 1 hold" in out


def test_a_chain_rewritten_with_the_key_after_its_anchor_is_named(
    personas: Any, history: Any, tmp_path: Path
) -> None:
    path = tmp_path / "anchors.jsonl"
    [entry] = anchor("--output", str(path))
    rewrite_a_rejection_as_an_approval_with_the_key(history, personas.org.pk)
    assert verify()[0], "without the anchor, a rewrite with the key verifies"

    ok, out = verify("--anchor", str(path))

    assert not ok
    now = acme_head(personas).entry_hash
    assert (
        f"BROKEN  {EVENTS} of organisation {personas.org.pk} (Acme): link #{entry['seq']} is not the one "
        f"anchored on {entry['anchored_at']} ({path}:1): hash {entry['hash']} then, {now} now; the chain was "
        "rewritten after the anchor (with the audit key, if its links still verify)"
    ) in out
    assert "1 audit chain(s) broken" in out


def test_a_chain_deleted_after_its_anchor_is_named_by_it(personas: Any, history: Any, tmp_path: Path) -> None:
    path = tmp_path / "anchors.jsonl"
    [entry] = anchor("--output", str(path))
    with behind_the_triggers() as cursor:
        cursor.execute(f"DELETE FROM {table(ConfirmationEvent)}")  # noqa: S608
        cursor.execute(f"DELETE FROM {table(ChainHead)}")  # noqa: S608

    ok, out = verify("--anchor", str(path))

    assert not ok
    assert f"link #{entry['seq']} anchored on {entry['anchored_at']} ({path}:1) is gone" in out


def test_an_edited_anchor_is_named_and_does_not_count(personas: Any, history: Any, tmp_path: Path) -> None:
    path = tmp_path / "anchors.jsonl"
    [entry] = anchor()
    path.write_text(json.dumps({**entry, "seq": 1, "hash": "0" * 64}) + "\nnot json\n")

    ok, out = verify("--anchor", str(path))

    assert not ok
    assert f"BROKEN  anchor {path}:1: not an anchor signed with the audit key (edited?)" in out
    assert f"BROKEN  anchor {path}:2: not an anchor signed with the audit key (edited?)" in out


class AnchorStore(BaseHTTPRequestHandler):
    """A write-once store's endpoint: keeps what it is posted, answers ``status``."""

    received: list[tuple[str, str, bytes]]
    status = 201

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, self.headers["Content-Type"], body))
        self.send_response(self.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def store() -> Any:
    handler = type("Store", (AnchorStore,), {"received": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield handler, f"http://127.0.0.1:{server.server_address[1]}/anchors"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_audit_anchor_posts_the_anchors_to_the_configured_store(
    personas: Any, history: Any, settings: Any, store: Any
) -> None:
    handler, url = store
    settings.AUDIT_ANCHOR_URL = url
    out = io.StringIO()

    call_command("audit_anchor", stdout=out, stderr=io.StringIO())

    [(path, content_type, body)] = handler.received
    assert (path, content_type) == ("/anchors", "application/x-ndjson")
    assert body.decode() == out.getvalue() and len(body.splitlines()) == ChainHead.objects.count()


def test_audit_anchor_fails_when_the_store_does_not_take_the_anchors(
    personas: Any, history: Any, settings: Any, store: Any
) -> None:
    handler, url = store
    handler.status = 503
    settings.AUDIT_ANCHOR_URL = url

    with pytest.raises(CommandError, match="answered HTTP 503: not anchored"):
        call_command("audit_anchor", stdout=io.StringIO())


def test_after_a_key_rotation_the_retired_key_still_verifies_what_it_signed(
    personas: Any, resumes: Any, settings: Any, tmp_path: Path
) -> None:
    settings.AUDIT_CHAIN_KEY = "first-audit-key-" + "a" * 32
    history = settled_history(personas)
    path = tmp_path / "anchors.jsonl"
    anchor("--output", str(path))

    settings.AUDIT_CHAIN_KEY = "second-audit-key-" + "b" * 32
    ok, out = verify()
    assert not ok and "its head's seal does not match it under the audit key" in out

    settings.AUDIT_CHAIN_RETIRED_KEYS = ["first-audit-key-" + "a" * 32]
    log_event(request_id=history.pending.pk, kind=Kind.DELIVERED)  # written with the new key

    ok, out = verify("--anchor", str(path))
    assert ok, out
    assert f"anchors {path}: 1 hold" in out
