"""The organisation scoping every admin of organisation-owned objects builds on, here and in the
admins of approvals, channels_im, workflows and evals.

Standard model permissions apply; on top of them a staff user who is not a superuser sees (and may
pick in foreign keys) only objects of the organisations where they are an operator or an admin
(auditors read their organisations' objects too; changes and deletions only where they operate or
administer). Records nobody edits by hand are read-only (:class:`ReadOnlyAdminMixin`).

This lives in agents, not in fimone beside the other shared admin helpers: it reads agents'
Membership and Role (and the organisation-owned models it scopes), and fimone's shared utilities
are the bottom layer, which may not import agents (``[tool.importlinter]`` in pyproject.toml).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import Field, ForeignKey, JSONField, ManyToManyField, Model, QuerySet
from django.forms import ModelChoiceField, ModelMultipleChoiceField
from django.http import HttpRequest

from agents.models import (
    Agent,
    Connector,
    ConnectorAction,
    ConnectorCallLog,
    Conversation,
    Run,
    RunEvent,
    ToolExecution,
)
from fimone.admin_errors import PlainErrorsAdminMixin
from fimone.forms import JSONFormField
from tenancy import selectors as tenancy_selectors
from tenancy.models import Membership, Organization, Role

User = get_user_model()

ORGANIZATION_LOOKUPS: dict[type[Model], str] = {
    Organization: "pk",
    Membership: "organization_id",
    Agent: "organization_id",
    Connector: "organization_id",
    ConnectorAction: "connector__organization_id",
    Conversation: "organization_id",
    Run: "agent__organization_id",
    RunEvent: "run__agent__organization_id",
    ToolExecution: "run__agent__organization_id",
    ConnectorCallLog: "organization_id",
}
"""For each organisation-owned model, the lookup from it to its organisation's id (single-valued)."""


ADMIN_VIEWER_ROLES: tuple[str, ...] = (*tenancy_selectors.ORG_MANAGER_ROLES, Role.AUDITOR)
"""Roles whose staff users see their organisation's objects in the admin (auditors read only)."""


def scope_to_managed_organizations(
    queryset: QuerySet[Any],
    request: HttpRequest,
    *,
    roles: tuple[str, ...] = tenancy_selectors.ORG_MANAGER_ROLES,
) -> QuerySet[Any]:
    """``queryset`` as a non-superuser staff user may see it: only objects of the organisations
    where they hold one of ``roles`` (by default: operator or admin; for users: the members of
    those organisations). Superusers see everything."""
    user = request.user
    if user.is_superuser:
        return queryset
    managed = tenancy_selectors.organization_ids_of(user=user, roles=roles)
    if queryset.model is User:
        members = Membership.objects.filter(organization_id__in=managed).values("user_id")
        return queryset.filter(pk__in=members)
    return queryset.filter(**{f"{ORGANIZATION_LOOKUPS[queryset.model]}__in": managed})


def _is_scoped(model: type[Model]) -> bool:
    return model is User or model in ORGANIZATION_LOOKUPS


class OrganizationScopedFieldsMixin(PlainErrorsAdminMixin):
    """Limits foreign-key and many-to-many choices to the staff user's managed organisations (and
    says what a violated constraint means, on its field: ``fimone.admin_errors``)."""

    unscoped_relations: tuple[str, ...] = ()
    """Relation fields whose choices are left unrestricted."""

    def _scope_choices(
        self, db_field: ForeignKey | ManyToManyField, request: HttpRequest, kwargs: dict[str, Any]
    ) -> None:
        related = db_field.related_model
        if db_field.name in self.unscoped_relations or not _is_scoped(related):
            return
        queryset = kwargs.get("queryset")
        if queryset is None:
            queryset = related._default_manager.all()
        kwargs["queryset"] = scope_to_managed_organizations(queryset, request)

    def formfield_for_dbfield(self, db_field: Field, request: HttpRequest, **kwargs: Any) -> Any:
        if isinstance(db_field, JSONField):
            kwargs.setdefault("form_class", JSONFormField)  # nested too deep: a field error, not a 500
        return super().formfield_for_dbfield(db_field, request, **kwargs)  # type: ignore[misc]

    def formfield_for_foreignkey(
        self, db_field: ForeignKey, request: HttpRequest, **kwargs: Any
    ) -> ModelChoiceField | None:
        self._scope_choices(db_field, request, kwargs)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]

    def formfield_for_manytomany(
        self, db_field: ManyToManyField, request: HttpRequest, **kwargs: Any
    ) -> ModelMultipleChoiceField | None:
        self._scope_choices(db_field, request, kwargs)
        return super().formfield_for_manytomany(db_field, request, **kwargs)  # type: ignore[misc]


def manages(request: HttpRequest, obj: Model) -> bool:
    """Whether the staff user operates or administers the organisation ``obj`` belongs to.
    Model permissions are global: an operator of one organisation who audits another must still
    only read the other's objects, so every change and deletion is checked here too."""
    if request.user.is_superuser:
        return True
    model = type(obj)
    return scope_to_managed_organizations(model._default_manager.filter(pk=obj.pk), request).exists()


class OrganizationScopedAdmin(OrganizationScopedFieldsMixin, admin.ModelAdmin):
    """A model admin whose listing and change pages hold only the staff user's organisations'
    objects (those they operate, administer or audit); changes and deletions only in the
    organisations they operate or administer."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return scope_to_managed_organizations(
            super().get_queryset(request), request, roles=ADMIN_VIEWER_ROLES
        )

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        allowed = super().has_change_permission(request, obj)
        return allowed and (obj is None or manages(request, obj))

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        allowed = super().has_delete_permission(request, obj)
        return allowed and (obj is None or manages(request, obj))


class ReadOnlyAdminMixin:
    """Records nobody edits by hand: no add, change or delete (viewing needs the view permission)."""

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class ManagedInlineMixin(PlainErrorsAdminMixin):
    """An inline editable only on objects of organisations the staff user operates or administers
    (its rows' constraint errors in words, on their field: ``fimone.admin_errors``)."""

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        allowed = super().has_add_permission(request, obj)  # type: ignore[misc]
        return allowed and (obj is None or manages(request, obj))

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        allowed = super().has_change_permission(request, obj)  # type: ignore[misc]
        return allowed and (obj is None or manages(request, obj))

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        allowed = super().has_delete_permission(request, obj)  # type: ignore[misc]
        return allowed and (obj is None or manages(request, obj))
