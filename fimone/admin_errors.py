"""Errors in the admin in an operator's words, on the field they belong to.

Django reports a violated database constraint by its name (``Constraint “approverpolicy_timeout_min”
is violated.``) or with the model's field labels ("Connector action with this Connector and Name
already exists."), at the top of the form. Every constraint an admin form can hit is listed in
:data:`CONSTRAINT_MESSAGES` with the field it concerns and a sentence; :class:`PlainErrorsFormMixin`
puts that sentence on that field instead. A test holds the list complete: a new constraint on a
model the admin edits needs its sentence here.

The mixin also keeps one error per problem: a model's ``clean()`` that repeats, about a field, what
the field itself already said is dropped (the field's own message is the one written for people).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import models
from django.forms.models import InlineForeignKeyField

CONSTRAINT_MESSAGES: dict[str, tuple[str, str]] = {
    # approvals
    "approverpolicy_timeout_min": ("timeout_seconds", "Timeout: at least 10 seconds."),
    "approverpolicy_quorum_min": ("approvals_required", "Approvals required: at least 1."),
    "approverpolicy_one_default_per_org": (
        "agent",
        "This organisation already has a default policy (the one without an agent): edit that one, "
        "or choose the agent this policy is for.",
    ),
    "approvals.ApproverPolicy.agent": ("agent", "This agent already has its own policy: edit that one."),
    "escalationtier_after_min": ("after_seconds", "After: at least 1 second."),
    "approverpolicy_grant_hours": ("grant_max_hours", "Longest standing approval: from 1 to 8,760 hours."),
    "approvalstage_quorum_min": ("approvals_required", "Approvals required: at least 1."),
    "approvalstage_timeout_min": ("timeout_seconds", "Timeout: at least 10 seconds, or empty."),
    # agents
    "tenancy.Organization.name": ("name", "An organisation with this name already exists."),
    "connector_unique_slug": ("slug", "A connector with this slug already exists in this organisation."),
    "action_unique_name": ("name", "An action with this name already exists for this connector."),
    "membership_unique_role": ("role", "This person already has this role in this organisation."),
    # channels
    "channelconfig_one_default": (
        "is_default",
        "This organisation already has a default channel: untick “default” on that one first.",
    ),
    "imidentity_unique_external": (
        "external_id",
        "This chat account is already linked to someone in this organisation.",
    ),
}
"""``constraint name`` (or ``app_label.Model.field`` for a field's ``unique=True``) → the field the
error goes on, and what it says."""


def constraint_keys(model: type[models.Model]) -> list[str]:
    """The keys of :data:`CONSTRAINT_MESSAGES` the rows of ``model`` can violate."""
    keys = [constraint.name for constraint in model._meta.constraints]
    keys += [
        f"{model._meta.label}.{field.name}"
        for field in model._meta.local_fields
        if field.unique and field.editable and not field.primary_key
    ]
    return keys


def _constraint_of(model: type[models.Model], error: ValidationError) -> str | None:
    """The key of the constraint ``error`` reports, if it reports one."""
    params = getattr(error, "params", None) or {}
    checked = params.get("unique_check") if isinstance(params, dict) else None
    message = str(getattr(error, "message", ""))
    for constraint in model._meta.constraints:
        fields = tuple(getattr(constraint, "fields", ()) or ())
        if checked is not None and fields and tuple(checked) == fields:
            return constraint.name
        if message and message == str(constraint.get_violation_error_message()):
            return constraint.name
    if checked is not None and len(checked) == 1:
        return f"{model._meta.label}.{checked[0]}"
    return None


def plain_errors(model: type[models.Model], errors: ValidationError, fields: Any) -> dict[str, list[Any]]:
    """``errors`` (as a model's ``full_clean`` raises them) by field, each constraint's error
    replaced by its sentence and moved to its field when the form has that field."""
    if hasattr(errors, "error_dict"):
        by_field = {name: list(errs) for name, errs in errors.error_dict.items()}
    else:
        by_field = {NON_FIELD_ERRORS: list(errors.error_list)}
    out: dict[str, list[Any]] = {}
    for name, errs in by_field.items():
        for error in errs:
            key = _constraint_of(model, error)
            if key is None or key not in CONSTRAINT_MESSAGES:
                out.setdefault(name, []).append(error)
                continue
            field, text = CONSTRAINT_MESSAGES[key]
            usable = field in fields and not isinstance(fields[field], InlineForeignKeyField)
            target = field if usable and not fields[field].disabled else NON_FIELD_ERRORS
            plain = ValidationError(text, code="constraint")
            if not any(str(e.message) == text for e in out.get(target, [])):
                out.setdefault(target, []).append(plain)
    return out


class PlainErrorsFormMixin:
    """For a model form of the admin: constraint errors in words on their field, and no second
    error about a field that already has one. Inline rows also check the constraints that involve
    the row's parent (Django leaves those to the database, which would answer with an error
    page)."""

    def _update_errors(self, errors: ValidationError) -> None:
        model = self._meta.model  # type: ignore[attr-defined]
        grouped = plain_errors(model, errors, self.fields)  # type: ignore[attr-defined]
        already = set(self._errors or {})  # type: ignore[attr-defined]
        kept = {
            name: errs for name, errs in grouped.items() if name == NON_FIELD_ERRORS or name not in already
        }
        if kept:
            super()._update_errors(ValidationError(kept))  # type: ignore[misc]

    def _post_clean(self) -> None:
        super()._post_clean()  # type: ignore[misc]
        parents = [name for name, f in self.fields.items() if isinstance(f, InlineForeignKeyField)]  # type: ignore[attr-defined]
        if not parents:
            return
        instance = self.instance  # type: ignore[attr-defined]
        exclude = self._get_validation_exclusions() - set(parents)  # type: ignore[attr-defined]
        for constraint in instance._meta.constraints:
            fields = set(getattr(constraint, "fields", ()) or ())
            if not fields & set(parents):
                continue
            try:
                constraint.validate(type(instance), instance, exclude=exclude)
            except ValidationError as exc:
                self._update_errors(exc)


def with_plain_errors(form_class: type[forms.BaseForm]) -> type[forms.BaseForm]:
    """``form_class`` with :class:`PlainErrorsFormMixin` (unchanged if it has it already, or is not
    a model form)."""
    if issubclass(form_class, PlainErrorsFormMixin) or not issubclass(form_class, forms.BaseModelForm):
        return form_class
    return type(form_class.__name__, (PlainErrorsFormMixin, form_class), {})


class PlainErrorsAdminMixin:
    """For a model admin or an inline: its forms are :func:`with_plain_errors`."""

    def get_form(self, request: Any, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)  # type: ignore[misc]
        return with_plain_errors(form)

    def get_formset(self, request: Any, obj: Any = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)  # type: ignore[misc]
        formset.form = with_plain_errors(formset.form)
        return formset
