"""Streams stop when their watcher loses access (docs/design.md §1.11).

A run's stream (``ws/runs/<id>/``, and the approvals app's watch of it) checks access when it
connects; what someone may watch can shrink afterwards: they leave the organisation, lose the role
that let them read it, or are deactivated. Each signed-in socket also joins its user's
:func:`access_group`; any change to a user's memberships or account pushes ``access.changed``
there once it commits, and each of their streams checks again and closes (``4403``) if it may
no longer watch. The push is fire and forget (the channel layer keeps nothing): a stream also
checks again on its own every :data:`RECHECK_SECONDS`, with the next event it would send.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)

RECHECK_SECONDS = 30.0
"""How long a stream trusts its last access check, at most, when no push came."""

ACCESS_CHANGED = "access.changed"


def access_group(user_id: int) -> str:
    """The channel-layer group of ``user_id``'s streaming sockets."""
    return f"access.{int(user_id)}"


def access_changed(*, user_id: int) -> None:
    """Tell ``user_id``'s streams to check their access again, once the current transaction
    commits (at once outside one). Never raises: a lost push is caught by the periodic check."""

    def push() -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            async_to_sync(layer.group_send)(access_group(user_id), {"type": ACCESS_CHANGED})
        except Exception:  # a stream re-checks by itself within RECHECK_SECONDS anyway
            log.warning("could not tell the streams of user %s to check their access", user_id, exc_info=True)

    transaction.on_commit(push)


def membership_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A membership was added, changed or removed: its user's streams check again."""
    if instance.user_id is not None:
        access_changed(user_id=instance.user_id)


def account_changed(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    """A user was saved (deactivated, no longer a superuser, …): their streams check again. A new
    account has no stream yet."""
    update_fields = kwargs.get("update_fields")
    if update_fields is not None and set(update_fields) <= {"last_login", "password"}:
        return  # a sign-in or a new password changes nothing a stream is allowed to show
    if not created and instance.pk is not None:
        access_changed(user_id=instance.pk)
