"""Credentials out of error texts: what a tool, a driver or a service says never carries a secret.

Contract:

* :func:`redact_credentials` masks, in any text, the password of every URL's userinfo
  (``postgres://u:s3cret@host/db`` → ``postgres://u:***@host/db``; a user-only userinfo is masked
  too unless the scheme is a database's, where it is a role name), every ``password=…`` /
  ``pwd=…`` key-value pair (libpq DSNs, URL query strings: ``password=***``), and every literal
  secret it is given (header values, the DSN itself, a password however it was spelt in the DSN).
  It works on malformed input too: a DSN that no parser accepts is still masked.
* :func:`dsn_secrets` lists the literal secrets a DSN or URL holds, for the third rule: its
  password (as written and percent-decoded) and, unless told otherwise, the whole DSN.

Masking may over-reach (an ``@`` in a URL's path can hide the part before it); it never under-reaches
on the shapes above. Patterns are a net, literals the guarantee: callers that know their secrets pass
them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote

MASK = "***"
MIN_SECRET_CHARS = 3
"""Shorter literals are not searched for: masking every "ab" would garble the text, not protect it."""

DATABASE_SCHEMES = frozenset({"postgres", "postgresql", "mysql", "mariadb", "sqlite", "redis", "rediss"})

# A scheme, then everything up to whitespace or a quote: the userinfo ends at the last "@" in it.
_URL = re.compile(r"(?i)(?<![a-z0-9+.\-])([a-z][a-z0-9+.\-]*)://([^\s\"'<>]*)")
# libpq key=value (spaces allowed around "="), URL query parameters, quoted or not, closed or not.
_PASSWORD_PAIR = re.compile(
    r"(?i)\b(password|passwd|pwd|sslpassword|sslkey_password)(\s*=\s*)"
    r"('(?:[^'\\]|\\.)*(?:'|$)|\"(?:[^\"\\]|\\.)*(?:\"|$)|[^\s'\"]+)"
)


def redact_credentials(text: str, *, secrets: Iterable[str] = ()) -> str:
    """``text`` with every credential masked (see the module docstring)."""
    if not text:
        return text
    # Longest first, so a DSN is masked whole before its password is looked for inside it.
    for secret in sorted({s for s in secrets if isinstance(s, str)}, key=len, reverse=True):
        if len(secret) >= MIN_SECRET_CHARS and secret in text:
            text = text.replace(secret, _masked_literal(secret))
    text = _URL.sub(_mask_userinfo, text)
    return _PASSWORD_PAIR.sub(lambda m: f"{m.group(1)}={MASK}", text)


def dsn_secrets(dsn: str, *, whole: bool = True) -> list[str]:
    """The literal secrets in ``dsn``: its password, as written and decoded, and (``whole``) the
    DSN itself, which a driver may quote verbatim however malformed it is."""
    if not isinstance(dsn, str) or not dsn:
        return []
    found = [dsn] if whole else []
    for match in _URL.finditer(dsn):
        userinfo, _, _ = match.group(2).rpartition("@")
        if ":" in userinfo:
            password = userinfo.split(":", 1)[1]
            found += [password, unquote(password)]
    for match in _PASSWORD_PAIR.finditer(dsn):
        value = match.group(3)
        found.append(value)
        if len(value) >= 2 and value[0] in "'\"":
            found.append(value[1:-1] if value[-1] == value[0] else value[1:])
    return [secret for secret in found if secret]


def _masked_literal(secret: str) -> str:
    # A whole DSN is shown masked by the patterns (the reader still sees which database it was).
    masked = _PASSWORD_PAIR.sub(lambda m: f"{m.group(1)}={MASK}", _URL.sub(_mask_userinfo, secret))
    return masked if masked != secret else MASK


def _mask_userinfo(match: re.Match[str]) -> str:
    scheme, rest = match.group(1), match.group(2)
    userinfo, at, after = rest.rpartition("@")
    if not at:
        return match.group(0)
    if ":" in userinfo:
        user = userinfo.split(":", 1)[0]
        return f"{scheme}://{user}:{MASK}@{after}"
    if scheme.lower() in DATABASE_SCHEMES or not userinfo:
        return match.group(0)
    return f"{scheme}://{MASK}@{after}"
