"""The signed links of an approval e-mail, and the code that proves who clicks one.

A link names the request, the approver it was sent to, the verdict it gives, the arguments the
approver was shown and the request's deadline, signed with the server's key
(``django.core.signing``, its own salt): nothing in it can be changed, and it decides nothing
after that deadline (:class:`LinkExpired`), whatever the request's row says, nor once its request
left ``pending``. A link is not a password: a message can be forwarded. So a click decides only
for the approver it was sent to, and only once that person is known to be the one clicking —
signed in as them, or holding the one-time code the page sends to their own address at the
moment of the click (:func:`code_send`, :func:`code_check`). A forwarded link decides nothing:
its reader never sees the code. Codes are kept hashed, for :data:`CODE_SECONDS`, at most
:data:`CODE_ATTEMPTS` tries each, counted atomically in the cache (:func:`count_within`): guesses
sent together, or to several servers sharing one Redis, each count a try.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import math
import secrets
import time
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
    deadline: dt.datetime
    """The request's deadline when the link was sent (its stage's: a person is asked by one
    stage only, and mailed when it opens): the link decides nothing after it."""


class LinkExpired(Exception):
    """The link was signed here and is unchanged, but its request's deadline has passed."""


def link_token(link: Link) -> str:
    payload = {
        "r": link.request_id,
        "u": link.user_id,
        "a": int(link.approve),
        "h": link.args_sha256,
        "c": link.channel_id,
        # Whole seconds, rounded down: a link may stop up to a second before its request, never after.
        "e": math.floor(link.deadline.timestamp()),
    }
    return signing.dumps(payload, salt=SALT, compress=True)


def link_of(token: str) -> Link | None:
    """The link ``token`` signs, or ``None`` when it was not signed here, was changed, or does
    not carry a deadline (signed before links had one). Raises :class:`LinkExpired` once the
    deadline it carries has passed: its life is bounded by what it was signed with, not by the
    request's row (which the sweep may not have expired yet, or which a bug may leave pending)."""
    try:
        data = signing.loads(token, salt=SALT)
        deadline = int(data["e"])
        link = Link(
            str(data["r"]),
            int(data["u"]),
            bool(data["a"]),
            str(data["h"]),
            int(data["c"]),
            dt.datetime.fromtimestamp(deadline, tz=dt.UTC),
        )
    except (signing.BadSignature, KeyError, TypeError, ValueError, OverflowError, OSError):
        return None
    if time.time() > deadline:
        raise LinkExpired(f"the link's deadline {link.deadline:%Y-%m-%d %H:%M:%S %Z} has passed")
    return link


def _key(token: str) -> str:
    return "fimone:email-code:" + hashlib.sha256(token.encode()).hexdigest()


def count_within(key: str, *, limit: int, seconds: int) -> bool:
    """Count one more at ``key`` and say whether the count is still within ``limit``. The count
    starts at the first one and is forgotten ``seconds`` later. Atomic whoever counts, threads or
    servers: ``add`` and ``incr`` are single commands on Redis (SET NX, INCR) and run under the
    cache's lock in the embedded local-memory cache, so no two callers see the same count. A
    count that cannot be taken (the key vanished twice between the two) is not within: doubt
    refuses."""
    for _ in range(2):
        cache.add(key, 0, seconds)
        try:
            count = cache.incr(key)
        except ValueError:  # it ran out between add and incr: start it again
            continue
        if count == 1:
            # Django's Redis ``incr`` checks the key exists before INCR: a key that expired in
            # between is made again by INCR without an expiry. Give the first count its window.
            cache.touch(key, seconds)
        return count <= limit
    return False


def code_send(token: str) -> str:
    """A fresh code for this link (replacing any earlier one, whose tries no longer matter: each
    code counts its own); the caller mails it."""
    code = "".join(secrets.choice("0123456789") for _ in range(CODE_DIGITS))
    held = {"digest": hashlib.sha256(code.encode()).hexdigest(), "nonce": secrets.token_hex(8)}
    cache.set(_key(token), held, CODE_SECONDS)
    return code


def code_check(token: str, code: Any) -> str | None:
    """Why ``code`` does not prove the clicker for this link (``None`` when it does: the code is
    then used up, by this check only). Every check counts a try before it compares, atomically
    (:func:`count_within`): of guesses made at the same moment each counts, and after
    :data:`CODE_ATTEMPTS` the code is refused and forgotten, whoever counted the tries."""
    key = _key(token)
    held = cache.get(key)
    if not isinstance(held, dict) or not {"digest", "nonce"} <= held.keys():
        return "no code is waiting for this link (or it expired): ask for a new one"
    # The tries of this code (its nonce): a new code starts from none. The count outlives the
    # code (it starts at the first check, the code before), so it is never lost while the code lives.
    if not count_within(f"{key}:tries:{held['nonce']}", limit=CODE_ATTEMPTS, seconds=CODE_SECONDS):
        cache.delete(key)
        return "too many wrong codes: ask for a new one"
    given = hashlib.sha256(str(code or "").strip().encode()).hexdigest()
    if not hmac.compare_digest(given, str(held["digest"])):
        return "this is not the code we sent"
    # Used up by whoever deletes it: of two right codes sent together, one decides.
    if not cache.delete(key):
        return "this code was just used: ask for a new one"
    return None
