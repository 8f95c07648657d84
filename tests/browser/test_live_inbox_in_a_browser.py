"""The inbox refreshes itself in a real browser, and approvers and auditors read the run behind a
request: a request opened while an approver's inbox is open appears without a reload, a decision
taken elsewhere (on the run's transcript, by another approver) removes it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from agents.models import Run
from approvals.models import ConfirmationRequest, ConfirmationStatus
from tests.browser.shots import shoot
from tests.browser.test_chat_in_a_browser import DESKTOP, PHONE, demo, sign_in, start_paying

pytestmark = [pytest.mark.browser]

__all__ = ["demo"]  # the fixture, imported for this module's tests

FIRST_SCREEN = {"width": 1280, "height": 800}
"""A laptop's first screen."""


def test_a_request_appears_in_an_open_inbox_and_leaves_when_decided_elsewhere(
    asgi_server, demo: dict[str, Any], browser: Browser
) -> None:
    base = asgi_server.url
    april = browser.new_context(viewport=DESKTOP).new_page()
    sign_in(april, base, "april")
    april.get_by_role("link", name=re.compile("^Inbox")).click()
    expect(april.locator("#inbox-empty")).to_be_visible()
    expect(april.locator("#nav-inbox .count")).to_have_count(0)
    shoot(april, "inbox-empty-desktop")
    april.evaluate("window.__sameDocument = true")  # gone if the page were reloaded

    alice = browser.new_context(viewport=DESKTOP).new_page()
    start_paying(alice, base)
    card = april.locator(".inbox-card")
    expect(card).to_have_count(1, timeout=15_000)
    expect(card).to_contain_text("oa__purchase_pay")
    expect(card.locator("pre.args")).to_contain_text('"purchase_id": "PO-1001"')
    expect(card.locator("time.countdown")).to_have_text(re.compile(r"\d+m \d\ds left"))
    expect(april.locator("#nav-inbox .count")).to_have_text("1")
    expect(april.locator("#inbox-empty")).to_be_hidden()
    expect(april.locator("#inbox-lede")).to_contain_text("1 request waiting")
    assert april.evaluate("window.__sameDocument") is True
    request = ConfirmationRequest.objects.get()

    # An auditor reads the run behind it from the history: read-only, no decision controls.
    aude = browser.new_context(viewport=DESKTOP).new_page()
    sign_in(aude, base, "aude")
    aude.get_by_role("link", name="History", exact=True).click()
    aude.get_by_role("link", name=f"Transcript of run {request.run_id}").click()
    expect(aude).to_have_url(f"{base}/runs/{request.run_id}/")
    steps = aude.locator(".step")
    expect(steps.filter(has_text="oa__purchase_list").locator(".step-status")).to_have_text("Done")
    expect(aude.locator(".approval")).to_contain_text("Waiting for approval")
    expect(aude.get_by_role("button", name="Approve")).to_have_count(0)
    shoot(aude, "transcript-pending-desktop")
    aude.set_viewport_size(PHONE)
    shoot(aude, "transcript-pending-phone")

    # Another approver decides on the transcript, reached from the request's page.
    adam = browser.new_context(viewport=DESKTOP).new_page()
    sign_in(adam, base, "adam")
    adam.goto(f"{base}/approvals/{request.pk}/")
    adam.get_by_role("link", name="See what the agent did").click()
    adam.get_by_role("button", name="Approve", exact=True).click()
    expect(adam.locator(".approval .verdict")).to_contain_text("Approved by adam", timeout=15_000)

    expect(card).to_have_count(0, timeout=15_000)
    expect(april.locator("#nav-inbox .count")).to_have_count(0)
    expect(april.locator("#inbox-empty")).to_be_visible()
    assert april.evaluate("window.__sameDocument") is True
    expect(alice.locator(".bubble.assistant.final")).to_contain_text("Paid PO-1001", timeout=15_000)
    # The auditor's transcript followed the run live to its end.
    expect(aude.locator(".bubble.assistant.final")).to_contain_text("Paid PO-1001", timeout=15_000)
    expect(aude.locator(f'[data-run-status="{request.run_id}"]')).to_have_text("Completed")
    expect(aude.locator(f'[data-request-status="{request.pk}"]')).to_have_text("Approved")
    aude.set_viewport_size(DESKTOP)
    shoot(aude, "transcript-finished-desktop")
    assert ConfirmationRequest.objects.get().status == ConfirmationStatus.APPROVED
    assert Run.objects.get(pk=request.run_id).status == "completed"


