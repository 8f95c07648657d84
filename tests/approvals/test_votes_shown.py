"""Every vote is shown with who and when: pushed to the run's stream while a quorum waits, carried
by the verdict's event, listed in the history and its CSV, found by the "Decided by" filter; the
event log names people; operators read the record; dates are ISO and pages say their zone."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from agents import events as ev
from agents.models import RunEvent
from approvals.models import ConfirmationStatus
from approvals.services import confirmation_decide
from fimone.asgi import application
from tests.agents.engine_kit import Harness
from tests.agents.test_stream import session_cookie
from tests.approvals.kit import pay_tool, recorded_request, set_policy, suspended_run

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://127.0.0.1:8000")


def quorum(personas: Any, **policy: Any) -> tuple[Any, Any, Harness]:
    """A run parked on a request april and adam must both approve."""
    set_policy(personas, approvals_required=2, **policy)
    harness = Harness(pay_tool())
    run, request = suspended_run(personas, harness)
    return run, request, harness


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def stream_while(run: Any, user: Any, action: Any) -> list[dict]:
    """What ``user``'s socket on the run's stream receives while ``action()`` runs in a worker
    thread (as a view would)."""
    cookie = session_cookie(user)

    async def scenario() -> list[dict]:
        ws = WebsocketCommunicator(
            application, f"/ws/runs/{run.pk}/", headers=[ORIGIN, (b"cookie", cookie.encode())]
        )
        assert (await ws.connect())[0]
        await database_sync_to_async(action)()
        received = []
        while not await ws.receive_nothing(timeout=0.3):
            received.append(await ws.receive_json_from())
        await ws.disconnect()
        return received

    return async_to_sync(scenario)()


def test_a_vote_that_leaves_the_quorum_waiting_is_pushed_to_the_runs_stream_and_not_stored(
    personas, resumes
) -> None:
    run, request, _ = quorum(personas)
    stored = list(RunEvent.objects.filter(run=run).values_list("seq", flat=True))

    def votes() -> None:
        assert confirmation_decide(request_id=request.pk, user=personas.auditor, approve=True).refused
        assert confirmation_decide(
            request_id=request.pk, user=personas.approver, approve=True, reason="ok"
        ).counted

    received = stream_while(run, personas.member, votes)

    [event] = received  # the refused click pushed nothing
    assert event["type"] == ev.APPROVAL_VOTED and event["seq"] == max(stored)
    payload = event["payload"]
    assert payload["request_id"] == str(request.pk) and payload["tool_call_id"] == request.tool_call_id
    assert (payload["approvals"], payload["approvals_required"]) == (1, 2)
    [vote] = payload["votes"]
    assert (vote["by"], vote["approve"], vote["reason"]) == ("april", True, "ok")
    assert dt.datetime.fromisoformat(vote["at"])
    assert list(RunEvent.objects.filter(run=run).values_list("seq", flat=True)) == stored, "never stored"


def test_the_verdict_event_carries_every_vote_and_the_approvals(personas, resumes) -> None:
    run, request, harness = quorum(personas)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    confirmation_decide(request_id=request.pk, user=personas.admin, approve=True, reason="checked")

    harness.resume(run)

    decided = RunEvent.objects.get(run=run, type=ev.APPROVAL_DECIDED).payload
    assert decided["status"] == "approved" and decided["approvals"] == 2
    assert [(v["by"], v["approve"], v["reason"]) for v in decided["votes"]] == [
        ("april", True, ""),
        ("adam", True, "checked"),
    ]


def test_the_event_log_names_the_approvers_instead_of_showing_their_ids(personas, resumes) -> None:
    _, request, _ = quorum(personas)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)

    page = signed_in(personas.auditor).get(f"/approvals/{request.pk}/").content.decode()

    log = page.split("<h2>Event log</h2>")[1].split("</table>")[0]
    readable = re.sub(r"<details.*?</details>", "", log, flags=re.S)
    assert "<dt>Could decide</dt><dd>april, adam</dd>" in readable
    assert (
        "<dt>Vote</dt><dd>Approved</dd>" in readable and "<dt>Tally</dt><dd>1 of 2 approvals</dd>" in readable
    )
    assert "&quot;approvers&quot;" not in readable and "[" not in re.sub(r"<[^>]+>", "", readable)
    assert "&quot;approvers&quot;: [" in log, "the exact record stays one click away"
    assert re.search(r"\d\d:\d\d:\d\d UTC", log), "times carry their zone"


def test_the_history_and_its_csv_list_every_voter_and_the_decider_filter_finds_each(
    personas, resumes
) -> None:
    _, request, _ = quorum(personas)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    confirmation_decide(request_id=request.pk, user=personas.admin, approve=True)
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.APPROVED and request.responded_by == personas.admin
    other = recorded_request(personas, status="approved", decided_by=personas.admin, decided_after=5)
    auditor = signed_in(personas.auditor)

    by_april = auditor.get("/approvals/history/", {"decider": personas.approver.pk}).content.decode()
    exported = list(
        csv.DictReader(
            io.StringIO(b"".join(auditor.get("/approvals/history/export.csv").streaming_content).decode())
        )
    )

    assert f"/approvals/{request.pk}/" in by_april and f"/approvals/{other.pk}/" not in by_april
    assert "april (approved), adam (approved)" in by_april
    row = next(r for r in exported if r["id"] == str(request.pk))
    assert row["decided_by"] == "april; adam"
    assert re.fullmatch(r"april approved \S+; adam approved \S+", row["votes"])
    assert next(r for r in exported if r["id"] == str(other.pk))["decided_by"] == "adam"


def test_operators_read_the_approval_record_and_find_it_in_their_menu(personas, resumes) -> None:
    request = recorded_request(personas, status="approved", decided_by=personas.approver, decided_after=3)
    oscar = signed_in(personas.operator)

    history = oscar.get("/approvals/history/")

    assert history.status_code == 200 and f"/approvals/{request.pk}/" in history.content.decode()
    assert 'href="/approvals/history/"' in oscar.get("/approvals/").content.decode()
    assert oscar.get(f"/approvals/{request.pk}/").status_code == 200
    assert oscar.get("/approvals/history/tools/").status_code == 200
    assert signed_in(personas.stranger).get(f"/approvals/{request.pk}/").status_code == 404


def test_a_member_refused_the_history_is_sent_back_to_their_agents_not_to_an_inbox(personas) -> None:
    page = signed_in(personas.member).get("/approvals/history/")

    assert page.status_code == 403
    assert "Back to your agents" in page.content.decode() and "Back to the inbox" not in page.content.decode()


def test_date_filters_are_iso_dates_and_the_pages_say_the_zone(personas, resumes) -> None:
    recorded_request(personas, status="approved", decided_by=personas.approver, decided_after=3)
    auditor = signed_in(personas.auditor)
    today = dt.date.today().isoformat()

    page = auditor.get("/approvals/history/", {"since": today}).content.decode()
    american = auditor.get("/approvals/history/", {"since": "12/03/2026"})

    assert 'placeholder="yyyy-mm-dd"' in page and "Dates and times are in UTC" in page
    assert re.search(r'class="mono when"><a [^>]+>\d{4}-\d\d-\d\d \d\d:\d\d UTC</a>', page)
    assert american.status_code == 400
    text = american.content.decode()
    assert "Enter a valid date" in text and 'id="id_since"' in text, "the problem is shown on its field"


def test_the_tool_call_record_shows_a_bad_filter_on_its_field_as_the_history_does(personas, resumes) -> None:
    auditor = signed_in(personas.auditor)

    american = auditor.get("/approvals/history/tools/", {"since": "12/03/2026"})

    assert american.status_code == 400
    text = american.content.decode()
    assert "Enter a valid date" in text and 'id="id_since"' in text, "the problem is shown on its field"
    assert "Nothing was searched: fix the filters above." in text
    assert "No tool calls match" not in text


def test_the_inbox_title_counts_what_waits(personas, resumes) -> None:
    set_policy(personas)
    suspended_run(personas, Harness(pay_tool()))
    suspended_run(personas, Harness(pay_tool()))

    april = signed_in(personas.approver).get("/approvals/").content.decode()
    aude = signed_in(personas.auditor).get("/approvals/").content.decode()

    assert re.search(r"<title>\(2\) Inbox\b", april)
    assert re.search(r"<title>Inbox\b", aude), "nothing waits for an auditor"
