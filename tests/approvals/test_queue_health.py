"""The approval queue's health: times to decision (p50 / p90 by agent, tool and approver), what
waits by age, the expiry rate and the approvers' load — on a page with charts, as CSV and as
Prometheus metrics at ``/metrics`` — each read only by whom it concerns."""

from __future__ import annotations

import csv
import datetime as dt
import io
from typing import Any

import pytest
from django.test import Client, override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from approvals.models import ConfirmationVote
from approvals.selectors.queue_health import percentile, queue_health
from tenancy.models import Membership
from tests.admin_kit import logged_in
from tests.approvals.kit import recorded_request
from tests.personas import make_agent, make_user

PAGE = "/approvals/health/"
EXPORT = "/approvals/health/export.csv"
TOKEN = "m" * 40


def vote(request: Any, user: Any, *, after: float, approve: bool = True) -> None:
    ConfirmationVote.objects.create(
        request=request,
        user=user,
        approve=approve,
        created_at=request.created_at + dt.timedelta(seconds=after),
    )


@pytest.fixture
def queue(governed) -> dict[str, Any]:
    """Acme's record: ten decisions of the ledger agent taking 10, 20, … 100 s (april voted on each),
    one of the travel agent taking 10 min (dora), two expired, five pending of five ages (two
    asked of dora, who voted on none; one of them asked of april too, who voted); and a decision
    of Globex, which Acme's readers never see."""
    p = governed
    now = timezone.now()
    dora = make_user("dora", p.org, "approver")
    ledger = make_agent(p.org, p.operator, name="Ledger bot")
    travel = make_agent(p.org, p.operator, name="Travel desk")
    decided_at = now - dt.timedelta(days=2)
    for seconds in range(10, 101, 10):
        request = recorded_request(
            p,
            agent=ledger,
            tool_name="ledger__post",
            status="approved",
            decided_by=p.approver,
            decided_after=seconds,
            created_at=decided_at - dt.timedelta(seconds=seconds),
        )
        vote(request, p.approver, after=seconds)
    slow = recorded_request(
        p,
        agent=travel,
        tool_name="travel__book",
        status="rejected",
        decided_by=dora,
        decided_after=600,
        created_at=decided_at - dt.timedelta(seconds=600),
        approvers=[dora],
    )
    vote(slow, dora, after=600, approve=False)
    for _ in range(2):
        recorded_request(p, agent=travel, tool_name="travel__book", status="expired", created_at=decided_at)
    for age in (60, 600, 3600, 5 * 3600, 2 * 86400):
        pending = recorded_request(
            p,
            agent=ledger,
            created_at=now - dt.timedelta(seconds=age),
            approvers=[dora] if age > 3600 else [],
        )
    # The oldest pending request was asked of april too, who already voted on it.
    pending.approvers.add(p.approver)
    vote(pending, p.approver, after=30)
    globex = make_agent(p.other_org, p.other_operator, name="Globex agent")
    recorded_request(
        p,
        agent=globex,
        requester=p.stranger,
        approvers=[p.other_operator],
        status="approved",
        decided_by=p.other_operator,
        decided_after=5,
        created_at=decided_at,
    )
    return {"personas": p, "dora": dora, "now": now}


def test_percentiles_are_nearest_rank_times_that_really_occurred() -> None:
    values = [float(v) for v in range(10, 101, 10)]
    assert percentile(values, 0.5) == 50
    assert percentile(values, 0.9) == 90
    assert percentile([7.0], 0.9) == 7
    assert percentile([], 0.5) is None


def test_it_times_decisions_by_agent_tool_and_approver(queue) -> None:
    p = queue["personas"]
    health = queue_health(user=p.auditor)

    assert (health.overall.count, health.overall.p50, health.overall.p90) == (11, 60, 100)
    by_agent = {t.label: (t.count, t.p50, t.p90) for t in health.by_agent}
    assert by_agent == {"Ledger bot": (10, 50, 90), "Travel desk": (1, 600, 600)}
    assert {t.label for t in health.by_tool} == {"ledger__post", "travel__book"}
    by_approver = {t.label: (t.count, t.p50, t.p90) for t in health.by_approver}
    # april's vote on a pending request counts too: from its request to her vote, 30 s.
    assert by_approver["april"] == (11, 50, 90)
    assert by_approver["dora"] == (1, 600, 600)