def test_another_organisations_member_gets_a_404_page_for_a_run(
    asgi_server, demo: dict[str, Any], browser: Browser
) -> None:
    from tenancy.models import Organization, Role
    from tests.personas import PASSWORD, make_user

    base = asgi_server.url
    alice = browser.new_context(viewport=DESKTOP).new_page()
    start_paying(alice, base)
    expect(alice.locator(".approval")).to_contain_text("Waiting for approval", timeout=15_000)
    run = Run.objects.get()
    make_user("sam", Organization.objects.create(name="Globex"), Role.ADMIN)

    sam = browser.new_context(viewport=DESKTOP).new_page()
    sign_in(sam, base, "sam", PASSWORD)
    response = sam.goto(f"{base}/runs/{run.pk}/")

    assert response is not None and response.status == 404
    expect(sam.get_by_role("heading", name="Page not found")).to_be_visible()
    expect(sam.locator("body")).not_to_contain_text("oa__purchase_pay")


def test_a_vote_towards_a_quorum_updates_the_tally_of_a_card_already_shown(
    asgi_server, demo: dict[str, Any], browser: Browser
) -> None:
    from approvals.models import ApproverPolicy
    from tenancy.models import Organization

    org = Organization.objects.get(name=demo["organization"])
    ApproverPolicy.objects.filter(organization=org, agent=None).update(approvals_required=2)
    base = asgi_server.url
    alice = browser.new_context(viewport=DESKTOP).new_page()
    start_paying(alice, base)
    april = browser.new_context(viewport=DESKTOP).new_page()
    sign_in(april, base, "april")
    april.get_by_role("link", name=re.compile("^Inbox")).click()
    card = april.locator(".inbox-card")
    expect(card.locator(".tally")).to_have_text("0 of 2 approvals — waiting for two more", timeout=15_000)
    april.get_by_label(re.compile("^Reason")).fill("checking the PO first")
    april.evaluate("window.__sameDocument = true")  # gone if the page were reloaded

    adam = browser.new_context(viewport=DESKTOP).new_page()
    sign_in(adam, base, "adam")
    adam.get_by_role("link", name=re.compile("^Inbox")).click()
    adam.get_by_role("button", name="Approve", exact=True).click()
    expect(adam.locator("body")).to_contain_text("1 of 2 approvals — waiting for one more")

    expect(card.locator(".tally")).to_have_text(
        re.compile(
            r"^1 of 2 approvals: adam approved (\d{4}-\d\d-\d\d )?\d\d:\d\d UTC — waiting for one more$"
        ),
        timeout=15_000,
    )
    expect(april.get_by_label(re.compile("^Reason"))).to_have_value("checking the PO first")
    assert april.evaluate("window.__sameDocument") is True
    shoot(april, "inbox-tally-updated-desktop")
    assert ConfirmationRequest.objects.get().status == ConfirmationStatus.PENDING


def test_an_open_inbox_says_in_words_that_the_requester_withdrew_the_call(
    asgi_server, demo: dict[str, Any], browser: Browser
) -> None:
    base = asgi_server.url
    alice = browser.new_context(viewport=DESKTOP).new_page()
    start_paying(alice, base)
    inboxes = []
    for viewport in (FIRST_SCREEN, PHONE):
        april = browser.new_context(viewport=viewport).new_page()
        sign_in(april, base, "april")
        april.goto(f"{base}/approvals/")
        expect(april.locator(".inbox-card")).to_have_count(1, timeout=15_000)
        # The tab says how many wait, and nothing else; the page's script is there once.
        assert april.title() == "(1) Inbox · FIM One hooks"
        assert april.locator("script[src*='inbox_batch.js']").count() == 1
        # One request: no batch controls, and where it came from.
        expect(april.locator("#batch-form")).to_be_hidden()
        expect(april.locator(".inbox-card .batch-pick")).to_be_hidden()
        expect(april.locator(".inbox-card .origin")).to_have_text("From the chat")
        shoot(april, "one-request")
        inboxes.append(april)
    # On a laptop's first screen the decision is there without scrolling.
    approve = inboxes[0].get_by_role("button", name="Approve", exact=True).bounding_box()
    assert approve["y"] + approve["height"] <= FIRST_SCREEN["height"], approve

    alice.get_by_role("button", name="Stop").click()

    for april in inboxes:
        notice = april.locator(".inbox-left")
        expect(notice).to_contain_text("alice withdrew Pay a purchase (PO-1001).", timeout=15_000)
        expect(april.locator(".inbox-card")).to_have_count(0)
        expect(april.locator("#nav-inbox .count")).to_have_count(0)
        assert april.title() == "Inbox · FIM One hooks"
        shoot(april, "withdrawn")
        notice.get_by_role("button", name="Dismiss").click()
        expect(notice).to_have_count(0)
        expect(april.locator("#inbox-empty")).to_be_visible()
