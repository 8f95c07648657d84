"""Model text as safe HTML: Markdown rendered with raw HTML disabled, then sanitised.

Two independent layers, because model output is attacker-controlled (a prompt injection can make
a model write anything): markdown-it-py never passes HTML through (``html=False``) and refuses
``javascript:``-style links, and nh3 then keeps only an allow-list of tags and attributes. Either
layer alone would stop a ``<script>``; both must fail for markup to reach the page.
"""

from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt

ALLOWED_TAGS = frozenset(
    {
        "p", "br", "hr", "strong", "em", "del", "code", "pre", "blockquote",
        "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "a",
        "table", "thead", "tbody", "tr", "th", "td",
    }
)  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"style"}, "td": {"style"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
MAX_SOURCE_CHARS = 100_000
"""Longer text is cut before rendering: a page never renders megabytes of model output as HTML."""


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
        ["table", "strikethrough"]
    )


def render_markdown(text: str) -> str:
    """``text`` (Markdown written by a model) as sanitised HTML, safe to insert into a page."""
    source = (text or "")[:MAX_SOURCE_CHARS]
    html = _parser().render(source)
    return nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
        url_schemes=set(URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
        filter_style_properties={"text-align"},
    )
