"""The web processes serve what collectstatic gathered (fimone/static.py): the files under the
static URL, nothing outside the folder, and every other request passed on untouched."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from fimone.static import StaticFiles

pytestmark = pytest.mark.asyncio


async def _application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The application behind: answers every request it gets with its own path."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": f"app saw {scope['path']}".encode()})


@pytest.fixture
def collected(tmp_path: Path) -> Path:
    root = tmp_path / "staticfiles"
    (root / "portal").mkdir(parents=True)
    (root / "portal" / "chat.js").write_text("console.log('chat');\n")
    (tmp_path / "secret.txt").write_text("not a static file")
    return root


def _client(app: StaticFiles) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver")


async def test_it_serves_a_collected_file_under_the_static_url(collected: Path) -> None:
    async with _client(StaticFiles(_application, root=collected, url="static/")) as client:
        answer = await client.get("/static/portal/chat.js")
    assert answer.status_code == 200
    assert answer.text == "console.log('chat');\n"
    assert answer.headers["content-type"].startswith("text/javascript")
    assert "max-age" in answer.headers["cache-control"]


async def test_it_answers_404_for_a_missing_file_without_bothering_the_application(collected: Path) -> None:
    async with _client(StaticFiles(_application, root=collected, url="static/")) as client:
        answer = await client.get("/static/portal/missing.js")
    assert answer.status_code == 404
    assert "app saw" not in answer.text


@pytest.mark.parametrize(
    "path",
    ["/static/../secret.txt", "/static/%2e%2e/secret.txt", "/static/portal/..%2f..%2fsecret.txt"],
)
async def test_it_serves_nothing_outside_the_collected_folder(collected: Path, path: str) -> None:
    async with _client(StaticFiles(_application, root=collected, url="static/")) as client:
        answer = await client.get(path)
    assert "not a static file" not in answer.text


async def test_every_other_request_goes_to_the_application(collected: Path) -> None:
    async with _client(StaticFiles(_application, root=collected, url="static/")) as client:
        answer = await client.post("/im/callback/key/", content=b"{}")
        near_miss = await client.get("/staticx/portal/chat.js")
    assert answer.text == "app saw /im/callback/key/"
    assert near_miss.text == "app saw /staticx/portal/chat.js"


async def test_without_collected_files_it_says_how_to_gather_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="fimone.static"):
        app = StaticFiles(_application, root=tmp_path / "never-collected", url="static/")
    assert "collectstatic" in caplog.text
    async with _client(app) as client:
        assert (await client.get("/static/portal/chat.js")).status_code == 404
