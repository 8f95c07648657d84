"""Screenshots the browser tests take of every page they look at, and of every open page when a
test fails: into ``BROWSER_SCREENSHOTS`` (default ``artifacts/browser`` in the project folder, which
git ignores), one folder per test. ``.ci/run`` keeps that folder as an archive when a suite fails.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCREENS = Path(os.environ.get("BROWSER_SCREENSHOTS") or ROOT / "artifacts" / "browser")


def screens_folder() -> Path:
    """The current test's folder of screenshots (made on first use)."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "outside-a-test").split(" (")[0]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", current.split("::", 1)[-1])[:150]
    folder = SCREENS / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def shoot(page: Any, name: str) -> Path:
    """A full-page screenshot of ``page`` named ``name`` and the viewport's width."""
    width = (page.viewport_size or {}).get("width", 0)
    path = screens_folder() / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}-{width}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
