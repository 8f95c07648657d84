"""What the admin's browser tests share: the two widths, a page of a given width, signing in."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from agents.demo import DEMO_PASSWORD

WIDTHS = [1280, 390]
"""A laptop's and a phone's width."""


def open_page(browser: Any, width: int) -> Page:
    return browser.new_context(viewport={"width": width, "height": 900}).new_page()


def sign_in_to_admin(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#user-tools")).to_contain_text(username)
