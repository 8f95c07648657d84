"""What the chat page's browser tests share: the demo organisation with a scripted purchasing
helper (its fixture, ``shop``: conftest.py), the two widths they look at, a fresh page, a first
message sent."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents.demo import demo_setup
from agents.models import Agent
from approvals.models import ApproverPolicy
from tenancy.models import Organization
from tests.browser.test_chat_in_a_browser import DESKTOP, PHONE

WIDTHS = [pytest.param(DESKTOP, id="1280"), pytest.param(PHONE, id="390")]

# A helper on the demo's payments connector whose answers are written for people.
SCRIPT: dict[str, Any] = {
    "rules": [
        {
            "match": r"\bpay",
            "turns": [
                {
                    "content": "Let me look up the pending purchases.",
                    "tool_calls": [{"name": "oa__purchase_list", "arguments": {"status": "pending"}}],
                },
                {
                    "content": "Paying the first one.",
                    "tool_calls": [
                        {
                            "name": "oa__purchase_pay",
                            "arguments": {
                                "purchase_id": "$last.0.id",
                                "amount": "$last.0.amount",
                                "note": "Paid from the chat",
                            },
                        }
                    ],
                },
                {"content": "That is all I was asked to do."},
            ],
        },
        {"turns": [{"content": "Hello! Ask me to pay the pending purchase."}]},
    ]
}


def demo_shop(url: str) -> SimpleNamespace:
    """The demo organisation served at ``url`` with a "Purchasing helper" (``SCRIPT``) on its payments."""
    summary = demo_setup(base_url=url)
    org = Organization.objects.get(name=summary["organization"])
    # Requests park at once (the page follows a suspension), one approval settles them.
    ApproverPolicy.objects.update_or_create(
        organization=org, agent=None, defaults={"inline_wait_seconds": 0, "approvals_required": 1}
    )
    demo_agent = Agent.objects.get(pk=summary["agent"]["id"])
    agent = Agent.objects.create(
        organization=org,
        owner=demo_agent.owner,
        name="Purchasing helper",
        model_config_json={"provider": "scripted", "script": SCRIPT},
    )
    agent.actions.set(demo_agent.actions.filter(name__in=["purchase_list", "purchase_pay"]))
    return SimpleNamespace(url=url, org=org, agent=agent)


def new_page(browser: Browser, viewport: dict[str, int], **options: Any) -> Page:
    return browser.new_context(viewport=viewport, **options).new_page()


def send_first(page: Page, shop: SimpleNamespace, text: str) -> None:
    page.goto(f"{shop.url}/agents/{shop.agent.pk}/")
    page.get_by_label("Your message").fill(text)
    page.get_by_label("Your message").press("Enter")
    expect(page).to_have_url(re.compile(r"/conversations/\d+/$"))
