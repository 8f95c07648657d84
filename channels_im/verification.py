"""What every provider's inbound verification and outbound configuration share.

- one callback window (:data:`CALLBACK_WINDOW_SECONDS`) and how long a handled callback is
  remembered (:data:`REPLAY_MEMORY_SECONDS`), with :func:`timestamp_skew` to place a signed
  timestamp in it;
- replay keys (:func:`replay_key`) and the first-delivery check on them (:func:`first_delivery`,
  backed by :mod:`channels_im.replay`);
- constant-time comparison of secrets and signatures (:func:`same_secret`);
- origin checks for the URLs credentials travel to (:func:`secure_origin`);
- reading hostile bodies without raising (:func:`read_body`, :func:`json_object`, :func:`dig`).

Providers keep only what is theirs: the wire format, the signature algorithm, the wording of
their refusals. Nothing here looks inside a payload before the provider has verified it.
"""

from __future__ import annotations

import hashlib
import hmac
import time
import urllib.parse
from typing import Any

from django.http import HttpRequest

from channels_im import replay
from fimone.parsers import loads as json_loads

CALLBACK_WINDOW_SECONDS = 300
"""A callback signed further than this from now (either way) is refused."""
REPLAY_MEMORY_SECONDS = 2 * CALLBACK_WINDOW_SECONDS
"""How long a handled callback is remembered: a timestamp up to the window ahead of our clock stays
acceptable until the window has passed behind it, so the memory must outlive both halves."""
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
MAX_TIMESTAMP_DIGITS = 12


def text(value: Any) -> str:
    """``value`` stripped if it is a string, else ``""`` (configuration JSON may hold anything)."""
    return value.strip() if isinstance(value, str) else ""


def same_secret(claimed: Any, expected: str) -> bool:
    """Whether ``claimed`` equals ``expected``, in time independent of where they differ. An empty
    or non-string claim, or an empty expectation, never matches."""
    if not isinstance(claimed, str) or not claimed or not expected:
        return False
    return hmac.compare_digest(claimed.encode("utf-8", "replace"), expected.encode("utf-8", "replace"))


def timestamp_skew(timestamp: Any, *, now: float | None = None) -> float | None:
    """Seconds ``timestamp`` (Unix seconds as decimal text) lies ahead of now (negative: behind);
    ``None`` when it is not such a text."""
    if not isinstance(timestamp, str) or not (
        timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= MAX_TIMESTAMP_DIGITS
    ):
        return None
    return int(timestamp) - (time.time() if now is None else now)


def window_problem(timestamp: Any, *, what: str) -> str | None:
    """Why a signed ``timestamp`` is outside the window (``None`` when it is inside). ``what``
    names where it came from, for the message."""
    skew = timestamp_skew(timestamp)
    if skew is None:
        return f"missing or malformed {what}"
    if skew < -CALLBACK_WINDOW_SECONDS:
        return f"stale callback: signed {int(-skew)} s ago, outside the {CALLBACK_WINDOW_SECONDS} s window"
    if skew > CALLBACK_WINDOW_SECONDS:
        return (
            f"stale callback: its timestamp is {int(skew)} s in the future, "
            f"outside the {CALLBACK_WINDOW_SECONDS} s window (check the clock)"
        )
    return None


def replay_key(namespace: str, *parts: str) -> str:
    """``namespace:<sha256 of the parts>``: the parts are the sender's text, keys stay short and
    plain, and NUL-joining keeps ``("a", "bc")`` and ``("ab", "c")`` apart."""
    digest = hashlib.sha256("\0".join(parts).encode("utf-8", "replace")).hexdigest()
    return f"{namespace}:{digest}"


def first_delivery(key: str) -> bool:
    """``True`` the first time ``key`` is seen within :data:`REPLAY_MEMORY_SECONDS`. Raises when
    the memory is unavailable: callers refuse the callback then (failing closed)."""
    return replay.first_time(key, REPLAY_MEMORY_SECONDS)


async def first_delivery_async(key: str) -> bool:
    """:func:`first_delivery` on the event loop (Redis only: the table memory is Django's)."""
    return await replay.first_time_async(key, REPLAY_MEMORY_SECONDS)


def secure_origin(url: Any, *, allow_path: bool = False) -> bool:
    """Whether credentials may travel to ``url``: https, or plain http to this machine only (test
    fakes); a host, no user info, no query or fragment (and no path unless ``allow_path``)."""
    if not isinstance(url, str):
        return False
    try:
        parts = urllib.parse.urlsplit(url)
        hostname = parts.hostname
    except ValueError:
        return False
    secure = parts.scheme == "https" or (parts.scheme == "http" and hostname in LOOPBACK_HOSTS)
    return bool(
        secure
        and hostname
        and "@" not in parts.netloc
        and not parts.query
        and not parts.fragment
        and (allow_path or not parts.path)
    )


def read_body(http_request: HttpRequest, *, max_bytes: int) -> bytes | None:
    """The exact bytes received (what was signed), or ``None`` when they are over ``max_bytes``
    or unreadable (Django's upload limit raises)."""
    try:
        body = http_request.body
    except Exception:  # RequestDataTooBig, a dropped connection
        return None
    return body if len(body) <= max_bytes else None


def json_object(data: bytes | str) -> dict[str, Any]:
    """``data`` parsed as a JSON object. Raises ``ValueError`` for anything else (including JSON
    nested deeper than any callback is)."""
    try:
        value = json_loads(data)
    except ValueError:
        raise ValueError("not JSON") from None
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def dig(value: Any, *keys: str) -> Any:
    """``value[k1][k2]…``, or ``None`` as soon as a level is not a dict."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value
