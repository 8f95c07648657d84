"""The demo auditor works the record in a real browser: filters the approval history by approver
and date, opens a request, follows it to its run, downloads the CSV (read back here), and finds
nothing to change; the demo operator's admin index is grouped by what operators do.

Screenshots go where every browser test's go (tests/browser/shots.py)."""

from __future__ import annotations

import csv
import datetime as dt
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import Page, expect

from agents.demo import DEMO_AGENT_NAME, DEMO_PASSWORD, demo_setup
from agents.models import Agent
from approvals.models import ConfirmationVote
from tests.approvals.kit import recorded_request
from tests.browser.shots import shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo_record(settings: Any) -> dict[str, Any]:
    """The demo organisation with three decided requests: two by april (one of them ten days old),
    one by adam."""
    demo_setup(base_url="http://127.0.0.1:8000")
    users = {u.username: u for u in get_user_model().objects.all()}
    agent = Agent.objects.get(name=DEMO_AGENT_NAME)
    now = timezone.now()
    common = {"agent": agent, "requester": users["alice"], "approvers": [users["april"], users["adam"]]}
    return {
        "recent": recorded_request(
            None, **common, status="approved", decided_by=users["april"], decided_after=42,
            tool_args={"purchase_id": "PO-1001", "amount": 1250.5},
        ),
        "old": recorded_request(
            None, **common, status="rejected", decided_by=users["april"], decided_after=600,
            created_at=now - dt.timedelta(days=10), reason="duplicate invoice",
        ),
        "adams": recorded_request(
            None, **common, status="approved", decided_by=users["adam"], decided_after=5,
            tool_args={"purchase_id": "PO-1002", "amount": 80},
        ),
        "today": now.date(),
    }  # fmt: skip