def test_it_counts_what_waits_by_age_and_who_it_waits_for(queue) -> None:
    p = queue["personas"]
    health = queue_health(user=p.auditor)

    assert health.pending_by_age == [
        ("under 5 min", 1),
        ("5 to 30 min", 1),
        ("30 min to 2 h", 1),
        ("2 to 24 h", 1),
        ("over a day", 1),
    ]
    load = {a.label: (a.waiting, a.votes) for a in health.approvers}
    # Two pending requests were asked of dora; april was asked one and already voted on it.
    assert load["dora"] == (2, 1)
    assert load["april"] == (0, 11)
    assert health.approvers[0].label == "dora", "whoever has the most waiting comes first"


def test_it_tells_the_expiry_rate_of_settled_requests(queue) -> None:
    p = queue["personas"]
    health = queue_health(user=p.auditor)

    expiry = {e.label: (e.settled, e.expired) for e in health.expiry}
    assert expiry == {"Ledger bot": (10, 0), "Travel desk": (3, 2)}
    assert (health.expiry_overall.settled, health.expiry_overall.expired) == (13, 2)
    assert health.expiry_overall.rate == pytest.approx(2 / 13)


def test_a_period_leaves_out_what_was_decided_outside_it(queue) -> None:
    p = queue["personas"]
    today = timezone.localdate()
    health = queue_health(user=p.auditor, since=today, until=today)

    assert health.overall.count == 0
    assert health.pending == 5, "what waits now is shown whatever the period"


def test_the_page_shows_the_figures_and_two_charts_to_an_auditor(queue) -> None:
    p = queue["personas"]
    response = logged_in(p.auditor).get(PAGE)

    assert response.status_code == 200
    page = response.content.decode()
    assert page.count("<svg") == 2
    assert 'id="chart-pending"' in page and 'id="chart-agents"' in page
    assert "Ledger bot" in page and "Travel desk" in page
    assert "Globex agent" not in page
    assert "15.4%" in page  # 2 of 13 settled requests expired
    assert "10 min" in page  # the travel desk's p50, in words


def test_only_readers_of_the_record_see_the_queue(queue) -> None:
    p = queue["personas"]
    assert logged_in(p.member).get(PAGE).status_code == 403
    assert logged_in(p.member).get(EXPORT).status_code == 403
    assert Client().get(PAGE).status_code == 302  # to the sign-in page
    for reader in (p.auditor, p.admin, p.operator):
        assert logged_in(reader).get(PAGE).status_code == 200


def test_another_organisations_queue_is_refused_as_a_bad_filter(queue) -> None:
    p = queue["personas"]
    response = logged_in(p.auditor).get(PAGE, {"organization": p.other_org.pk})
    assert response.status_code == 400
    assert b"Globex" not in response.content


@pytest.mark.parametrize(
    "query",
    [{"since": "2026-13-01"}, {"since": "yesterday"}, {"since": "2026-05-02", "until": "2026-05-01"}],
    ids=["no-such-month", "not-a-date", "end-before-start"],
)
def test_a_bad_period_is_a_400_naming_the_field(queue, query: dict[str, str]) -> None:
    p = queue["personas"]
    response = logged_in(p.auditor).get(PAGE, query)
    assert response.status_code == 400
    assert b"Traceback" not in response.content


def test_the_csv_has_one_row_per_group_and_is_spreadsheet_safe(queue) -> None:
    p = queue["personas"]
    make_agent(p.org, p.operator, name="=HYPERLINK(1)")  # names are the operators'; never run as formulas
    recorded_request(
        p,
        agent=make_agent(p.org, p.operator, name="=cmd|' /C calc'!A0"),
        status="approved",
        decided_by=p.approver,
        decided_after=12,
        created_at=timezone.now() - dt.timedelta(hours=1),
    )
    response = logged_in(p.auditor).get(EXPORT)
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith('attachment; filename="approval-queue-')
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))

    ledger = next(
        r for r in rows if r["section"] == "time_to_decision_by_agent" and r["name"] == "Ledger bot"
    )
    assert (ledger["decisions"], ledger["p50_seconds"], ledger["p90_seconds"]) == ("10", "50", "90")
    ages = [(r["name"], r["pending"]) for r in rows if r["section"] == "pending_by_age"]
    assert ages[0] == ("under 5 min", "1") and len(ages) == 5
    dora = next(r for r in rows if r["section"] == "approver_load" and r["name"] == "dora")
    assert dora["waiting_for_them"] == "2"
    names = [r["name"] for r in rows]
    assert not any(name.startswith("=") for name in names)
    assert "'=cmd|' /C calc'!A0" in names


