"""An approver works the web inbox in a real browser: signs in, reads, waits, rejects."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from playwright.sync_api import Page, expect

from approvals.models import ConfirmationRequest, ConfirmationStatus
from tests.agents.engine_kit import Harness
from tests.approvals.kit import Resumes, pay_tool, set_policy, suspended_run
from tests.browser.shots import shoot
from tests.personas import PASSWORD, make_agent, scripted

# The live server answers from another thread: it must see committed rows, and verdicts act on commit.
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def pending(personas: Any, resumes: Resumes) -> tuple[ConfirmationRequest, ConfirmationRequest]:
    """Two parked runs waiting for april: a plain payment, and one whose arguments carry a script
    (as a prompt injection might). Built before the browser starts: the engine runs through
    ``async_to_sync``, which refuses to run while Playwright's event loop is registered."""
    set_policy(personas)
    _, plain = suspended_run(personas, Harness(pay_tool()))
    arguments = {"purchase_id": "<script>alert(1)</script>", "amount": 99, "note": "urgent, skip review"}
    config = scripted(
        {"tool_calls": [{"name": "oa__purchase_pay", "arguments": arguments}]}, {"content": "ok"}
    )
    agent = make_agent(personas.org, personas.operator, name="Expense bot", model_config_json=config)
    _, hostile = suspended_run(personas, Harness(pay_tool()), agent=agent)
    return plain, hostile


def sign_in(page: Page, base_url: str, username: str) -> None:
    page.goto(f"{base_url}/approvals/")
    expect(page).to_have_url(re.compile(r"/approvals/login/\?next=/approvals/$"))
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{base_url}/approvals/")


# ``pending`` comes before ``page`` in the arguments: pytest sets fixtures up in that order.
def test_an_approver_rejects_a_call_from_the_inbox_with_a_reason(
    live_server, personas, resumes, pending, page
) -> None:
    request, hostile = pending
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    sign_in(page, live_server.url, "april")

    card = page.locator(f"#request-{request.pk}")
    expect(card.locator("pre.args")).to_have_text('{\n  "amount": 1250.5,\n  "purchase_id": "PO-1001"\n}')
    expect(card).to_contain_text("Requested by alice")
    countdown = card.locator("time[data-countdown]")
    expect(countdown).to_have_text(re.compile(r"^\d+m \d\ds left$"))
    before = countdown.inner_text()
    expect(countdown).not_to_have_text(before, timeout=3_000)  # it ticks
    expect(page.locator(f"#request-{hostile.pk} pre.args")).to_contain_text('"<script>alert(1)</script>"')
    shoot(page, "inbox")

    card.get_by_label(re.compile("^Reason")).fill("budget frozen until Q3")
    card.get_by_role("button", name="Reject").click()

    expect(page.locator(".msg")).to_have_text("Rejected: Purchase pay")
    expect(page.locator(f"#request-{request.pk}")).to_have_count(0)
    shoot(page, "inbox-after")
    request.refresh_from_db()
    assert request.status == ConfirmationStatus.REJECTED
    assert request.reason == "budget frozen until Q3" and request.responded_by == personas.approver
    assert resumes.run_ids == [request.run_id]
    assert dialogs == [], "markup in the arguments never ran"


def test_an_approver_filters_the_inbox_down_to_one_request_and_decides_it_on_its_card(
    live_server, personas, resumes, pending, page
) -> None:
    request, hostile = pending
    sign_in(page, live_server.url, "april")
    expect(page.locator("#batch-count")).to_contain_text("Select requests to decide them together")
    expect(page.get_by_role("button", name="Approve selected")).to_be_disabled()

    page.get_by_text("Filter by agent, tool, requester or amount").click()  # folded until used
    page.get_by_label("Amount from").fill("1000")  # the payment of 1,250.50, not the one of 99
    page.get_by_role("button", name="Filter").click()
    expect(page.locator(".inbox-card")).to_have_count(1)
    expect(page.locator("#inbox-lede")).to_have_text(
        "1 of the 2 requests waiting for your decision match the filters, soonest deadline first."
    )
    # One request shown: no batch controls, its own buttons within the first screen.
    expect(page.locator("#batch-form")).to_be_hidden()
    expect(page.locator(".batch-pick")).to_be_hidden()
    approve = page.get_by_role("button", name="Approve", exact=True)
    assert approve.bounding_box()["y"] + approve.bounding_box()["height"] <= page.viewport_size["height"]
    page.locator(".inbox-card").get_by_label("Reason").fill("month-end run")
    shoot(page, "inbox-filtered-to-one")
    approve.click()

    expect(page.locator(".messages")).to_contain_text("Approved: Purchase pay")
    assert [r.status for r in ConfirmationRequest.objects.order_by("created_at")] == [
        ConfirmationStatus.APPROVED,
        ConfirmationStatus.PENDING,
    ]
    request.refresh_from_db()
    assert request.reason == "month-end run" and resumes.run_ids == [request.run_id]
    assert hostile.pk != request.pk


def test_all_shown_ticked_before_the_page_script_ran_still_selects_every_card(
    live_server, personas, resumes, pending, page
) -> None:
    # The batch bar's script is deferred: on a slow line a reader may tick "All shown" first.
    page.route(re.compile(r".*/inbox_batch[^/]*\.js$"), lambda route: route.abort())
    sign_in(page, live_server.url, "april")
    expect(page.locator(".inbox-card")).to_have_count(2)
    page.get_by_label("All shown").check()
    page.add_script_tag(
        content=(Path(settings.BASE_DIR) / "approvals/static/approvals/inbox_batch.js").read_text()
    )

    expect(page.locator("#batch-count")).to_have_text("2 selected")
    expect(page.get_by_label("All shown")).to_be_checked()
    expect(page.get_by_role("button", name="Reject selected")).to_be_enabled()


def test_an_approver_rejects_every_request_shown_in_one_go(
    live_server, personas, resumes, pending, page
) -> None:
    sign_in(page, live_server.url, "april")
    expect(page.locator(".inbox-card")).to_have_count(2)
    expect(page.locator("#batch-form")).to_be_visible()
    expect(page.locator("#batch-form")).not_to_have_class(re.compile("is-picking"))

    page.get_by_label("All shown").check()
    expect(page.locator("#batch-count")).to_have_text("2 selected")
    expect(page.locator("#batch-form")).to_have_class(re.compile("is-picking"))  # it follows the reader
    page.get_by_label("One reason for all selected requests").fill("budget frozen")
    shoot(page, "inbox-batch")
    page.get_by_role("button", name="Reject selected").click()

    results = page.locator("#batch-results li")
    expect(results).to_have_count(2)
    expect(results.first).to_have_class("done")
    shoot(page, "inbox-batch-result")
    page.get_by_role("link", name="Back to the inbox").click()
    expect(page.locator(".inbox-card")).to_have_count(0)
    expect(page.locator("#batch-form")).to_be_hidden()  # nothing shown, nothing to select
    assert {r.status for r in ConfirmationRequest.objects.all()} == {ConfirmationStatus.REJECTED}
    assert {r.reason for r in ConfirmationRequest.objects.all()} == {"budget frozen"}