def sign_in(page: Page, base_url: str, username: str, *, admin: bool = False) -> None:
    if admin:
        page.goto(f"{base_url}/admin/login/?next=/admin/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(DEMO_PASSWORD)
        page.get_by_role("button", name="Log in").click()
        expect(page).to_have_url(f"{base_url}/admin/")
        return
    page.goto(f"{base_url}/approvals/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Sign in").click()


def test_the_demo_auditor_filters_opens_follows_downloads_and_changes_nothing(
    live_server, demo_record, page, tmp_path
) -> None:
    base = live_server.url
    sign_in(page, base, "aude")
    page.goto(f"{base}/approvals/history/")

    page.get_by_label("Decided by").select_option(label="april")
    page.get_by_label("From").fill((demo_record["today"] - dt.timedelta(days=1)).isoformat())
    page.get_by_role("button", name="Filter").click()

    rows = page.locator("table tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("april")
    expect(rows.first).to_contain_text("42 s")
    expect(page.locator(".count")).to_have_text("1 request matches the filters.")
    shoot(page, "history-filtered")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    with page.expect_download() as download_info:
        page.locator("#export-csv").click()
    path = tmp_path / "history.csv"
    download_info.value.save_as(path)
    with path.open(newline="", encoding="utf-8") as handle:
        exported = list(csv.DictReader(handle))
    assert [(r["id"], r["decided_by"], r["status"]) for r in exported] == [
        (str(demo_record["recent"].pk), "april", "approved")
    ]
    assert '"purchase_id": "PO-1001"' in exported[0]["arguments"]

    rows.first.get_by_role("link").first.click()
    expect(page.locator("#back-link")).to_have_text("← History")
    expect(page.locator("pre.args")).to_contain_text('"purchase_id": "PO-1001"')
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    page.locator("#run-transcript").click()
    expect(page).to_have_url(re.compile(rf"/runs/{demo_record['recent'].run_id}/$"))
    expect(page.locator("body")).to_contain_text(DEMO_AGENT_NAME)
    expect(page.get_by_role("button", name="Send")).to_have_count(0)
    page.goto(f"{base}/admin/agents/run/{demo_record['recent'].run_id}/change/")
    expect(page.locator("h1")).to_contain_text("View run")
    expect(page.locator("input[type=submit]")).to_have_count(0)

    for admin_page in (
        f"/admin/agents/agent/{demo_record['recent'].agent_id}/change/",
        f"/admin/approvals/confirmationrequest/{demo_record['recent'].pk}/change/",
        "/admin/approvals/approverpolicy/add/",
    ):
        page.goto(base + admin_page)
        expect(page.locator("input[name=_save]")).to_have_count(0)
    # A forged POST with a valid CSRF token: refused for want of permission, not of the token.
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    change_url = f"{base}/admin/agents/agent/{demo_record['recent'].agent_id}/change/"
    response = page.request.post(
        change_url, form={"name": "renamed", "csrfmiddlewaretoken": token}, headers={"Referer": change_url}
    )
    assert response.status == 403
    assert Agent.objects.get(pk=demo_record["recent"].agent_id).name == DEMO_AGENT_NAME


def test_the_demo_operator_sees_an_admin_grouped_by_what_operators_do(live_server, demo_record, page) -> None:
    sign_in(page, live_server.url, "oscar", admin=True)

    captions = [text.strip() for text in page.locator("#content-main caption").all_text_contents()]
    assert captions[:6] == [
        "Agents & hooks",
        "Workflows & evals",
        "Approvals",
        "Channels",
        "Connectors",
        "Audit",
    ]
    expect(page.locator("#site-name")).to_contain_text("FIM One hooks")
    expect(page.get_by_text("have permission to view or edit anything")).to_have_count(0)
    expect(page.locator("#content-main")).not_to_contain_text("Periodic tasks")
    shoot(page, "admin-index-operator")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_the_operators_agent_page_fits_a_phone_screen(live_server, demo_record, page) -> None:
    # The effective chain is a wide table on a laptop: on a phone each hook is a card of its own.
    sign_in(page, live_server.url, "oscar", admin=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/admin/agents/agent/{demo_record['recent'].agent_id}/change/")

    expect(page.locator("#effective-chain .chain-table")).to_be_visible()
    shoot(page, "admin-agent-operator-phone")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_the_demo_auditor_reads_the_queue_health_and_downloads_it(
    live_server, demo_record, page, tmp_path
) -> None:
    for request in ("recent", "old", "adams"):  # each verdict as the decision service records it
        decided = demo_record[request]
        ConfirmationVote.objects.create(
            request=decided,
            user=decided.responded_by,
            approve=decided.status == "approved",
            created_at=decided.responded_at,
        )
    base = live_server.url
    sign_in(page, base, "aude")
    page.goto(f"{base}/approvals/history/")
    page.get_by_role("link", name="Queue health").click()

    expect(page.get_by_role("heading", name="Approval queue health")).to_be_visible()
    # Three decisions: 5 s, 42 s (today) and 10 min (ten days ago): the median is april's 42 s.
    expect(page.locator("#figure-decisions .value")).to_have_text("3")
    expect(page.locator("#figure-p50 .value")).to_have_text("42 s")
    expect(page.locator("#figure-p90 .value")).to_have_text("10 min")
    expect(page.locator("#chart-agents svg rect")).to_have_count(2)  # p50 and p90 of the one agent
    approvers = page.locator("#approver-load tbody tr")
    expect(approvers).to_have_count(2)
    expect(approvers.first).to_contain_text("april")  # two votes, before adam's one
    shoot(page, "queue-health")

    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download CSV").click()
    path = tmp_path / "queue.csv"
    download_info.value.save_as(path)
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    overall = next(r for r in rows if r["section"] == "time_to_decision")
    assert (overall["decisions"], overall["p50_seconds"], overall["p90_seconds"]) == ("3", "42", "600")

    # A period around today (a day either side: no edge of midnight) leaves out the old one.
    today = demo_record["today"]
    page.get_by_role("textbox", name="From").fill((today - dt.timedelta(days=1)).isoformat())
    page.get_by_role("textbox", name="To").fill((today + dt.timedelta(days=1)).isoformat())
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#figure-decisions .value")).to_have_text("2")
