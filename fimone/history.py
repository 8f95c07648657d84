"""Configuration history (django-simple-history) without secrets.

Every model with an encrypted ``secrets`` field records its history with that field excluded:
the history tables never hold a secret, not even encrypted (a key rotated later would not make an
old copy safe). What they hold instead is a keyed fingerprint of the secrets (HMAC of their
canonical JSON under a key derived from ``SECRET_KEY``), so the admin can say "secrets: changed"
between two versions without knowing, or showing, either value.

Use::

    history = HistoricalRecords(excluded_fields=["secrets"], bases=[SecretsFingerprint])
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db import models
from django.dispatch import receiver
from django.http import Http404
from django.utils.crypto import salted_hmac
from simple_history.admin import SimpleHistoryAdmin
from simple_history.signals import pre_create_historical_record

SECRETS_CHANGED = "changed (not shown)"
SECRETS_FIELD = "secrets"


class SecretsFingerprint(models.Model):
    """The extra column of a historical model whose original has secrets."""

    secrets_fingerprint = models.CharField(max_length=32, blank=True, editable=False)

    class Meta:
        abstract = True


def secrets_fingerprint(value: Any) -> str:
    """A keyed fingerprint of ``value`` ("" for no secrets): equal values give equal
    fingerprints; nothing about the value can be read back without the server's key."""
    if value in (None, "", {}):
        return ""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return salted_hmac("fimone.history.secrets", canonical, algorithm="sha256").hexdigest()[:32]


@receiver(pre_create_historical_record)
def _fingerprint_secrets(sender: Any, instance: Any, history_instance: Any, **kwargs: Any) -> None:
    if isinstance(history_instance, SecretsFingerprint):
        history_instance.secrets_fingerprint = secrets_fingerprint(getattr(instance, SECRETS_FIELD, None))


def secrets_change(newer: Any, older: Any) -> dict[str, str] | None:
    """The change line for the secrets between two historical records (``None`` if unchanged or
    the model has none), in the shape the admin's history page lists."""
    if not isinstance(newer, SecretsFingerprint) or not isinstance(older, SecretsFingerprint):
        return None
    if newer.secrets_fingerprint == older.secrets_fingerprint:
        return None
    old = "set" if older.secrets_fingerprint else "none"
    new = SECRETS_CHANGED if newer.secrets_fingerprint else "removed"
    return {"field": SECRETS_FIELD, "old": old, "new": new}


class ConfigHistoryAdmin(SimpleHistoryAdmin):
    """The admin's "History" page of a configuration: who changed which fields when, old and new
    values, and for the secrets only whether they changed. Reverting from the history is disabled
    (``SIMPLE_HISTORY_REVERT_DISABLED``): a version without its secrets must never be saved back."""

    def _reachable(self, request: Any, object_id: str) -> bool:
        # simple-history looks objects up without the admin's queryset (and falls back on the
        # history of a missing one): the organisation scope must hold on these pages too.
        return self.get_queryset(request).filter(pk=unquote(object_id)).exists()

    def history_view(self, request: Any, object_id: str, extra_context: Any = None) -> Any:
        if not self._reachable(request, object_id):
            raise Http404("No such object.")
        return super().history_view(request, object_id, extra_context)

    def history_form_view(
        self, request: Any, object_id: str, version_id: str, extra_context: Any = None
    ) -> Any:
        """A past version, read-only. Its page would save a posted form with only the view
        permission: every POST is refused (reverting is not offered)."""
        if not self._reachable(request, object_id):
            raise Http404("No such object.")
        if request.method != "GET":
            raise PermissionDenied("Past versions are read-only.")
        return super().history_form_view(request, object_id, version_id, extra_context)

    def set_history_delta_changes(self, request: Any, historical_records: Any, **kwargs: Any) -> None:
        super().set_history_delta_changes(request, historical_records, **kwargs)
        records = list(historical_records)
        for newer, older in itertools.pairwise(records):
            change = secrets_change(newer, older)
            if change is not None:
                newer.history_delta_changes = [*getattr(newer, "history_delta_changes", []), change]
