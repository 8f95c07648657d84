"""Fixtures of the browser tests: a headless Debian Chromium driven by Playwright's sync API.

Playwright cannot download its own browsers here, so the tests use the system Chromium. Without
it a browser test skips — except under ``CI=true``, where CI is expected to provide it and a skip
would hide a hole in the run, so it fails instead.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

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


_open_browsers: list[Any] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A browser test that failed leaves a screenshot of every page it had open (see shots.py)."""
    report = yield
    if report.when == "call" and report.failed and _open_browsers:
        from tests.browser.shots import screens_folder

        folder = screens_folder()
        for b, chromium in enumerate(_open_browsers):
            for c, context in enumerate(chromium.contexts):
                for p, page in enumerate(context.pages):
                    # A page that crashed or closed has nothing to show.
                    with contextlib.suppress(Exception):
                        page.screenshot(path=str(folder / f"failed-{b}-{c}-{p}.png"), full_page=True)
    return report


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
        _open_browsers.append(chromium)
        try:
            yield chromium
        finally:
            _open_browsers.remove(chromium)
            chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page (own cookies) sized like a laptop screen."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()


class AsgiServer:
    """The project's ASGI application (HTTP, static files and WebSockets) served by Daphne in a
    thread of the test process, so it shares the test database (SQLite in memory included)."""

    def __init__(self, url: str) -> None:
        self.url = url


@pytest.fixture(scope="session")
def _daphne_thread() -> Iterator[str]:
    """One Daphne for the session: Twisted's reactor cannot be started twice in a process."""
    import asyncio
    import socket
    import threading
    import time

    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    from agents.executors import embedded
    from fimone.asgi import application

    # The router without fimone.asgi's loop binding: that would also start the embedded expiry
    # sweep, which would then expire other tests' requests for the rest of the session.
    router = ASGIStaticFilesHandler(application.app)

    async def app(scope, receive, send):
        if _serving.get("bind"):
            embedded.bind_loop(asyncio.get_running_loop())  # runs execute on the server's loop
        await router(scope, receive, send)

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = Server(
        application=app,
        endpoints=build_endpoint_description_strings(host="127.0.0.1", port=port),
        signal_handlers=False,
        verbosity=0,
    )
    thread = threading.Thread(target=server.run, name="test-daphne", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    else:
        pytest.fail("Daphne did not start")
    yield f"http://127.0.0.1:{port}"
    from twisted.internet import reactor

    reactor.callFromThread(reactor.stop)
    thread.join(5)


_serving: dict[str, bool] = {}


@pytest.fixture
def asgi_server(_daphne_thread: str, transactional_db: None, settings: Any) -> Iterator[AsgiServer]:
    """The Daphne of the session, for one test: runs execute on its loop (embedded executor) while
    the test lasts; afterwards the executor forgets that loop again."""
    from agents.executors import embedded

    settings.RUN_EXECUTOR = "embedded"
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    _serving["bind"] = True
    try:
        yield AsgiServer(_daphne_thread)
    finally:
        _serving["bind"] = False
        try:
            embedded.wait_idle(timeout=20)
        finally:
            embedded._loop = None


@pytest.fixture
def shop(asgi_server) -> SimpleNamespace:
    """The demo organisation with a scripted purchasing helper, for the chat page's tests (chat_kit.py)."""
    from tests.browser.chat_kit import demo_shop

    return demo_shop(asgi_server.url)
