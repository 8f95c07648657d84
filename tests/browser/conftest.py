"""Fixtures of the browser tests: a headless Debian Chromium driven by Playwright's sync API.

Playwright cannot download its own browsers here, so the tests use the system Chromium. Without
it a browser test skips — except under ``CI=true``, where CI is expected to provide it and a skip
would hide a hole in the run, so it fails instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
UNDER_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _unavailable(reason: str) -> None:
    if UNDER_CI:
        pytest.fail(f"CI=true but this browser test {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[Browser]:
    """A headless Chromium, closed after the test (function scope: Playwright's sync API keeps an
    event loop of its own, which must not outlive the test into pytest-asyncio's tests)."""
    if not CHROMIUM.exists():
        _unavailable(f"needs Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("needs the playwright package (pip install playwright)")
    # Playwright's sync API parks its event loop on this thread as the "running" loop, so Django
    # would take the test's own (synchronous) ORM calls for calls from a coroutine and refuse them.
    # No coroutine touches the database here; lift the guard for this test only.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page (own cookies) sized like a laptop screen."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()
