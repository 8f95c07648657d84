"""The auditor's record: the approval history's filters, search, names and times, its CSV export
(streamed, spreadsheet-safe, scoped), and the way back from a request to the history."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from typing import Any

import pytest
from django.http import StreamingHttpResponse
from django.test import Client
from django.utils import timezone

from agents import events as ev
from agents.models import RunEvent, ToolExecution
from approvals import exports
from approvals.models import ConfirmationRequest
from tests.approvals.kit import recorded_request
from tests.personas import make_agent, make_user

HISTORY = "/approvals/history/"
EXPORT = "/approvals/history/export.csv"


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def csv_rows(response: Any) -> list[dict[str, str]]:
    assert isinstance(response, StreamingHttpResponse), "the export is streamed"
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def tools_listed(page: str) -> list[str]:
    """The tools of the lines listed: both records keep a tool's internal name out of sight (the
    history's row's ``data-tool``, the tool-call record's title attribute of the tool's title)."""
    found = re.findall(r'<tr data-tool="([^"]*)">|<td data-label="Tool"><span title="([^"]*)">', page)
    return [in_history or in_calls for in_history, in_calls in found]


@pytest.fixture
def record(governed) -> dict[str, Any]:
    """Three Acme requests told apart by tool name, and one of Globex."""
    p = governed
    now = timezone.now()
    decider = make_user("dora", p.org, "approver")
    dora_agent = make_agent(p.org, p.operator, name="Ledger bot")
    return {
        "old": recorded_request(
            p,
            tool_name="tool_old",
            created_at=now - dt.timedelta(days=10),
            status="approved",
            decided_by=p.approver,
            decided_after=95,
        ),
        "dora": recorded_request(
            p,
            agent=dora_agent,
            tool_name="tool_dora",
            approvers=[decider],
            status="rejected",
            decided_by=decider,
            decided_after=3 * 3600 + 300,
            channel="slack",
            reason="over budget",
            tool_args={"purchase_id": "PO-7777", "amount": 5},
        ),
        "bypassed": recorded_request(p, tool_name="tool_eval", hooks_bypassed=True, requester=p.operator),
        "globex": recorded_request(
            p,
            agent=make_agent(p.other_org, p.stranger, name="Globex bot"),
            requester=p.stranger,
            approvers=[p.stranger],
            tool_name="tool_globex",
        ),
        "decider": decider,
        "now": now,
    }


def test_the_history_filters_by_approver_and_by_date_range(governed, record) -> None:
    client = signed_in(governed.auditor)
    today = record["now"].date()

    by_dora = client.get(HISTORY, {"approver": record["decider"].pk}).content.decode()
    by_april = client.get(HISTORY, {"approver": governed.approver.pk}).content.decode()
    recent = client.get(HISTORY, {"since": today - dt.timedelta(days=1)}).content.decode()
    old = client.get(HISTORY, {"until": today - dt.timedelta(days=5)}).content.decode()

    assert tools_listed(by_dora) == ["tool_dora"]
    assert set(tools_listed(by_april)) == {"tool_old", "tool_eval"}
    assert set(tools_listed(recent)) == {"tool_dora", "tool_eval"}
    assert tools_listed(old) == ["tool_old"]
    assert tools_listed(client.get(HISTORY, {"decider": governed.approver.pk}).content.decode()) == [
        "tool_old"
    ]


def test_the_history_filters_by_status_agent_requester_channel_and_hooks_bypassed(governed, record) -> None:
    client = signed_in(governed.auditor)

    def listed(**filters: Any) -> list[str]:
        return tools_listed(client.get(HISTORY, filters).content.decode())

    assert listed(status="rejected") == ["tool_dora"]
    assert listed(agent=record["dora"].agent_id) == ["tool_dora"]
    assert listed(requester=governed.operator.pk) == ["tool_eval"]
    assert listed(channel="slack") == ["tool_dora"]
    assert listed(hooks_bypassed="yes") == ["tool_eval"]
    assert set(listed(hooks_bypassed="no")) == {"tool_old", "tool_dora"}
    assert set(listed(organization=governed.org.pk)) == {"tool_old", "tool_dora", "tool_eval"}


def test_it_refuses_filters_naming_another_organisations_agent_person_or_organisation(
    governed, record
) -> None:
    client = signed_in(governed.auditor)

    for filters in (
        {"agent": record["globex"].agent_id},
        {"requester": governed.stranger.pk},
        {"approver": governed.stranger.pk},
        {"decider": governed.stranger.pk},
        {"organization": governed.other_org.pk},
        {"since": "yesterday"},
        {"hooks_bypassed": "maybe"},
    ):
        response = client.get(HISTORY, filters)
        assert response.status_code == 400, filters
        assert "tool_globex" not in response.content.decode()


def test_the_search_finds_tools_arguments_ids_and_names_within_the_organisation(governed, record) -> None:
    client = signed_in(governed.auditor)

    def found(q: str) -> list[str]:
        return tools_listed(client.get(HISTORY, {"q": q}).content.decode())

    assert found("PO-7777") == ["tool_dora"], "arguments"
    assert found("Ledger") == ["tool_dora"], "agent name"
    assert found("dora") == ["tool_dora"], "decider's name"
    assert found(str(record["old"].pk)) == ["tool_old"], "request id"
    assert "tool_eval" in found(str(record["bypassed"].run_id)), "run id (digits may also match arguments)"
    assert found("tool_globex") == [], "another organisation's request is never found"
    assert found("%") == [] and found("'; drop table x; --") == []


def test_the_history_names_approvers_and_deciders_and_rounds_the_time_to_decision(governed, record) -> None:
    page = signed_in(governed.auditor).get(HISTORY, {"q": "tool_"}).content.decode()

    assert "dora" in page and "april" in page
    assert "3 h 5 min" in page and "95 s" in page


def test_the_csv_export_streams_only_the_filtered_requests_of_the_auditors_organisations(
    governed, record
) -> None:
    rows = csv_rows(signed_in(governed.auditor).get(EXPORT, {"status": "rejected"}))
    everything = csv_rows(signed_in(governed.auditor).get(EXPORT))

    assert [r["tool"] for r in rows] == ["tool_dora"]
    row = rows[0]
    assert (
        row["decided_by"] == "dora" and row["approvers"] == "dora" and row["seconds_to_decision"] == "11100"
    )
    assert row["reason"] == "over budget" and row["channel"] == "slack" and row["agent"] == "Ledger bot"
    assert '"purchase_id": "PO-7777"' in row["arguments"]
    assert {r["tool"] for r in everything} == {"tool_old", "tool_dora", "tool_eval"}


def test_the_csv_export_never_lets_a_spreadsheet_evaluate_hostile_arguments(governed) -> None:
    recorded_request(governed, tool_name='=HYPERLINK("http://evil")', reason="+cmd|' /C calc'!A0")

    row = csv_rows(signed_in(governed.auditor).get(EXPORT))[0]

    assert row["tool"].startswith("'=") and row["reason"].startswith("'+")
    assert exports.safe_cell("@SUM(1)") == "'@SUM(1)" and exports.safe_cell("-2") == "'-2"
    assert exports.safe_cell("PO-1") == "PO-1"


def test_the_csv_export_is_refused_to_members_and_given_to_operators_who_read_the_record(
    governed, record
) -> None:
    assert signed_in(governed.member).get(EXPORT).status_code == 403
    assert signed_in(governed.approver).get(EXPORT).status_code == 403
    assert Client().get(EXPORT).status_code == 302
    exported = csv_rows(signed_in(governed.operator).get(EXPORT))
    assert {row["tool"] for row in exported} == {"tool_old", "tool_dora", "tool_eval"}


def test_the_csv_export_reads_in_chunks_rather_than_loading_the_list(governed, record, monkeypatch) -> None:
    seen: list[int] = []
    original = type(record["old"]).objects.all().__class__.iterator

    def spy(self: Any, chunk_size: int | None = None) -> Any:
        seen.append(chunk_size)
        return original(self, chunk_size=chunk_size)

    monkeypatch.setattr(type(record["old"]).objects.all().__class__, "iterator", spy)

    rows = csv_rows(signed_in(governed.auditor).get(EXPORT))

    assert len(rows) == 3 and seen == [exports.CHUNK_SIZE]


def test_a_request_opened_from_the_history_leads_back_to_the_history_and_to_its_run(governed, record) -> None:
    client = signed_in(governed.auditor)

    page = client.get(f"/approvals/{record['dora'].pk}/", {"from": "history"}).content.decode()

    assert '<a href="/approvals/history/" id="back-link">← History</a>' in page
    assert f'href="/admin/agents/run/{record["dora"].run_id}/change/"' in page
    run_page = client.get(f"/admin/agents/run/{record['dora'].run_id}/change/")
    assert run_page.status_code == 200


def test_an_approver_opening_a_request_from_the_inbox_goes_back_to_the_inbox(governed, record) -> None:
    page = signed_in(record["decider"]).get(f"/approvals/{record['dora'].pk}/").content.decode()

    assert '<a href="/approvals/" id="back-link">← Inbox</a>' in page


# --- tool calls -----------------------------------------------------------------------------------

TOOLS = "/approvals/history/tools/"
TOOLS_EXPORT = "/approvals/history/tools/export.csv"


@pytest.fixture
def calls(governed, record) -> dict[str, Any]:
    """An execution and a blocked call in Acme, an execution in Globex."""
    acme_run, globex_run = record["old"].run, record["globex"].run
    ToolExecution.objects.create(
        run=acme_run, tool_call_id="c-ok", tool_name="oa__purchase_list", args={"status": "pending"},
        args_sha256="0" * 64, status="succeeded", duration_ms=1234.5678,
    )  # fmt: skip
    RunEvent.objects.create(
        run=acme_run, seq=1, type=ev.TOOL_BLOCKED,
        payload={"tool_call_id": "c-no", "tool": "oa__purchase_delete", "blocked_by": "deny_tools",
                 "error": "deleting purchases is not allowed"},
    )  # fmt: skip
    ToolExecution.objects.create(
        run=globex_run, tool_call_id="c-g", tool_name="globex_secret_tool", args={}, args_sha256="0" * 64
    )
    return {"run": acme_run}


def test_the_tool_call_record_lists_executions_and_blocked_calls_of_the_auditors_organisations(
    governed, calls
) -> None:
    page = signed_in(governed.auditor).get(TOOLS).content.decode()

    assert sorted(tools_listed(page)) == ["oa__purchase_delete", "oa__purchase_list"]
    assert (
        'deleting purchases is not allowed <span class="agent">(Deny tools)</span>' in page
        and "1.2 s" in page
    )
    assert "Purchase delete" in page and ">oa__purchase_delete<" not in page, (
        "titles, the internal name in a tooltip"
    )
    assert "globex_secret_tool" not in page


def test_the_tool_call_record_filters_by_outcome_and_searches_arguments(governed, calls) -> None:
    client = signed_in(governed.auditor)

    def listed(**filters: Any) -> list[str]:
        return tools_listed(client.get(TOOLS, filters).content.decode())

    assert listed(status="blocked") == ["oa__purchase_delete"]
    assert listed(status="succeeded") == ["oa__purchase_list"]
    assert listed(q="pending") == ["oa__purchase_list"], "arguments"
    assert listed(q="not allowed") == ["oa__purchase_delete"], "the block's message"
    assert listed(q="globex") == []
    assert client.get(TOOLS, {"status": "exploded"}).status_code == 400


def test_the_tool_call_export_streams_the_filtered_calls(governed, calls) -> None:
    rows = csv_rows(signed_in(governed.auditor).get(TOOLS_EXPORT, {"status": "blocked"}))

    assert [(r["tool"], r["status"]) for r in rows] == [("oa__purchase_delete", "blocked")]
    assert rows[0]["blocked_by_and_message"] == "deny_tools: deleting purchases is not allowed"
    assert signed_in(governed.member).get(TOOLS_EXPORT).status_code == 403


@pytest.mark.django_db
def test_an_empty_history_says_there_is_nothing_yet_once_and_offers_nothing_to_download(governed) -> None:
    for page, empty in ((HISTORY, "No approval requests yet."), (TOOLS, "No tool calls yet.")):
        response = signed_in(governed.auditor).get(page)
        text = response.content.decode()
        assert response.status_code == 200
        assert "Nothing was searched" not in text
        assert text.count(empty) == 1, "one line says it"
        assert not re.search(r"\b0 (requests|tool calls|calls)\b", text), "and no count of nothing"
        assert 'id="export-csv"' not in text, "no CSV of nothing"
    filtered = signed_in(governed.auditor).get(HISTORY, {"status": "rejected"}).content.decode()
    assert "No requests match these filters." in filtered and "No approval requests yet." not in filtered


def test_the_history_says_whose_record_it_is_by_the_readers_role(governed, record) -> None:
    def lede(user: Any, page: str = HISTORY) -> str:
        text = signed_in(user).get(page).content.decode()
        return re.search(r'<p class="lede">(.*?)</p>', text, re.S).group(1)

    assert "of the organisations you audit," in lede(governed.auditor)
    assert "of the organisations you configure," in lede(governed.operator)
    tool_calls = lede(governed.operator, TOOLS)
    assert "you audit" not in tool_calls and "of the organisations you configure," in tool_calls
    page = signed_in(governed.auditor).get(HISTORY).content.decode()
    assert 'id="export-csv"' in page and "3 requests." in page


def test_the_history_lists_tools_by_title_without_their_internal_names(governed) -> None:
    recorded_request(governed, tool_name="oa__purchase_pay")

    page = signed_in(governed.auditor).get(HISTORY).content.decode()

    shown = re.sub(r"<[^>]+>", " ", page)
    assert "Purchase pay" in shown and "oa__purchase_pay" not in shown


@pytest.mark.django_db(transaction=True)
def test_the_admin_shows_a_requests_events_with_names_not_user_ids(governed, resumes) -> None:
    from approvals.models import ConfirmationRequest
    from tests.admin_kit import logged_in, page_text, url
    from tests.agents.engine_kit import Harness
    from tests.approvals.kit import pay_tool, set_policy, suspended_run

    set_policy(governed)
    _run, request = suspended_run(governed, Harness(pay_tool()))

    text = page_text(logged_in(governed.auditor).get(url(ConfirmationRequest, "change", request.pk)))

    assert "Could decide</strong>: " in text and "april" in text
    shown = re.sub(r"<details>.*?</details>", "", text, flags=re.S)
    assert '"approvers": [' not in shown, "the ids stay behind Technical details"


# --- one request's page, as people read it ------------------------------------------------------


def outside_toggles(page: str) -> str:
    """The page's text as read with every closed toggle (``<details>``) left closed."""
    main = re.search(r"<main\b.*?</main>", page, re.S)
    text = re.sub(r"<(style|script|details)\b.*?</\1>", "", main.group(0) if main else page, flags=re.S)
    return re.sub(r"<[^>]+>", " ", text)


