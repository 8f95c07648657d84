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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.admin.utils import unquote
from django.core.exceptions import FieldDoesNotExist, PermissionDenied
from django.core.paginator import Paginator
from django.db import models
from django.dispatch import receiver
from django.http import Http404
from django.urls import NoReverseMatch, reverse
from django.utils.crypto import salted_hmac
from django.utils.text import capfirst
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


# --- the History page: one line per change, with what changed ------------------------------------

EMPTY = "—"
"""How an empty value reads in a change line."""


@dataclass(frozen=True)
class Change:
    """One changed field: its label, and its old and new values as people read them."""

    field: str
    old: str
    new: str


@dataclass
class HistoryEntry:
    """One line of a History page: when, who, what happened to which part of the configuration
    (``subject``: the object itself, or e.g. one of its hooks) and each field that changed."""

    when: Any
    who: Any
    action: str
    subject: str
    changes: list[Change] = field(default_factory=list)
    url: str = ""
    order: tuple[Any, ...] = ()


ACTIONS = {"+": "Created", "~": "Changed", "-": "Deleted"}


def _json_line(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def readable(value: Any) -> str:
    """A stored value as one line of text: empty as "—", yes/no, lists joined, flat objects as
    ``key: value`` pairs, anything deeper as compact JSON."""
    if value is None or value == "" or value == [] or value == {}:
        return EMPTY
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ", ".join(str(v) for v in value)
    if isinstance(value, list) and all(
        isinstance(v, dict) and set(v) == {"field", "op", "value"} for v in value
    ):
        return "; ".join(f"{v['field']} {v['op']} {readable(v['value'])}" for v in value)
    if isinstance(value, dict) and all(isinstance(v, str | int | float | bool) for v in value.values()):
        return "; ".join(f"{k}: {readable(v)}" for k, v in value.items())
    return _json_line(value)


def _field_of(model: type[models.Model], name: str) -> Any:
    try:
        return model._meta.get_field(name)
    except FieldDoesNotExist:
        return None


LABELS = {
    "params": "Parameters",
    "model_config_json": "Model configuration",
    "settings_json": "Settings",
    "builtin_tools": "Built-in tools",
}
"""Field names whose verbose names read as code, and what a History page calls them."""


def _label(model: type[models.Model], name: str) -> str:
    if name in LABELS:
        return LABELS[name]
    model_field = _field_of(model, name)
    return capfirst(str(getattr(model_field, "verbose_name", name) or name).replace("_", " "))


def _value(model: type[models.Model], name: str, value: Any) -> str:
    model_field = _field_of(model, name)
    if getattr(model_field, "many_to_many", False) and isinstance(value, list):
        return _related_names(model_field, value)
    if isinstance(value, models.Model) or type(value).__name__ == "DeletedObject":
        return str(value)
    choices = dict(getattr(model_field, "flatchoices", None) or ())
    if choices and not isinstance(value, list | dict) and value in choices:
        return str(choices[value])
    return readable(value)


def _related_names(model_field: Any, rows: list[Any]) -> str:
    """The names of an m2m change's targets (simple-history lists the through rows)."""
    target = model_field.related_model
    key = target._meta.model_name
    ids = [row.get(key) for row in rows if isinstance(row, dict)]
    found = {obj.pk: str(obj) for obj in target._default_manager.filter(pk__in=[i for i in ids if i])}
    return ", ".join(found.get(i, f"#{i}") for i in ids) or EMPTY


def record_changes(model: type[models.Model], newer: Any, older: Any) -> list[Change]:
    """What changed between two historical records of ``model``, field by field; an object's
    keys one by one (a model configuration reads ``Model — provider: scripted → openai``); the
    secrets only as "changed (not shown)"."""
    delta = newer.diff_against(older, foreign_keys_are_objs=True)
    changes: list[Change] = []
    for change in sorted(delta.changes, key=lambda c: c.field):
        label = _label(model, change.field)
        old, new = change.old, change.new
        if isinstance(old, dict) and isinstance(new, dict):
            for key in sorted(set(old) | set(new), key=str):
                if old.get(key) != new.get(key):
                    changes.append(Change(f"{label} — {key}", readable(old.get(key)), readable(new.get(key))))
            continue
        changes.append(Change(label, _value(model, change.field, old), _value(model, change.field, new)))
    secrets = secrets_change(newer, older)
    if secrets is not None:
        changes.append(Change(capfirst(secrets["field"]), secrets["old"], secrets["new"]))
    return changes


def record_values(model: type[models.Model], record: Any, fields: Iterable[str]) -> list[Change]:
    """The values ``record`` was created with (or held when deleted), for ``fields`` that hold one."""
    out = []
    for name in fields:
        value = getattr(record, name, None)
        if value in (None, "", [], {}):
            continue
        label = _label(model, name)
        if isinstance(value, dict):
            out += [Change(f"{label} — {key}", "", readable(item)) for key, item in value.items()]
        else:
            out.append(Change(label, "", _value(model, name, value)))
    return out


RelatedHistory = tuple[Callable[[Any], str], Any, tuple[str, ...]]
"""``(subject of a record, its historical records, fields listed when one is created)``."""


def history_entries(
    model: type[models.Model],
    records: Iterable[Any],
    *,
    subject: Callable[[Any], str],
    listed: tuple[str, ...] = (),
    version_url: Callable[[Any], str] | None = None,
) -> list[HistoryEntry]:
    """One :class:`HistoryEntry` per record (oldest first within each object), each change
    against the same object's previous record. A save that changed nothing is left out."""
    by_object: dict[Any, list[Any]] = {}
    for record in sorted(records, key=lambda r: (r.history_date, r.history_id)):
        by_object.setdefault(record.id, []).append(record)
    entries: list[HistoryEntry] = []
    for versions in by_object.values():
        previous = None
        for record in versions:
            kind = record.history_type
            if kind == "~" and previous is not None:
                changes = record_changes(model, record, previous)
                if not changes:
                    previous = record
                    continue
            elif kind in ("+", "-") and listed:
                changes = record_values(model, record, listed)
            else:
                changes = []
            entries.append(
                HistoryEntry(
                    when=record.history_date,
                    who=record.history_user,
                    action=ACTIONS.get(kind, kind),
                    subject=subject(record),
                    changes=changes,
                    url=version_url(record) if version_url else "",
                    order=(record.history_date, record.history_id),
                )
            )
            previous = record
    return entries


class ConfigHistoryAdmin(SimpleHistoryAdmin):
    """The admin's "History" page of a configuration: who changed which fields when, old and new
    values, and for the secrets only whether they changed. Reverting from the history is disabled
    (``SIMPLE_HISTORY_REVERT_DISABLED``): a version without its secrets must never be saved back.

    Parts of a configuration that keep a history of their own (an agent's hooks) are listed on the
    same page, in time order with the object's own changes: :meth:`related_history`."""

    object_history_list_template = "admin/config_history_list.html"

    def related_history(self, obj: Any) -> list[RelatedHistory]:
        """The histories of ``obj``'s parts to list with its own (none by default)."""
        return []

    def history_timeline(self, request: Any, obj: Any) -> list[HistoryEntry]:
        """Every change of ``obj`` and of its parts, newest first."""
        opts = self.model._meta
        records = self.model.history.filter(id=obj.pk).select_related("history_user")

        def version_url(record: Any) -> str:
            try:
                name = f"admin:{opts.app_label}_{opts.model_name}_simple_history"
                return reverse(name, args=[obj.pk, record.history_id])
            except NoReverseMatch:
                return ""

        entries = history_entries(
            self.model, records, subject=lambda r: capfirst(str(opts.verbose_name)), version_url=version_url
        )
        for subject, related, listed in self.related_history(obj):
            part = related.model.instance_type if hasattr(related.model, "instance_type") else None
            entries += history_entries(
                part or self.model, related.select_related("history_user"), subject=subject, listed=listed
            )
        return sorted(entries, key=lambda e: e.order, reverse=True)

    def _reachable(self, request: Any, object_id: str) -> bool:
        # simple-history looks objects up without the admin's queryset (and falls back on the
        # history of a missing one): the organisation scope must hold on these pages too.
        return self.get_queryset(request).filter(pk=unquote(object_id)).exists()

    def history_view(self, request: Any, object_id: str, extra_context: Any = None) -> Any:
        if not self._reachable(request, object_id):
            raise Http404("No such object.")
        obj = self.get_queryset(request).get(pk=unquote(object_id))
        paginator = Paginator(self.history_timeline(request, obj), self.history_list_per_page)
        timeline = paginator.get_page(request.GET.get("p"))
        context = {
            "timeline": timeline,
            "timeline_pages": paginator.get_elided_page_range(timeline.number),
            **(extra_context or {}),
        }
        return super().history_view(request, object_id, context)

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
