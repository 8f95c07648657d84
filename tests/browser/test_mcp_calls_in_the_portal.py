"""An MCP client's calls as the member reads them in the portal, in a real Chromium at 1280 and
390 px: a client's session is one conversation, each call shown as coming from the client (not as
something she typed), its answer as a table rather than JSON; a session of nothing but a call a rule
refused before anyone was asked stays out of her list."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connections
from django.utils import timezone
from playwright.sync_api import Browser, expect

from agents.models import Conversation
from approvals.models import ConfirmationRequest, ConfirmationStatus
from mcp_gateway.models import GatewayCall
from mcp_gateway.services import SESSION_IDLE
from tests.browser.chat_kit import WIDTHS, new_page
from tests.browser.shots import shoot
from tests.browser.test_chat_in_a_browser import DESKTOP, PHONE, sign_in
from tests.browser.test_chat_reads_for_people_in_a_browser import assert_readable, decide
from tests.mcp_gateway.kit import (
    Waiting,
    make_gateway,
    mcp_client,
    run_async,
    served_gateway,
    token_of,
    until,
)

pytestmark = [pytest.mark.browser]


def client_calls(url: str, token: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """``calls`` made one after the other by the official SDK's client, from a thread of its own
    (the test's thread runs the browser's loop)."""

    async def session() -> list[Any]:
        async with mcp_client(url, token) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    def in_thread() -> list[Any]:
        try:
            return run_async(session())
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(in_thread).result(timeout=120)


@pytest.mark.parametrize("viewport", WIDTHS)
def test_an_mcp_call_reads_as_the_clients_with_its_answer_as_a_table(
    shop, browser: Browser, viewport
) -> None:
    alice = get_user_model().objects.get(username="alice")
    gateway = make_gateway(shop.agent)
    with served_gateway() as base:
        [unknown] = client_calls(base + gateway.path, token_of(alice), [("oa__no_such_tool", {})])
        # An earlier session, long quiet (never at the edge of the idle time).
        GatewayCall.objects.update(created_at=timezone.now() - SESSION_IDLE * 3)
        pending, paid = client_calls(
            base + gateway.path,
            token_of(alice),
            [("oa__purchase_list", {"status": "pending"}), ("oa__purchase_list", {"status": "paid"})],
        )
    assert not pending.is_error and not paid.is_error and unknown.is_error
    assert unknown.content[0].text.startswith("Refused by a safety rule of this agent: Unknown tool")
    assert Conversation.objects.filter(user=alice).count() == 2  # two sessions

    page = new_page(browser, viewport)
    sign_in(page, shop.url, "alice")
    page.goto(f"{shop.url}/agents/")
    listed = page.locator(".conversation-list li")
    # The session of one refused call is not her work to come back to: only the session of the
    # two calls that ran is listed, once, with its number of calls.
    expect(listed).to_have_count(1)
    expect(listed.locator("a")).to_contain_text("List purchases (pending)")
    expect(listed.locator(".client-calls")).to_have_text("2 calls from an MCP client")
    shoot(page, "mcp-calls-listed")

    listed.locator("a").click()
    calls = page.locator(".from-client")
    expect(calls).to_have_count(2)
    expect(calls.first).to_contain_text(
        "From an MCP client: List purchases (pending) — an MCP call through Desk"
    )
    expect(calls.last).to_contain_text("From an MCP client: List purchases (paid) — an MCP call through Desk")
    expect(page.locator(".bubble.user")).to_have_count(0)
    answer = page.locator(".bubble.assistant.final").first
    expect(answer.locator("td[data-label='Vendor']").first).to_have_text("Lumen Office Supplies")
    expect(answer.locator("pre.json")).to_be_hidden()
    assert_readable(page)
    shoot(page, "mcp-call-answer")


def test_a_call_a_person_rejected_is_labelled_rejected_and_says_so_in_words(shop, browser: Browser) -> None:
    alice = get_user_model().objects.get(username="alice")
    gateway = make_gateway(shop.agent)
    with served_gateway() as base:
        waiting = Waiting(
            base + gateway.path,
            token_of(alice),
            "oa__purchase_pay",
            {"purchase_id": "PO-1001", "amount": 1200},
        )
        request = until(lambda: ConfirmationRequest.objects.filter(status=ConfirmationStatus.PENDING).first())
        decide(request, "april", approve=False, reason="over budget")
        result = waiting.join()
    assert result.is_error and result.content[0].text.startswith("Refused: Rejected by april")
    assert "over budget" in result.content[0].text

    page = new_page(browser, PHONE)
    sign_in(page, shop.url, "alice")
    page.goto(f"{shop.url}/runs/{request.run_id}/")
    # Nothing broke: the call was refused by a person, and the page says that, in words.
    expect(page.locator("[data-run-status]")).to_have_text("Rejected")
    ended = page.locator(".notice.failed")
    expect(ended).to_have_text(re.compile(r"^Not done: Rejected by april.*over budget"))
    expect(ended).not_to_contain_text("was not executed")
    assert_readable(page)
    shoot(page, "mcp-call-rejected")
    page.set_viewport_size(DESKTOP)
    shoot(page, "mcp-call-rejected")