# --- /metrics -------------------------------------------------------------------------------------


def scrape(client: Client, **headers: str) -> Any:
    return client.get("/metrics", headers=headers)


def families(response: Any) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(response.content.decode())}


def samples(family: Any, name: str, **labels: str) -> list[Any]:
    return [
        s for s in family.samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]


@override_settings(METRICS_TOKEN=TOKEN)
def test_a_scraper_with_the_token_reads_the_queue(queue) -> None:
    response = scrape(Client(), Authorization=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    metrics = families(response)

    decided = metrics["fimone_approval_time_to_decision_seconds"]
    [count] = samples(decided, "fimone_approval_time_to_decision_seconds_count", organization="Acme")
    assert count.value == 11
    [within_minute] = samples(
        decided, "fimone_approval_time_to_decision_seconds_bucket", organization="Acme", le="60.0"
    )
    assert within_minute.value == 6  # 10 … 60 s
    [total] = samples(decided, "fimone_approval_time_to_decision_seconds_sum", organization="Acme")
    assert total.value == pytest.approx(sum(range(10, 101, 10)) + 600)
    [globex] = samples(decided, "fimone_approval_time_to_decision_seconds_count", organization="Globex")
    assert globex.value == 1

    pending = metrics["fimone_approval_pending"]
    assert {
        s.labels["age"]: s.value for s in samples(pending, "fimone_approval_pending", organization="Acme")
    } == {
        "under 5 min": 1,
        "5 to 30 min": 1,
        "30 min to 2 h": 1,
        "2 to 24 h": 1,
        "over a day": 1,
    }
    waiting = metrics["fimone_approval_waiting_for_approver"]
    [dora] = samples(waiting, "fimone_approval_waiting_for_approver", organization="Acme", approver="dora")
    assert dora.value == 2
    requests = metrics["fimone_approval_requests"]
    [expired] = samples(requests, "fimone_approval_requests", organization="Acme", status="expired")
    assert expired.value == 2


@override_settings(METRICS_TOKEN=TOKEN)
def test_metrics_refuse_a_missing_or_wrong_token_and_members(queue) -> None:
    p = queue["personas"]
    missing = scrape(Client())
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"].startswith("Bearer")
    assert scrape(Client(), Authorization=f"Bearer {TOKEN[:-1]}x").status_code == 401
    assert scrape(Client(), Authorization=f"Basic {TOKEN}").status_code == 401
    # An organisation's auditor reads its queue on the page, not every organisation's metrics.
    assert scrape(logged_in(p.auditor)).status_code == 403
    assert b"fimone_approval" not in scrape(logged_in(p.auditor)).content


def test_without_a_token_configured_only_superusers_read_metrics(queue, superuser) -> None:
    assert scrape(Client(), Authorization="Bearer anything").status_code == 401
    assert scrape(Client(), Authorization="Bearer ").status_code == 401
    response = scrape(logged_in(superuser))
    assert response.status_code == 200
    assert "fimone_approval_pending" in families(response)


def test_a_reader_removed_from_the_organisation_reads_its_queue_no_more(queue) -> None:
    p = queue["personas"]
    reader = logged_in(p.auditor)
    assert reader.get(PAGE).status_code == 200
    Membership.objects.filter(user=p.auditor).delete()
    assert reader.get(PAGE).status_code == 403
    assert reader.get(EXPORT).status_code == 403


def test_a_rogue_tenants_auditor_sees_only_their_own_queue(queue) -> None:
    p = queue["personas"]
    globex_auditor = make_user("gail", p.other_org, "auditor")
    health = queue_health(user=globex_auditor)
    assert [t.label for t in health.by_agent] == ["Globex agent"]
    assert health.pending == 0
    assert health.approvers == [] and health.by_approver == []  # Acme's approvers are not theirs to see
