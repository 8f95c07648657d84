"""One-time links (invitations, IM account links): a random token shown once, only its SHA-256
stored, and a refusal that says which HTTP status the page answers with.

A link's row holds ``token_sha256``, ``expires_at``, and a pair of columns that record when it
was used and by whom; :class:`LinkKind` names that pair, and the words of each refusal, for one
kind of link. A link is opened (:meth:`LinkKind.open`: found and checked, nothing written), then
spent (:meth:`LinkKind.spend`: a conditional update, so of two who spend it at once only one
does).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from django.utils import timezone

Link = TypeVar("Link", bound=Model)


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


@dataclass(frozen=True)
class LinkKind:
    """One kind of one-time link: the columns of its model that record when it was used
    (``used_at``, null while open) and by whom (``used_by``); the words of its refusals,
    ``unknown`` (404: no such token, or a forged one), ``used`` and ``expired`` (410); and the
    refusal raised, a :class:`LinkRefused`."""

    used_at: str
    used_by: str
    unknown: str
    used: str
    expired: str
    refused: type[LinkRefused] = LinkRefused

    def open(self, links: QuerySet[Link], token: str) -> Link:
        """The row of ``links`` stored for ``token`` if it is still open (not used, not
        expired); else raises the refusal that says why. Writes nothing."""
        link = links.filter(token_sha256=token_digest(token)).first()
        if link is None:
            raise self.refused(self.unknown, status=404)
        if getattr(link, self.used_at) is not None:
            raise self.refused(self.used, status=410)
        if link.expires_at <= timezone.now():
            raise self.refused(self.expired, status=410)
        return link

    def spend(self, link: Model, *, user: Any) -> dt.datetime:
        """Mark ``link`` (as :meth:`open` returned it) used now by ``user``, and return that
        moment. One conditional update: if it was spent or expired since it was opened (two
        confirmations at once), nothing is written and the ``used`` refusal is raised. Call it
        in the transaction that does what the link is for."""
        now = timezone.now()
        still_open = {f"{self.used_at}__isnull": True, "expires_at__gt": now}
        spent = (
            type(link)
            ._default_manager.filter(pk=link.pk, **still_open)
            .update(**{self.used_at: now, self.used_by: user})
        )
        if not spent:
            raise self.refused(self.used, status=410)
        return now
