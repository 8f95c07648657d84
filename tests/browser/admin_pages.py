"""What the admin's browser tests share: the two widths, a page of a given width, signing in, and
measures of a page that fits its screen (nothing cut or pushed sideways, no word split in two)."""

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


_OVERFLOWS = """(root) => {
  const name = (el) => [el.tagName.toLowerCase(), ...(el.getAttribute('class') || '').split(/\\s+/)]
    .filter(Boolean).join('.') + (el.getAttribute('name') ? `[${el.getAttribute('name')}]` : '');
  const span = (r) => `${Math.round(r.left)}..${Math.round(r.right)}`;
  const box = root.getBoundingClientRect();
  const left = Math.max(box.left, 0), right = Math.min(box.right, window.innerWidth);
  const out = [];
  if (box.left < -0.5 || box.right > window.innerWidth + 0.5) {
    out.push(`${name(root)} spans ${span(box)} of a screen ${window.innerWidth} wide`);
  }
  for (const el of root.querySelectorAll('*')) {
    if (el.offsetParent === null) continue;  // not shown
    // A box that hides part of its content, or was scrolled to show it (inputs scroll their text).
    const field = ['INPUT', 'TEXTAREA', 'SELECT'].includes(el.tagName);
    const clips = getComputedStyle(el).overflowX !== 'visible' && el.scrollWidth > el.clientWidth + 1;
    if (!field && (el.scrollLeft > 0 || clips)) {
      out.push(`${name(el)} hides ${el.scrollWidth - el.clientWidth}px sideways`);
    }
    const r = el.getBoundingClientRect();
    if (r.width && (r.left < left - 0.5 || r.right > right + 0.5)) {
      out.push(`${name(el)} spans ${span(r)}, outside ${Math.round(left)}..${Math.round(right)}`);
    }
  }
  return out;
}"""

_BROKEN_WORDS = """(root) => {
  const out = [];
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.parentElement || node.parentElement.offsetParent === null) continue;
    for (const m of node.data.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const tops = [...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top));
      if (new Set(tops).size > 1) out.push(m[0]);
    }
  }
  return out;
}"""

_LINES = """(el) => {
  const range = document.createRange();
  range.selectNodeContents(el);
  const tops = [...range.getClientRects()].filter((r) => r.width > 0).map((r) => r.top);
  tops.sort((a, b) => a - b);
  return tops.filter((top, i) => i === 0 || top - tops[i - 1] > 4).length;
}"""


def overflows(locator: Any) -> list[str]:
    """What inside ``locator`` reaches past the screen's edges or the locator's own box, or is cut
    by a box too narrow for it (scrolled sideways, or hiding part of itself): [] when all fits."""
    return locator.evaluate(_OVERFLOWS)


def broken_words(locator: Any) -> list[str]:
    """The words of ``locator``'s text that break across two lines ("osc / ar"): [] when none."""
    return locator.evaluate(_BROKEN_WORDS)


def lines_of(locator: Any) -> int:
    """How many lines ``locator``'s text takes on the screen."""
    return locator.evaluate(_LINES)
