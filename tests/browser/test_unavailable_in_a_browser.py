"""When Redis does not answer, a person who sends a message meets a page that says to try again,
on a desktop and on a phone, with the message kept to send again: never a traceback."""

from __future__ import annotations

import re

import pytest
import redis
from playwright.sync_api import Browser, expect

from agents.demo import DEMO_AGENT_NAME, demo_setup
from agents.models import Agent, Run
from tests.browser.shots import shoot
from tests.browser.test_chat_in_a_browser import DESKTOP, PHONE, sign_in

pytestmark = [pytest.mark.browser]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_message_sent_while_redis_is_down_meets_a_try_again_page(
    asgi_server, browser: Browser, monkeypatch, viewport
) -> None:
    demo_setup(base_url=asgi_server.url)
    agent = Agent.objects.get(name=DEMO_AGENT_NAME)
    page = browser.new_context(viewport=viewport).new_page()
    sign_in(page, asgi_server.url, "alice")
    page.goto(f"{asgi_server.url}/agents/{agent.pk}/")

    def refuse(*args, **kwargs):
        raise redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr("fimone.rates.hit_all_or_none", refuse)  # the server runs in this process
    page.get_by_label("Your message").fill("please pay the pending purchase")
    with page.expect_response(re.compile(rf"/agents/{agent.pk}/$")) as answer:
        page.get_by_role("button", name="Send").click()

    assert answer.value.status == 503
    expect(page.get_by_role("heading", name="Briefly unavailable")).to_be_visible()
    expect(page.locator("body")).to_contain_text("Try again in a few seconds.")
    expect(page.locator("body")).not_to_contain_text("ConnectionError")
    expect(page.get_by_label("Your message")).to_have_value("please pay the pending purchase")
    assert Run.objects.count() == 0
    shoot(page, "unavailable")
