"""End users chat with the demo agent in a real browser, watch every step live, and get their
answer once an approver decided — in the inbox or on the chat page itself."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents import events as ev
from agents.demo import DEMO_PASSWORD, demo_setup
from agents.models import Agent, Conversation, Run, RunEvent, RunStatus
from approvals.models import ApproverPolicy, ConfirmationRequest, ConfirmationStatus
from tenancy.models import Organization, Role
from tests.browser.shots import shoot
from tests.personas import PASSWORD, make_agent, make_user, scripted

pytestmark = [pytest.mark.browser]

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def sign_in(page: Page, base: str, username: str, password: str = DEMO_PASSWORD) -> None:
    """Sign in from the landing page; people land on their agents, approvers in their inbox."""
    page.goto(f"{base}/")
    page.get_by_role("link", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/login/\?next=/$"))
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(rf"^{re.escape(base)}/(approvals/)?$"))


def step_of(page: Page, tool: str) -> Any:
    """The step of ``tool`` (its internal name, kept in the step's closed technical details)."""
    return page.locator(".step").filter(has=page.locator(".step-tech code", has_text=tool))


@pytest.fixture
def demo(asgi_server) -> dict[str, Any]:
    summary = demo_setup(base_url=asgi_server.url)
    # The run parks at once instead of waiting inline: the page must follow a suspension too.
    org = Organization.objects.get(name=summary["organization"])
    ApproverPolicy.objects.update_or_create(organization=org, agent=None, defaults={"inline_wait_seconds": 0})
    return summary


def assert_page_matches_stored_events(page: Page, base: str, run: Run) -> None:
    """What the page rendered is what ``GET /api/runs/<id>/events/`` stores: every event applied
    (the last seq), one step per proposed call, one card and one verdict per approval."""
    answer = page.context.request.get(f"{base}/api/runs/{run.pk}/events/?limit=100").json()
    assert not answer["has_more"]
    stored = answer["events"]
    types = [e["type"] for e in stored]
    assert page.locator(f"#run-{run.pk}").get_attribute("data-last-seq") == str(stored[-1]["seq"])
    assert page.locator(".step").count() == types.count("tool.proposed")
    assert page.locator(".approval").count() == types.count("approval.pending") == 1
    assert page.locator(".verdict").count() == types.count("approval.decided") == 1
    assert page.locator(".bubble.assistant").count() == sum(
        1 for e in stored if e["type"] == "llm.message" and e["payload"]["content"].strip()
    )
    assert page.locator(".notice.resumed").count() == types.count("run.resumed")


def start_paying(page: Page, base: str) -> None:
    sign_in(page, base, "alice")
    page.get_by_role("link", name=re.compile("Procurement assistant")).click()
    page.get_by_label("Your message").fill("please pay the pending purchase")
    page.get_by_role("button", name="Send").click()
    expect(page).to_have_url(re.compile(r"/conversations/\d+/$"))


def test_an_end_user_watches_a_payment_wait_for_the_inbox_and_finish(
    asgi_server, demo, browser: Browser
) -> None:
    base = asgi_server.url
    alice = browser.new_context(viewport=DESKTOP).new_page()
    dialogs: list[str] = []
    alice.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    start_paying(alice, base)

    listing = step_of(alice, "oa__purchase_list")
    expect(listing.locator(".step-status")).to_have_text("Done", timeout=15_000)
    paying = step_of(alice, "oa__purchase_pay")
    card = paying.locator(".approval")
    expect(card).to_contain_text("Waiting for approval", timeout=15_000)
    expect(card).to_contain_text("PO-1001")
    card.get_by_text("Exactly what will run if approved").click()
    expect(card.locator(".args table.kv")).to_contain_text("PO-1001")
    # The amount reads in the currency "What it is about" gives it.
    expect(card.locator(".args table.kv tr", has_text="Amount").locator("td")).to_have_text("1,200.00 USD")
    card.locator(".args").get_by_role("button", name="Technical details (JSON)").click()
    expect(card.locator(".args pre.json")).to_contain_text('"purchase_id": "PO-1001"')
    expect(card).to_contain_text("april")
    expect(card).to_contain_text("the web inbox")
    expect(card.locator("time.countdown")).to_have_text(re.compile(r"\d+m \d\ds left"))
    expect(card.get_by_role("button", name="Approve")).to_have_count(0)  # alice may not approve
    expect(alice.locator(".notice.waiting")).to_contain_text("you can close this page")
    shoot(alice, "chat-pending-desktop")
    alice.set_viewport_size(PHONE)
    shoot(alice, "chat-pending-phone")
    alice.set_viewport_size(DESKTOP)

    april = browser.new_context(viewport=DESKTOP).new_page()
    sign_in(april, base, "april")
    expect(april.locator("#nav-inbox .count")).to_have_text("1")
    april.get_by_role("link", name=re.compile("^Inbox")).click()
    shoot(april, "inbox-desktop")
    april.set_viewport_size(PHONE)
    shoot(april, "inbox-phone")
    april.set_viewport_size(DESKTOP)
    april.get_by_label(re.compile("^Reason")).fill("within budget")
    april.get_by_role("button", name="Approve", exact=True).click()
    expect(april.locator(".msg")).to_contain_text("Approved")

    expect(card.locator(".verdict")).to_contain_text("Approved by april", timeout=15_000)
    expect(card.locator(".verdict")).to_contain_text("within budget")
    # Decided: the card says what was approved, not what "will run", nor who "may" decide.
    expect(card.locator(".args-caption")).to_have_text("What was approved")
    expect(card).not_to_contain_text("Who may decide")
    expect(paying.locator(".step-status")).to_have_text("Done", timeout=15_000)
    paying.get_by_text("Result").click()
    expect(paying.locator(".step-result table.kv")).to_contain_text("PO-1001")
    final = alice.locator(".bubble.assistant.final")
    expect(final).to_contain_text("PO-1001", timeout=15_000)
    expect(alice.locator("#composer textarea")).to_be_enabled()
    shoot(alice, "chat-finished-desktop")
    alice.set_viewport_size(PHONE)
    shoot(alice, "chat-finished-phone")

    run = Run.objects.get(user__username="alice")
    assert run.status == RunStatus.COMPLETED and run.execution_path == "portal"
    assert dialogs == []

    # Reopened later, the finished conversation renders from its stored events alone.
    alice.set_viewport_size(DESKTOP)
    alice.reload()
    expect(alice.locator(".step")).to_have_count(2)
    expect(alice.locator(".approval .verdict")).to_contain_text("Approved by april")
    expect(alice.locator(".bubble.assistant.final")).to_contain_text("PO-1001")


def test_another_organisations_member_gets_a_404_page(asgi_server, demo, browser: Browser) -> None:
    org = Organization.objects.get(name=demo["organization"])
    alice = org.memberships.get(role=Role.MEMBER).user
    agent = Agent.objects.get(pk=demo["agent"]["id"])
    conversation = Conversation.objects.create(
        organization=org, agent=agent, user=alice, title="Secret plans"
    )
    other = Organization.objects.create(name="Globex")
    make_user("sam", other, Role.MEMBER)

    page = browser.new_context(viewport=DESKTOP).new_page()
    sign_in(page, asgi_server.url, "sam", PASSWORD)
    response = page.goto(f"{asgi_server.url}/conversations/{conversation.pk}/")

    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
    expect(page.locator("body")).not_to_contain_text("Secret plans")
    shoot(page, "not-found-desktop")


def test_model_text_with_markup_renders_as_text_and_safe_formatting(asgi_server, browser: Browser) -> None:
    org = Organization.objects.create(name="Acme")
    user = make_user("alice", org, Role.MEMBER)
    hostile = (
        "## Summary\n\n**Paid** the `PO-1001` invoice.\n\n- one\n- two\n\n"
        '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
        "[click me](javascript:window.__pwned=3)"
    )
    agent = make_agent(org, user, model_config_json=scripted({"content": hostile}))
    conversation = Conversation.objects.create(organization=org, agent=agent, user=user, title="Markup")
    run = Run.objects.create(conversation=conversation, agent=agent, user=user, input="<b>hi</b> & bye",
                             status=RunStatus.COMPLETED)  # fmt: skip
    RunEvent.objects.create(run=run, seq=1, type=ev.RUN_STARTED, payload={"input": run.input})
    RunEvent.objects.create(
        run=run, seq=2, type=ev.LLM_MESSAGE, payload={"content": hostile, "tool_calls": []}
    )
    RunEvent.objects.create(run=run, seq=3, type=ev.RUN_COMPLETED, payload={"output": hostile})

    page = browser.new_context(viewport=DESKTOP).new_page()
    sign_in(page, asgi_server.url, "alice", PASSWORD)
    page.goto(f"{asgi_server.url}/conversations/{conversation.pk}/")

    answer = page.locator(".bubble.assistant.final")
    expect(answer.locator("h2")).to_have_text("Summary")
    expect(answer.locator("strong")).to_have_text("Paid")
    expect(answer.locator("li")).to_have_count(2)
    expect(answer).to_contain_text("<script>window.__pwned = 1</script>")
    assert answer.locator("script, img").count() == 0
    assert answer.locator("a[href^='javascript']").count() == 0
    expect(page.locator(".bubble.user")).to_have_text("<b>hi</b> & bye")
    assert page.evaluate("window.__pwned") is None
    shoot(page, "markup-desktop")


def test_the_requester_approves_on_the_chat_page_through_a_dropped_connection(
    asgi_server, demo, browser: Browser
) -> None:
    """(b) a user who may decide does so on the chat page itself; (c) the socket drops mid-run and
    comes back: what the page shows matches the stored events, nothing lost or doubled."""
    org = Organization.objects.get(name=demo["organization"])
    ApproverPolicy.objects.filter(organization=org, agent=None).update(
        allow_initiator=True, allow_self_approval=True
    )
    base = asgi_server.url
    alice = browser.new_context(viewport=DESKTOP).new_page()
    start_paying(alice, base)
    card = step_of(alice, "oa__purchase_pay").locator(".approval")
    expect(card.get_by_role("button", name="Approve")).to_be_visible(timeout=15_000)

    alice.evaluate("window.__portalSocket.close()")  # the connection drops while the run waits
    expect(alice.locator("#link-state")).to_contain_text("reconnecting")
    expect(alice.locator("#link-state")).to_be_hidden(timeout=10_000)  # back by itself

    card.get_by_label(re.compile("^Reason")).fill("my own small purchase")
    card.get_by_role("button", name="Approve").click()
    expect(card.locator(".verdict")).to_contain_text("Approved by alice", timeout=15_000)
    expect(alice.locator(".bubble.assistant.final")).to_contain_text("PO-1001", timeout=15_000)

    run = Run.objects.get(user__username="alice")
    assert_page_matches_stored_events(alice, base, run)
    assert ConfirmationRequest.objects.get(run=run).status == ConfirmationStatus.APPROVED


def test_events_of_a_run_that_goes_on_while_the_socket_is_down_are_shown_once(
    asgi_server, demo, browser: Browser
) -> None:
    """(c) the socket drops, the run resumes and finishes meanwhile; the page reconnects with the
    last seq it saw and shows what it missed, once."""
    from approvals.services import confirmation_decide

    base = asgi_server.url
    alice = browser.new_context(viewport=DESKTOP).new_page()
    start_paying(alice, base)
    card = step_of(alice, "oa__purchase_pay").locator(".approval")
    expect(card).to_contain_text("Waiting for approval", timeout=15_000)
    request = ConfirmationRequest.objects.get(run__user__username="alice")

    # The network goes away: the socket drops and every reconnection attempt fails at once.
    alice.evaluate(
        """() => {
        window.__realWebSocket = window.WebSocket;
        window.WebSocket = function () {
          const fake = { close() {} };
          setTimeout(() => fake.onclose && fake.onclose({ code: 1006 }), 10);
          return fake;
        };
        window.__portalSocket.close();
      }"""
    )
    april = Organization.objects.get(name=demo["organization"]).memberships.get(user__username="april").user
    assert confirmation_decide(request_id=request.pk, user=april, approve=True, reason="fine").accepted
    deadline = time.monotonic() + 15
    while Run.objects.get(pk=request.run_id).status != RunStatus.COMPLETED:  # finishes while offline
        assert time.monotonic() < deadline, "the run did not finish"
        time.sleep(0.1)
    expect(alice.locator(".bubble.assistant.final")).to_have_count(0)
    alice.evaluate("() => { window.WebSocket = window.__realWebSocket; }")  # the network is back

    expect(alice.locator(".bubble.assistant.final")).to_contain_text("PO-1001", timeout=15_000)
    expect(card.locator(".verdict")).to_contain_text("Approved by april")
    assert_page_matches_stored_events(alice, base, Run.objects.get(pk=request.run_id))


@pytest.mark.parametrize(
    ("permission", "label", "usable"),
    [
        ("denied", "Notifications blocked", False),
        ("default", "Notify me", True),
        ("granted", "Notifications on", False),
    ],
)
def test_the_chat_says_when_the_browser_blocks_notifications(
    asgi_server, demo, browser: Browser, permission: str, label: str, usable: bool
) -> None:
    alice = browser.new_context(viewport=PHONE).new_page()
    # The browser's answer as a person's browser would give it (headless Chromium has its own).
    alice.add_init_script(f"Object.defineProperty(Notification, 'permission', {{get: () => '{permission}'}})")
    start_paying(alice, asgi_server.url)  # a conversation: the toggle sits in its header

    toggle = alice.locator("#notify-toggle")
    expect(toggle).to_be_visible()
    expect(toggle).to_have_text(label)
    expect(toggle).to_be_enabled() if usable else expect(toggle).to_be_disabled()
    if permission == "denied":
        assert "browser's settings" in (toggle.get_attribute("title") or "")
        shoot(alice, "notifications-blocked")