def test_a_request_page_keeps_ids_and_hashes_under_technical_details(governed, record) -> None:
    from approvals.services import log_event

    dora = record["dora"]
    log_event(
        request_id=dora.pk,
        kind="created",
        actor=governed.member,
        tool=dora.tool_name,
        args_sha256=dora.args_sha256,
        approvers=[record["decider"].pk],
        approvals_required=1,
        any_rejection_rejects=True,
    )
    log_event(request_id=dora.pk, kind="delivered", attempt=1, message_id="inbox:5c4c-message")

    page = signed_in(governed.auditor).get(f"/approvals/{dora.pk}/").content.decode()
    shown = outside_toggles(page)

    assert "Ledger bot" in shown and "· Acme" in shown and "(Acme)" not in shown
    for internal in (dora.args_sha256, "inbox:5c4c-message", f"#{dora.run_id}", "tool_dora"):
        assert internal not in shown, internal
        assert internal in page, f"{internal} stays one click away"
    assert "<summary>Technical details</summary>" in page
    assert "Arguments hash" not in shown and "Message ID" not in shown
    # One approval to give: whether one rejection rejects says nothing, so it is not said.
    assert "One rejection rejects" not in page


def test_a_withdrawn_request_says_who_stopped_the_run_in_one_sentence(governed) -> None:
    from approvals.services import confirmation_cancel

    stopped = recorded_request(governed)
    assert confirmation_cancel(request_id=stopped.pk, reason="the run was cancelled: cancelled by the user")
    by_operator = recorded_request(governed)
    assert confirmation_cancel(request_id=by_operator.pk, reason="the run was cancelled: cancelled by oscar")
    archived = recorded_request(governed)
    reason = "the run was cancelled: the agent was archived by oscar"
    assert confirmation_cancel(request_id=archived.pk, reason=reason)
    client = signed_in(governed.auditor)

    page = client.get(f"/approvals/{stopped.pk}/").content.decode()
    cancelled = re.search(
        r'<tr>\s*<td[^>]*>[^<]*</td>\s*<td class="kind">Cancelled</td>(.*?)</tr>', page, re.S
    )
    assert cancelled, page
    assert '<td class="by">alice</td>' in cancelled.group(1)
    assert "alice stopped the run." in outside_toggles(cancelled.group(1))
    assert "the run was cancelled: cancelled by the user" not in outside_toggles(page)
    by_oscar = client.get(f"/approvals/{by_operator.pk}/").content.decode()
    assert "oscar stopped the run." in outside_toggles(by_oscar)
    assert "The run was cancelled because the agent was archived by oscar." in outside_toggles(
        client.get(f"/approvals/{archived.pk}/").content.decode()
    )
    assert "alice stopped the run." in outside_toggles(client.get(HISTORY).content.decode())


