"""The signed links of an approval e-mail, and the code that proves who clicks one.

A link names the request, the approver it was sent to, the verdict it gives and the arguments the
approver was shown, signed with the server's key (``django.core.signing``, its own salt): nothing
in it can be changed, and it is good only while its request is pending (its deadline is the
request's). A link is not a password: a message can be forwarded. So a click decides only for the
approver it was sent to, and only once that person is known to be the one clicking — signed in as
them, or holding the one-time code the page sends to their own address at the moment of the
click (:func:`code_send`, :func:`code_check`). A forwarded link decides nothing: its reader never
sees the code. Codes are kept hashed, for :data:`CODE_SECONDS`, at most :data:`CODE_ATTEMPTS`
tries each.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

from django.core import signing
from django.core.cache import cache

SALT = "channels_im.email.decision"
CODE_SECONDS = 600
CODE_ATTEMPTS = 5
CODE_DIGITS = 6


@dataclass(frozen=True)
class Link:
    request_id: str
    user_id: int
    approve: bool
    args_sha256: str
    channel_id: int


def link_token(link: Link) -> str:
    payload = {
        "r": link.request_id,
        "u": link.user_id,
        "a": int(link.approve),
        "h": link.args_sha256,
        "c": link.channel_id,
    }
    return signing.dumps(payload, salt=SALT, compress=True)


def link_of(token: str) -> Link | None:
    """The link ``token`` signs, or ``None`` when it was not signed here or was changed."""
    try:
        data = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        return None
    try:
        return Link(str(data["r"]), int(data["u"]), bool(data["a"]), str(data["h"]), int(data["c"]))
    except (KeyError, TypeError, ValueError):
        return None


def _key(token: str) -> str:
    return "fimone:email-code:" + hashlib.sha256(token.encode()).hexdigest()


def code_send(token: str) -> str:
    """A fresh code for this link (replacing any earlier one); the caller mails it."""
    code = "".join(secrets.choice("0123456789") for _ in range(CODE_DIGITS))
    cache.set(_key(token), {"digest": hashlib.sha256(code.encode()).hexdigest(), "tries": 0}, CODE_SECONDS)
    return code


def code_check(token: str, code: Any) -> str | None:
    """Why ``code`` does not prove the clicker for this link (``None`` when it does: the code is
    then used up)."""
    key = _key(token)
    held = cache.get(key)
    if held is None:
        return "no code is waiting for this link (or it expired): ask for a new one"
    if held["tries"] >= CODE_ATTEMPTS:
        cache.delete(key)
        return "too many wrong codes: ask for a new one"
    given = hashlib.sha256(str(code or "").strip().encode()).hexdigest()
    if not hmac.compare_digest(given, held["digest"]):
        held["tries"] += 1
        cache.set(key, held, CODE_SECONDS)
        return "this is not the code we sent"
    cache.delete(key)
    return None
