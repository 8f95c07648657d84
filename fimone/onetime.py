"""One-time links (invitations, IM account links): a random token shown once, only its SHA-256
stored, and a refusal that says which HTTP status the page answers with."""

from __future__ import annotations

import hashlib
import secrets


def new_token() -> tuple[str, str]:
    """A fresh URL-safe token and the digest to store in its place."""
    token = secrets.token_urlsafe(32)
    return token, token_digest(token)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


class LinkRefused(Exception):
    """The one-time link cannot be used. ``status`` is the HTTP status the page answers with."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.message, self.status = message, status