def test_an_amount_in_the_arguments_reads_in_the_currency_the_context_gives(governed) -> None:
    from approvals.models import ConfirmationRequest

    request = recorded_request(governed, tool_args={"purchase_id": "PO-1001", "amount": 1200})
    context = [{"label": "Vendor", "value": "Lumen"}, {"label": "Amount", "value": "1,200.00 USD"}]
    ConfirmationRequest.objects.filter(pk=request.pk).update(context=context)

    for user, page in ((governed.approver, "/approvals/"), (governed.auditor, f"/approvals/{request.pk}/")):
        text = signed_in(user).get(page).content.decode()
        arguments = re.search(r'<dl class="kv arguments".*?</dl>', text, re.S).group(0)
        assert "<dt>Amount</dt><dd>1,200.00 USD</dd>" in arguments, (page, arguments)
    # Without a currency in the context, the amount stays as it was given.
    ConfirmationRequest.objects.filter(pk=request.pk).update(context=[{"label": "Vendor", "value": "Lumen"}])
    text = signed_in(governed.auditor).get(f"/approvals/{request.pk}/").content.decode()
    assert "<dt>Amount</dt><dd>1,200.00</dd>" in text


def test_each_history_row_says_what_the_call_was_about(personas, resumes) -> None:
    titled = recorded_request(
        personas, tool_args={"purchase_id": "PO-1001", "amount": 1200, "currency": "USD"}
    )
    ConfirmationRequest.objects.filter(pk=titled.pk).update(tool_title="Pay a purchase")
    recorded_request(personas, tool_args={"purchase_id": "PO-1002", "amount": 4800, "currency": "USD"})

    page = signed_in(personas.auditor).get(HISTORY).content.decode()

    cells = re.findall(r'<td data-label="What">([^<]*)</td>', page)
    assert sorted(cells) == ["PO-1001 · 1,200.00 USD", "PO-1002 · 4,800.00 USD"]
    # The CSV says it in the same words, beside the tool's title (or its name made readable).
    rows = csv_rows(signed_in(personas.auditor).get(EXPORT))
    assert sorted((row["title"], row["about"]) for row in rows) == [
        ("Pay a purchase", "PO-1001 · 1,200.00 USD"),
        ("Purchase pay", "PO-1002 · 4,800.00 USD"),
    ]
