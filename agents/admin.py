"""The admin of organisations, agents, connectors, conversations and runs.

Rich but thin: listings select their relations, displays are ``@admin.display`` methods and
actions call services. Standard model permissions apply; on top of them a staff user who is not a
superuser sees (and may pick in foreign keys) only objects of the organisations where they are an
operator or an admin. Runs, their events and tool executions are read-only records; connector
secrets are write-only.

Nothing with history is deleted (DESIGN §1.9): organisations, agents and connectors have no delete
button or action here, for anyone; they have "Archive" / "Unarchive" actions instead, which call
the archiving services (and those check the staff user's role in the object's organisation).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import (
    Count,
    Field,
    ForeignKey,
    JSONField,
    ManyToManyField,
    Model,
    Q,
    QuerySet,
    URLField,
)
from django.forms import ModelChoiceField, ModelMultipleChoiceField
from django.http import Http404, HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse

from agents import invitations, roles, selectors, services
from agents.chain_trial import NO_RESULT, TrialError, agent_tool_specs, chain_trial
from agents.checks import API_KEY_MISPLACED, hook_chain_of, hooks_declaration
from agents.config_editor import BuiltinToolsField, ModelConfigField
from agents.hook_editor import (
    OWN_PREFIX,
    HookParamsField,
    ToolArgsField,
    chain_rows,
    chooses_tools,
    gate_reasons,
    hook_choices,
)
from agents.models import (
    Agent,
    Connector,
    ConnectorAction,
    ConnectorCallLog,
    Conversation,
    HookDeclaration,
    Invitation,
    Membership,
    Organization,
    Role,
    Run,
    RunEvent,
    ToolExecution,
)
from agents.services import ServiceError
from fimone.admin_errors import PlainErrorsAdminMixin
from fimone.forms import JSONFormField, WriteOnlySecretsForm, secrets_state
from fimone.history import ConfigHistoryAdmin
from fimone.humanize import duration_text
from fimone.parsers import loads as json_loads
from hooks.catalog import HookDeclarationError, parse_declaration

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


ADMIN_VIEWER_ROLES: tuple[str, ...] = (*selectors.ORG_MANAGER_ROLES, Role.AUDITOR)
"""Roles whose staff users see their organisation's objects in the admin (auditors read only)."""


def scope_to_managed_organizations(
    queryset: QuerySet[Any], request: HttpRequest, *, roles: tuple[str, ...] = selectors.ORG_MANAGER_ROLES
) -> QuerySet[Any]:
    """``queryset`` as a non-superuser staff user may see it: only objects of the organisations
    where they hold one of ``roles`` (by default: operator or admin; for users: the members of
    those organisations). Superusers see everything."""
    user = request.user
    if user.is_superuser:
        return queryset
    managed = selectors.organization_ids_of(user=user, roles=roles)
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


class ArchivableAdminMixin:
    """Archive / Unarchive actions instead of deletion. ``archive_service`` and
    ``unarchive_service`` are the services' names in ``agents.services``, called once per selected
    object with the staff user; each refusal is reported by name, never as an error page."""

    archive_service: str
    unarchive_service: str
    archive_fields = ("archived_at", "archived_by")

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_archive_permission(self, request: HttpRequest) -> bool:
        """Archiving changes the object: it needs the change permission (the service checks the role)."""
        opts = self.opts  # type: ignore[attr-defined]
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")

    @admin.display(description="archived", boolean=True, ordering="archived_at")
    def is_archived(self, obj: Model) -> bool:
        return obj.archived_at is not None  # type: ignore[attr-defined]

    @admin.action(description="Archive selected (history is kept)", permissions=["archive"])
    def archive_selected(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._apply(request, queryset, getattr(services, self.archive_service), "archived")

    @admin.action(description="Unarchive selected", permissions=["archive"])
    def unarchive_selected(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._apply(request, queryset, getattr(services, self.unarchive_service), "unarchived")

    def _apply(
        self, request: HttpRequest, queryset: QuerySet[Any], service: Callable[..., Any], done: str
    ) -> None:
        # The queryset is already limited to the staff user's organisations (get_queryset); the
        # service checks the role again and records who did it.
        changed: list[str] = []
        refused: list[str] = []
        for obj in queryset.order_by("pk"):
            try:
                service(**{self.opts.model_name: obj, "user": request.user})  # type: ignore[attr-defined]
            except ServiceError as exc:
                refused.append(f"{obj}: {exc.message}")
            else:
                changed.append(str(obj))
        if changed:
            self.message_user(  # type: ignore[attr-defined]
                request, f"{len(changed)} {done}: " + ", ".join(changed), messages.SUCCESS
            )
        if refused:
            self.message_user(  # type: ignore[attr-defined]
                request, f"Not {done}: " + "; ".join(refused), messages.WARNING
            )


class ReadOnlyAdminMixin:
    """Records nobody edits by hand: no add, change or delete (viewing needs the view permission)."""

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


# --- secrets bound to their address (DESIGN §1.14) ------------------------------------------------

SECRETS_BOUND_HELP = (
    " A stored secret is only sent to the address it was entered for ({address}): changing its "
    "scheme, host or port clears the stored secrets, unless you enter them again in the same save."
)


CONNECTOR_BASE_URL_HELP = (
    " Changing its scheme, host or port clears the stored secrets unless you enter them again."
)


class SecretsEntryFormMixin:
    """A write-only secrets form of a model whose secrets are bound to an address
    (``agents.models.SecretsBoundToAddress``): secrets typed in count as entered again, and the
    help texts say what changing the address does. ``secrets_address`` names the address."""

    secrets_address = "the base URL"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields[self.instance.secrets_field]  # type: ignore[attr-defined]
        field.help_text += SECRETS_BOUND_HELP.format(address=self.secrets_address)

    def _note_secrets_entered(self, value: Any) -> Any:
        typed = self.cleaned_data.get(self.instance.secrets_field)  # type: ignore[attr-defined]
        self.instance.secrets_entered = bool(str(typed or "").strip())  # type: ignore[attr-defined]
        return value


class SecretsClearedMessageMixin:
    """Says, after saving, that the stored secrets were cleared because the address changed."""

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)  # type: ignore[misc]
        if change and obj.secrets_cleared:
            self.message_user(  # type: ignore[attr-defined]
                request,
                f"“{obj}”: secrets cleared because the address changed. A stored secret is only sent "
                "to the address it was entered for: enter it again if the new address should get it.",
                messages.WARNING,
            )


# --- organisations --------------------------------------------------------------------------------


# --- hook declarations ----------------------------------------------------------------------------


class HookDeclarationForm(SecretsEntryFormMixin, forms.ModelForm):
    """One hook declaration as an operator edits it: the hook picked from the catalog (or a kind
    of their own), its parameters as inputs built from the hook's parameter schema
    (:mod:`agents.hook_editor`), matcher, priority, timeout, ``on_error`` and enabled.

    The http signing secret is write-only: never rendered, blank keeps the stored one. A post
    without ``hook`` (the name and kind typed, parameters as JSON) is still read as before."""

    hook = forms.ChoiceField(
        required=False,
        help_text="Catalog hooks take the parameters below. Your own hooks run code: creating or "
        "changing one needs the 'Can create or change command, python and http hooks' permission.",
    )
    params = HookParamsField(label="Parameters")
    secret = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="http hooks: the HMAC-SHA256 signing secret (16+ characters). Blank keeps the current one.",
    )

    class Meta:
        model = HookDeclaration
        fields = (
            "hook",
            "name",
            "kind",
            "point",
            "matcher",
            "priority",
            "timeout",
            "on_error",
            "enabled",
            "params",
            "secret",
        )
        widgets = {"kind": forms.HiddenInput}
        labels = {"name": "Label", "point": "Event"}
        help_texts = {
            "name": "Your own hooks: a name for the chain and the run's trace.",
            "point": "Your own hooks: when it runs.",
            "matcher": 'The tools it runs for: empty or "*" for all, a glob ("oa__*"), or '
            '"re:<regex>". Catalog hooks with a Tools parameter choose their tools there instead, '
            "so they have no matcher.",
        }

    secrets_address = "the http hook's url"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initial.pop("secret", None)
        self.fields["hook"].choices = hook_choices()
        self.fields["name"].required = False
        instance = self.instance
        if instance.pk is not None:
            self.initial["hook"] = (
                instance.name if instance.kind == "class" else f"{OWN_PREFIX}{instance.kind}"
            )
        picked = self.data.get(self.add_prefix("hook")) if self.is_bound else self.initial.get("hook")
        self.fields["params"].widget.picked = picked or ""

    def clean_secret(self) -> str | None:
        text = self.cleaned_data.get("secret") or ""
        if not text:
            return self.instance.secret if self.instance.pk else None
        return self._note_secrets_entered(text)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        hook = cleaned.get("hook") or ""
        if hook.startswith(OWN_PREFIX):
            cleaned["kind"] = hook[len(OWN_PREFIX) :]
        elif hook:
            cleaned["kind"], cleaned["name"] = "class", hook
            cleaned["point"] = ""  # a catalog hook's event is its own
        elif self.add_prefix("hook") in self.data and "hook" not in self.errors:
            self.add_error("hook", "Pick a hook from the catalog, or one of your own kinds.")
            return cleaned
        if not cleaned.get("name") and "hook" not in self.errors:
            self.add_error(
                "name", "Give your hook a label: it names the hook in the chain and the run's trace."
            )
        matcher = (cleaned.get("matcher") or "").strip()
        if (
            cleaned.get("kind") == "class"
            and chooses_tools(cleaned.get("name") or "")
            and matcher not in ("", "*")
            and matcher != (self.initial.get("matcher") or "")
        ):
            # One hook, one place to choose tools: its Tools parameter.
            self.add_error(
                "matcher",
                "This hook chooses its tools in its Tools parameter: put them there and leave the "
                "matcher empty.",
            )
        if cleaned.get("kind") != "http":
            cleaned["secret"] = None
        return cleaned


HOOK_HISTORY_FIELDS = ("point", "matcher", "params", "priority", "timeout", "on_error", "enabled")
"""What a History page lists of a hook when it is added or removed."""


def _hook_subject(record: Any) -> str:
    kind = "" if record.kind == "class" else f" ({record.get_kind_display()} hook)"
    return f"hook {record.name}{kind}"


class HookDeclarationFormSet(forms.BaseInlineFormSet):
    """Sets each row's organisation from the page's object and refuses any change to a command,
    python or http hook by someone without ``agents.manage_code_hooks`` (added, changed or
    deleted; turning a row into or out of such a kind included)."""

    request: HttpRequest

    def _construct_form(self, i: int, **kwargs: Any) -> Any:
        form = super()._construct_form(i, **kwargs)
        parent = self.instance
        form.instance.organization_id = (
            parent.pk if isinstance(parent, Organization) else parent.organization_id
        )
        return form

    def clean(self) -> None:
        super().clean()
        from agents.hook_declarations import check_may_change_kinds

        kinds: set[str] = set()
        for form in self.forms:
            if not form.has_changed() and form not in self.deleted_forms:
                continue
            kinds.add(form.cleaned_data.get("kind") or "")
            if form.instance.pk is not None:
                kinds.add(form.initial.get("kind") or "")
        try:
            check_may_change_kinds(actor=self.request.user, kinds=kinds)
        except ServiceError as exc:
            raise forms.ValidationError(exc.message) from None


class HookDeclarationInlineBase(PlainErrorsAdminMixin, admin.StackedInline):
    model = HookDeclaration
    form = HookDeclarationForm
    formset = HookDeclarationFormSet
    extra = 0
    show_change_link = False
    fieldsets = (
        (
            None,
            {
                "fields": (
                    ("hook", "enabled"),
                    ("name", "point"),
                    "params",
                    ("matcher", "priority", "timeout", "on_error"),
                    "secret",
                    "kind",
                )
            },
        ),
    )

    @admin.display(description="hook")
    def hook(self, obj: HookDeclaration) -> str:
        """The hook a row holds, as a view-only page shows it."""
        return obj.name if obj.kind == "class" else f"{obj.name} ({obj.get_kind_display()})"

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)
        formset.request = request
        return formset

    def formfield_for_dbfield(self, db_field: Field, request: HttpRequest, **kwargs: Any) -> Any:
        if isinstance(db_field, JSONField):
            kwargs["form_class"] = JSONFormField
        return super().formfield_for_dbfield(db_field, request, **kwargs)


class AgentHookInline(HookDeclarationInlineBase):
    """The agent's own hooks. Its organisation's enforced hooks run too, after these (the last word)."""

    fk_name = "agent"
    verbose_name = "hook"
    verbose_name_plural = "hooks (the organisation's enforced hooks also run, first)"


class EnforcedHookInline(HookDeclarationInlineBase):
    """Hooks the organisation enforces on every one of its agents."""

    fk_name = "organization"
    verbose_name = "enforced hook"
    verbose_name_plural = "enforced hooks (run for every agent after its own hooks: the last word)"

    def get_queryset(self, request: HttpRequest) -> QuerySet[HookDeclaration]:
        return super().get_queryset(request).filter(agent__isnull=True)

    def _may_manage(self, request: HttpRequest, obj: Organization | None) -> bool:
        if request.user.is_superuser:
            return True
        return (
            obj is not None
            and Membership.objects.filter(user=request.user, organization=obj, role=Role.ADMIN).exists()
        )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_manage(request, obj) and super().has_add_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_manage(request, obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_manage(request, obj) and super().has_delete_permission(request, obj)


def _row_user(form: Any) -> Any:
    """The user a membership row is about (posted, or the stored one when the field is read-only)."""
    user = form.cleaned_data.get("user")
    if user is None and form.instance.user_id is not None:
        user = form.instance.user
    return user


class MembershipFormSet(forms.BaseInlineFormSet):
    """Refuses a save that would leave the organisation without an active admin (the last admin
    demoted or removed, themselves included), on the row that would do it."""

    def clean(self) -> None:
        super().clean()
        organization = self.instance
        if organization.pk is None or any(self.errors):
            return
        dropped: list[tuple[int, Any]] = []
        for form in self.forms:
            membership = form.instance
            if membership.pk is None or form.initial.get("role") != Role.ADMIN:
                continue
            stays = form.cleaned_data.get("role") == Role.ADMIN and (
                form.cleaned_data.get("user") in (None, membership.user)
            )
            if form in self.deleted_forms or not stays:
                dropped.append((membership.pk, form))
        added = [
            form
            for form in self.forms
            if form not in self.deleted_forms
            and form.cleaned_data.get("role") == Role.ADMIN
            and form.initial.get("role") != Role.ADMIN
            and getattr(_row_user(form), "is_active", False)
        ]
        if not dropped or added:
            return
        if roles.leaves_no_admin(
            organization_id=organization.pk, dropped_memberships=[pk for pk, _ in dropped]
        ):
            message = roles.last_admin_message(organization)
            demoted = [form for _pk, form in dropped if form not in self.deleted_forms]
            for form in demoted:
                form.add_error("role", message)
            if len(demoted) < len(dropped):  # a row marked for deletion shows no errors of its own
                raise forms.ValidationError(message)


class MembershipInline(OrganizationScopedFieldsMixin, admin.TabularInline):
    """Members and their roles. Joining an organisation takes the person's consent: organisation
    admins invite (:class:`InvitationAdmin`) and change the roles of existing members; only a
    superuser adds a user directly or changes whose membership a row is. The last active admin
    of an organisation is neither demoted nor removed (:class:`MembershipFormSet`)."""

    model = Membership
    formset = MembershipFormSet
    extra = 0
    fields = ("user", "role")
    raw_id_fields = ("user",)
    # A superuser may add anyone, so users are picked by id rather than restricted to the
    # organisation's current members.
    unscoped_relations = ("user",)

    # Roles decide who may approve and who may configure: only an organisation admin (or a
    # superuser) grants them, so an operator cannot promote themselves.
    def _may_grant(self, request: HttpRequest, obj: Organization | None) -> bool:
        if request.user.is_superuser:
            return True
        if obj is None:
            return False
        return Membership.objects.filter(user=request.user, organization=obj, role=Role.ADMIN).exists()

    def get_readonly_fields(self, request: HttpRequest, obj: Organization | None = None) -> Any:
        return () if request.user.is_superuser else ("user",)

    def has_add_permission(self, request: HttpRequest, obj: Organization | None = None) -> bool:
        return request.user.is_superuser and super().has_add_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Organization | None = None) -> bool:
        return self._may_grant(request, obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Organization | None = None) -> bool:
        return self._may_grant(request, obj) and super().has_delete_permission(request, obj)


@admin.register(Organization)
class OrganizationAdmin(ArchivableAdminMixin, OrganizationScopedAdmin, ConfigHistoryAdmin):
    """Archiving an organisation (its admins, or a superuser) stops all its agents from running."""

    list_display = ("name", "read_only", "is_archived", "member_count", "agent_count", "created_at")
    list_filter = ("read_only", ("archived_at", admin.EmptyFieldListFilter))
    search_fields = ("name",)
    fields = ("name", "read_only", "archived_at", "archived_by")
    readonly_fields = ArchivableAdminMixin.archive_fields
    inlines = (MembershipInline, EnforcedHookInline)
    actions = ("archive_selected", "unarchive_selected")
    archive_service, unarchive_service = "organization_archive", "organization_unarchive"

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        """Membership rows changed here: their users' role groups and staff flag follow."""
        if formset.model is not Membership:  # the enforced hooks' rows
            super().save_formset(request, form, formset, change)
            return
        touched = {f.instance.user_id for f in formset.forms if f.instance.user_id is not None}
        super().save_formset(request, form, formset, change)
        for user in User.objects.filter(pk__in=touched):
            roles.user_roles_sync(user=user)

    def response_change(self, request: HttpRequest, obj: Organization) -> Any:
        """Someone who changed their own roles may no longer manage the organisation, or use the
        admin at all: they are told what they are now and sent where they still belong, instead
        of to a page that would refuse them."""
        from django.shortcuts import redirect

        me = User.objects.get(pk=request.user.pk)
        if me.is_superuser or roles.may_administer(user=me, organization_id=obj.pk):
            return super().response_change(request, obj)
        held = sorted(Membership.objects.filter(user=me, organization=obj).values_list("role", flat=True))
        now = ", ".join(Role(r).label.lower() for r in held) or "no longer a member"
        self.message_user(
            request, f"Saved. Your roles in {obj} changed: you are now {now}.", messages.WARNING
        )
        return redirect("admin:index" if me.is_staff else "/")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Organization]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                _members=Count("memberships__user", distinct=True), _agents=Count("agents", distinct=True)
            )
        )

    def related_history(self, obj: Organization) -> list[Any]:
        """The hooks the organisation enforces are historied on their own: listed here too."""
        enforced = HookDeclaration.history.filter(organization_id=obj.pk, agent_id__isnull=True)
        return [(_hook_subject, enforced, HOOK_HISTORY_FIELDS)]

    @admin.display(description="members", ordering="_members")
    def member_count(self, obj: Organization) -> int:
        return obj._members  # type: ignore[attr-defined]

    @admin.display(description="agents", ordering="_agents")
    def agent_count(self, obj: Organization) -> int:
        return obj._agents  # type: ignore[attr-defined]


class LastAdminGuardMixin:
    """For a user's form: refuses to deactivate the only active admin of an organisation."""

    def clean_is_active(self) -> bool:
        active = self.cleaned_data.get("is_active")  # type: ignore[attr-defined]
        instance = self.instance  # type: ignore[attr-defined]
        if instance.pk is not None and instance.is_active and not active:
            alone = roles.organizations_only_administered_by(user=instance)
            if alone:
                raise forms.ValidationError(roles.last_admin_message(", ".join(str(o) for o in alone)))
        return bool(active)


if admin.site.is_registered(User):
    from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin

    admin.site.unregister(User)

    @admin.register(User)
    class UserAdmin(DjangoUserAdmin):
        """Django's user admin (superusers only), which keeps every organisation an admin: the
        only active admin of one is neither deactivated nor deleted."""

        def get_form(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
            form = super().get_form(request, obj, **kwargs)
            if obj is None:
                return form
            return type(form.__name__, (LastAdminGuardMixin, form), {})

        def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
            if obj is not None and roles.organizations_only_administered_by(user=obj):
                return False
            return super().has_delete_permission(request, obj)

        def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
            kept = [user for user in queryset if roles.organizations_only_administered_by(user=user)]
            if kept:
                names = ", ".join(str(user) for user in kept)
                self.message_user(
                    request,
                    f"Not deleted: {names}, the only admin of an organisation. Make someone else an "
                    "admin first.",
                    messages.ERROR,
                )
            super().delete_queryset(request, queryset.exclude(pk__in=[user.pk for user in kept]))


class InvitationAdminForm(forms.ModelForm):
    class Meta:
        model = Invitation
        fields = ("organization", "invited_user", "email", "role")


@admin.register(Invitation)
class InvitationAdmin(PlainErrorsAdminMixin, admin.ModelAdmin):
    """Organisation admins invite existing users (or e-mail addresses) to their organisation; the
    link to pass on is shown once, when the invitation is saved. Invitations are not edited:
    delete one to revoke it."""

    form = InvitationAdminForm
    list_display = ("invitee", "organization", "role", "invited_by", "state", "created_at")
    list_select_related = ("organization", "invited_user", "invited_by", "accepted_by")
    list_filter = ("role",)
    search_fields = ("email", "invited_user__username", "organization__name")
    raw_id_fields = ("invited_user",)
    readonly_fields = ("invited_by", "created_at", "expires_at", "accepted_at", "accepted_by")

    @admin.display(description="invitee", ordering="email")
    def invitee(self, obj: Invitation) -> str:
        return str(obj.invited_user or obj.email)

    @admin.display(description="state")
    def state(self, obj: Invitation) -> str:
        from django.utils import timezone

        if obj.accepted_at is not None:
            return f"accepted by {obj.accepted_by or 'a former user'}"
        if obj.expires_at <= timezone.now():
            return "expired"
        return f"waiting (until {obj.expires_at:%Y-%m-%d %H:%M} UTC)"

    def _invitable(self, request: HttpRequest) -> QuerySet[Organization]:
        organizations = Organization.objects.all()
        if request.user.is_superuser:
            return organizations
        return organizations.filter(
            pk__in=selectors.organization_ids_of(user=request.user, roles=(Role.ADMIN,))
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Invitation]:
        return super().get_queryset(request).filter(organization__in=self._invitable(request))

    def get_fields(self, request: HttpRequest, obj: Invitation | None = None) -> Any:
        fields = ("organization", "invited_user", "email", "role")
        return fields if obj is None else (*fields, *self.readonly_fields)

    def formfield_for_foreignkey(self, db_field: ForeignKey, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "organization":
            kwargs["queryset"] = self._invitable(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_change_permission(self, request: HttpRequest, obj: Invitation | None = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Invitation, form: Any, change: bool) -> None:
        made = invitations.invitation_create(
            organization=obj.organization,
            invited_by=request.user,
            role=obj.role,
            invited_user=obj.invited_user,
            email=obj.email,
            base_url=invitations.public_base_url(request),
        )
        invitation = made.invitation
        for field in Invitation._meta.concrete_fields:  # the admin goes on with ``obj``
            setattr(obj, field.attname, getattr(invitation, field.attname))
        obj._state.adding = False
        sent = f"It was sent by e-mail to {made.emailed_to}. " if made.emailed_to else ""
        self.message_user(
            request,
            f"{sent}The link is shown only once, here, to pass on yourself if need be; it works "
            f"until {invitation.expires_at:%Y-%m-%d %H:%M} UTC: {made.link}",
            messages.SUCCESS,
        )


# --- agents ---------------------------------------------------------------------------------------


class AgentAdminForm(SecretsEntryFormMixin, WriteOnlySecretsForm):
    """A provider key typed into the model config is refused, and taken out of the text the page
    shows back (the config field re-renders what was typed). The key is bound to the model
    endpoint it was entered for (``base_url``, or the platform's without one)."""

    secrets_example = '{"api_key": "sk-…"}'
    secrets_address = "the model config's base_url, or the platform's endpoint without one"

    model_config_json = ModelConfigField(
        label="Settings",
        required=False,
        help_text="The model that answers, and how it is called. Saved with the agent; a "
        "configuration with which the agent could not run is refused.",
    )
    builtin_tools = BuiltinToolsField(
        label="Built-in tools",
        required=False,
        help_text="Tools that run inside the platform and reach nothing outside it.",
    )

    class Meta:
        model = Agent
        fields = "__all__"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_in_config = False
        if self.is_bound:
            self.data = self.data.copy()
            field = self.add_prefix("model_config_json")
            for name in (field, f"{field}__advanced", f"initial-{field}"):
                redacted = _without_api_key(self.data.get(name))
                if redacted is not None:
                    self.data[name] = redacted
                    self.key_in_config = self.key_in_config or name != f"initial-{field}"

    def clean_model_config_json(self) -> Any:
        if self.key_in_config:
            raise forms.ValidationError(API_KEY_MISPLACED)
        return self.cleaned_data.get("model_config_json")

    def clean_secrets(self) -> dict[str, Any] | None:
        return self._note_secrets_entered(super().clean_secrets())

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        delegates = cleaned.get("delegates")
        organization = cleaned.get("organization")
        organization_id = organization.pk if organization is not None else self.instance.organization_id
        if delegates and organization_id is not None:
            # call_agent only reaches agents of the agent's own organisation (DESIGN §1.11).
            if any(other.organization_id != organization_id for other in delegates):
                self.add_error("delegates", "An agent may only call agents of its own organisation.")
            elif self.instance.pk is not None and any(other.pk == self.instance.pk for other in delegates):
                self.add_error("delegates", "An agent cannot call itself.")
        return cleaned


def _without_api_key(text: Any) -> str | None:
    """``text`` (a JSON object) without its ``api_key``, or ``None`` if it has none."""
    try:
        value = json_loads(text) if isinstance(text, str) else None
    except ValueError:  # InvalidJSON, nested too deep included: the field itself reports it
        return None
    if not isinstance(value, dict) or "api_key" not in value:
        return None
    value.pop("api_key")
    return json.dumps(value)


class TryChainForm(forms.Form):
    """A call to try: one of the agent's tools and its arguments, typed into inputs built from the
    tool's JSON schema (or as a JSON object), or a recent call of the agent, whose tool and
    arguments are then used; optionally a sample result."""

    recent_call = forms.ChoiceField(required=False, label="Or a recent call")
    tool_name = forms.ChoiceField(required=False, label="Tool")
    arguments = ToolArgsField(label="Arguments")
    sample_result = forms.CharField(
        required=False,
        label="Sample result (optional)",
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60, "spellcheck": "false"}),
        help_text="What the tool might return, to try the PostToolUse hooks on: JSON, or plain text.",
    )

    def __init__(
        self, *args: Any, tools: dict[str, Any], recent: list[dict[str, Any]], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.recent = {str(call["pk"]): call for call in recent}
        self.fields["tool_name"].choices = [
            ("", "— pick a tool —"),
            *((name, f"{spec.display} ({name})") for name, spec in tools.items()),
        ]
        self.fields["arguments"].widget.tools = tools
        self.fields["recent_call"].choices = [("", "— none —")] + [
            (
                str(call["pk"]),
                f"{call['started_at']:%Y-%m-%d %H:%M} · {call['tool_name']} "
                f"{json.dumps(call['args'], ensure_ascii=False)[:80]}",
            )
            for call in recent
        ]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        call = self.recent.get(cleaned.get("recent_call") or "")
        if call is not None:
            cleaned["tool_name"], cleaned["tool_args"] = call["tool_name"], call["args"]
            self.errors.pop("arguments", None)  # the recent call's arguments are used
        else:
            if not cleaned.get("tool_name"):
                self.add_error("tool_name", "Pick a tool, or a recent call.")
            cleaned["tool_args"] = cleaned.get("arguments")
        text = cleaned.get("sample_result") or ""
        if not text.strip():
            cleaned["sample_result"] = NO_RESULT
        else:
            try:
                cleaned["sample_result"] = json_loads(text)
            except ValueError:  # plain text is a result too
                cleaned["sample_result"] = text
        return cleaned


def delegation_help() -> str:
    """The Delegation section's text, with the nesting limit this deployment sets."""
    from django.conf import settings

    depth = settings.AGENT_DELEGATION_MAX_DEPTH
    return (
        "The agents chosen here may be called by this one through its call_agent tool. Each runs "
        "as a child run with its own hooks and its own confirmation settings. Calls nest at most "
        f"{depth} deep (a limit this deployment sets) and never back up the chain of callers."
    )


@admin.register(Agent)
class AgentAdmin(
    SecretsClearedMessageMixin, ArchivableAdminMixin, OrganizationScopedAdmin, ConfigHistoryAdmin
):
    """The form validates ``model_config_json`` (provider, script, hooks), ``secrets`` and
    ``builtin_tools`` through ``Agent.clean()`` → ``check_agent_config``, so an agent that could
    not run is refused. The provider's API key lives in the write-only, encrypted ``secrets``.
    Archiving an agent (operators) stops it from running and ends its runs in flight."""

    form = AgentAdminForm

    list_display = (
        "name",
        "organization",
        "owner",
        "engine",
        "provider",
        "declared_hooks",
        "is_archived",
        "created_at",
    )
    list_select_related = ("organization", "owner")
    list_filter = (
        "engine",
        ("archived_at", admin.EmptyFieldListFilter),
        ("organization", admin.RelatedOnlyFieldListFilter),
    )
    search_fields = ("name", "organization__name", "owner__username")
    filter_horizontal = ("actions", "delegates")
    inlines = (AgentHookInline,)
    fieldsets = (
        (None, {"fields": ("organization", "owner", "name", "instructions", "engine")}),
        ("Language model", {"fields": ("model_config_json", "secrets_state", "secrets", "max_iterations")}),
        ("Tools", {"fields": ("actions", "builtin_tools", "require_confirmation_for_all")}),
        ("Delegation", {"fields": ("delegates",)}),
        ("Archive", {"fields": ArchivableAdminMixin.archive_fields}),
    )
    readonly_fields = ("secrets_state", *ArchivableAdminMixin.archive_fields)
    actions = ("archive_selected", "unarchive_selected")
    archive_service, unarchive_service = "agent_archive", "agent_unarchive"

    def get_fieldsets(self, request: HttpRequest, obj: Agent | None = None) -> Any:
        fieldsets = [
            (name, {**options, "description": delegation_help()} if name == "Delegation" else options)
            for name, options in super().get_fieldsets(request, obj)
        ]
        if obj is None or self.has_change_permission(request, obj):
            return fieldsets
        # A view-only page renders every field as text: leave the secrets out.
        return [
            (name, {**options, "fields": tuple(f for f in options["fields"] if f != "secrets")})
            for name, options in fieldsets
        ]

    # Owning an agent makes one an approver of its calls (policy ``allow_agent_owner``), so who owns
    # an agent is an organisation admin's call, like granting a role. Operators see the owner of
    # an existing agent read-only (a posted value is ignored) and may only make themselves the
    # owner of an agent they create, which is also the default.
    def _may_choose_owner(self, request: HttpRequest, organization_id: int | None) -> bool:
        if request.user.is_superuser:
            return True
        return Membership.objects.filter(
            user=request.user, organization_id=organization_id, role=Role.ADMIN
        ).exists()

    def get_readonly_fields(self, request: HttpRequest, obj: Agent | None = None) -> Any:
        fields = tuple(super().get_readonly_fields(request, obj))
        if obj is not None and not self._may_choose_owner(request, obj.organization_id):
            return (*fields, "owner")
        return fields

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        return {"owner": request.user.pk, **super().get_changeform_initial_data(request)}

    def get_form(
        self, request: HttpRequest, obj: Agent | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        if obj is not None:
            return form
        may_choose_owner = self._may_choose_owner

        class NewAgentForm(form):  # type: ignore[valid-type,misc]
            def clean(self) -> dict[str, Any]:
                cleaned = super().clean()
                organization, owner = cleaned.get("organization"), cleaned.get("owner")
                if (
                    organization is not None
                    and owner is not None
                    and owner.pk != request.user.pk
                    and not may_choose_owner(request, organization.pk)
                ):
                    self.add_error(
                        "owner",
                        "Only an organisation admin may make someone else the owner of an agent: "
                        "you may only own the agents you create.",
                    )
                return cleaned

        return NewAgentForm

    @admin.display(description="stored secrets")
    def secrets_state(self, obj: Agent) -> str:
        return secrets_state(obj.secrets) if obj.pk is not None else "—"

    @admin.display(description="provider")
    def provider(self, obj: Agent) -> str:
        config = obj.model_config_json
        return str(config.get("provider", "scripted")) if isinstance(config, dict) else "—"

    @admin.display(description="hooks")
    def declared_hooks(self, obj: Agent) -> str:
        try:
            names = [name for name, _params in parse_declaration(hooks_declaration(obj.model_config_json))]
        except HookDeclarationError:
            return "invalid declaration"
        rows = [row.name for row in obj.hook_declarations.all() if row.enabled]
        return ", ".join([*rows, *names]) or "—"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Agent]:
        return super().get_queryset(request).prefetch_related("hook_declarations")

    def related_history(self, obj: Agent) -> list[Any]:
        """The agent's hooks are historied on their own: their changes are listed here too."""
        return [(_hook_subject, HookDeclaration.history.filter(agent_id=obj.pk), HOOK_HISTORY_FIELDS)]

    # --- the effective chain and "Try this chain" -------------------------------------------------

    def get_urls(self) -> list[Any]:
        from django.urls import path

        trial = self.admin_site.admin_view(self.try_chain_view)
        return [
            path("<path:object_id>/try-chain/", trial, name="agents_agent_try_chain"),
            *super().get_urls(),
        ]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> Any:
        agent = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if agent is not None and self.has_view_or_change_permission(request, agent):
            context.update(self._chain_context(agent))
            if manages(request, agent):
                context["try_chain_url"] = reverse("admin:agents_agent_try_chain", args=[agent.pk])
        return super().change_view(request, object_id, form_url, extra_context=context)

    @staticmethod
    def _chain_context(agent: Agent) -> dict[str, Any]:
        """The agent's effective chain as a new run would keep it (the engine's own builder)."""
        chain = hook_chain_of(agent)
        if "error" in chain:
            return {"chain_error": chain["error"], "chain_rows": []}
        disabled = list(
            HookDeclaration.objects.filter(organization_id=agent.organization_id, enabled=False)
            .filter(Q(agent=agent) | Q(agent__isnull=True))
            .values_list("name", flat=True)
        )
        rows = chain_rows(chain)
        return {
            "chain_rows": rows,
            "chain_error": None,
            "chain_disabled": disabled,
            "gate_reasons": gate_reasons(agent, rows),
        }

    def try_chain_view(self, request: HttpRequest, object_id: str) -> Any:
        """Try the agent's chain on one call without running the tool (``agents.chain_trial``).
        Operators and admins of the agent's organisation only; another organisation's agent is
        not found (404); an auditor of it may read the chain on the agent page, not try it."""
        agent = self.get_object(request, object_id)
        if agent is None or not self.has_view_or_change_permission(request, agent):
            raise Http404("No such agent.")
        if not manages(request, agent):
            raise PermissionDenied("Only the agent's operators may try its chain.")
        recent = list(
            ToolExecution.objects.filter(run__agent=agent)
            .order_by("-started_at", "-pk")
            .values("pk", "tool_name", "args", "started_at")[:20]
        )
        form = TryChainForm(request.POST or None, tools=agent_tool_specs(agent), recent=recent)
        report = None
        if request.method == "POST" and form.is_valid():
            try:
                report = chain_trial(
                    agent=agent,
                    user=request.user,
                    tool_name=form.cleaned_data["tool_name"],
                    tool_args=form.cleaned_data["tool_args"],
                    sample_result=form.cleaned_data["sample_result"],
                )
            except TrialError as exc:
                form.add_error(None, str(exc))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Try the hook chain of {agent.name}",
            "agent": agent,
            "original": agent,
            "form": form,
            "report": report,
            "has_view_permission": True,
            **self._chain_context(agent),
        }
        return TemplateResponse(request, "admin/agents/agent/try_chain.html", context)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        # The JSON form (model_config_json.hooks.class_hooks) is still accepted: it becomes rows.
        from agents.hook_declarations import hook_declarations_adopt_config

        hook_declarations_adopt_config(agent=form.instance)


# --- connectors -----------------------------------------------------------------------------------


URL_FORMFIELD = {"assume_scheme": "https"}
"""A base URL typed without a scheme is taken as https (Django 6's default, chosen now)."""


def _connector_formfield(db_field: Field, **kwargs: Any) -> forms.Field | None:
    if isinstance(db_field, URLField):
        kwargs.update(URL_FORMFIELD)
    return db_field.formfield(**kwargs)


class ConnectorAdminForm(SecretsEntryFormMixin, WriteOnlySecretsForm):
    """An HTTP connector's secrets are bound to its base URL's origin; a database connector's DSN
    is its own address (it changes only by entering the secrets again)."""

    secrets_example = (
        '{"headers": {"Authorization": "Bearer …"}} or '
        '{"dsn": "postgres://app:…@db/shop", "read_dsn": "postgres://reader:…@db/shop"}'
    )

    class Meta:
        model = Connector
        fields = ("organization", "slug", "name", "kind", "base_url", "secrets", "timeout_seconds")
        formfield_callback = _connector_formfield

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "base_url" in self.fields:
            self.fields["base_url"].help_text += CONNECTOR_BASE_URL_HELP

    def clean_secrets(self) -> dict[str, Any] | None:
        return self._note_secrets_entered(super().clean_secrets())


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


CONTEXT_FIELD_RE = re.compile(r"^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*$")
"""A field of a context action's answer: a key, or a dotted path into nested objects."""


class ConnectorActionForm(forms.ModelForm):
    """A connector action as operators edit it: ``context_fields`` typed as a comma-separated list
    ("vendor, description, amount") rather than JSON."""

    context_fields = forms.CharField(
        required=False,
        label="Fields approvers see",
        help_text="Fields of the context action's answer, in order, separated by commas, e.g. "
        '"vendor, description, amount, currency" (a dotted path reads a nested field). Empty: '
        "approvers see the call's arguments.",
        widget=forms.TextInput(attrs={"size": 50}),
    )

    class Meta:
        model = ConnectorAction
        fields = (
            "name",
            "display_name",
            "method",
            "path_template",
            "requires_confirmation",
            "is_write",
            "description",
            "parameters_schema",
            "context_action",
            "context_fields",
        )
        widgets = {
            "description": forms.Textarea(attrs={"rows": 3, "cols": 60}),
            "path_template": forms.TextInput(attrs={"size": 40}),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stored = self.instance.context_fields if self.instance.pk else []
        if isinstance(stored, list) and "context_fields" in self.fields:
            self.initial["context_fields"] = ", ".join(str(name) for name in stored)

    def clean_context_fields(self) -> list[str]:
        text = (self.cleaned_data.get("context_fields") or "").strip()
        if text.startswith("["):  # pasted as JSON, the way the field is stored
            try:
                parsed = json_loads(text)
            except ValueError:
                parsed = None
            if not isinstance(parsed, list) or not all(isinstance(name, str) for name in parsed):
                raise forms.ValidationError('Write the fields separated by commas: "vendor, amount".')
            text = ", ".join(parsed)
        names = [name.strip() for name in text.split(",")]
        names = [name for name in names if name]
        bad = [name for name in names if not CONTEXT_FIELD_RE.match(name)]
        if bad:
            raise forms.ValidationError(
                f"Not a field name: {', '.join(bad)}. Use names such as vendor or payee.iban, "
                "separated by commas."
            )
        return names

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get("context_fields") and not cleaned.get("context_action"):
            self.add_error("context_action", "Choose the action whose answer holds the fields approvers see.")
        read = cleaned.get("context_action")
        if read is not None and self.instance.pk and read.pk == self.instance.pk:
            self.add_error("context_action", "An action cannot describe its own calls: choose a read action.")
        return cleaned


class ConnectorActionInline(ManagedInlineMixin, admin.StackedInline):
    """Each action stacked, so that it fits a laptop and a phone: what identifies it and whether a
    person must approve its calls first, then its description, then two folded sections for the
    long fields (its parameter schema, what approvers see)."""

    model = ConnectorAction
    form = ConnectorActionForm
    extra = 0
    fieldsets = (
        (
            None,
            {
                "fields": (
                    ("name", "tool"),
                    "display_name",
                    ("method", "path_template"),
                    ("requires_confirmation", "is_write"),
                    "description",
                )
            },
        ),
        ("Parameters (JSON schema)", {"classes": ("collapse",), "fields": ("parameters_schema",)}),
        (
            "What approvers see",
            {
                "classes": ("collapse",),
                "description": "When a call of this action asks for approval, the context action (a read "
                "action of this connector) is called with the call's arguments and the fields listed "
                "are shown on the approvers' card: the purchase a payment pays, say.",
                "fields": ("context_action", "context_fields"),
            },
        ),
    )
    readonly_fields = ("tool",)

    class Media:
        css = {"all": ("agents/connector_actions.css",)}

    @admin.display(description="tool name")
    def tool(self, obj: ConnectorAction) -> str:
        return obj.tool_name if obj.pk else "— (the connector's slug, two underscores, the name)"

    def get_formset(self, request: HttpRequest, obj: Connector | None = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)
        field = formset.form.base_fields.get("context_action")
        if field is not None:
            # Only a read action of this very connector describes its calls (another connector's,
            # or another organisation's, never): the choices are the connector's GET actions.
            reads = ConnectorAction.objects.none()
            if obj is not None and obj.pk is not None:
                reads = obj.actions.filter(method=ConnectorAction.Method.GET).select_related("connector")
            field.queryset = reads.order_by("name")
            field.label_from_instance = lambda action: f"{action.title} ({action.tool_name})"
            field.help_text = (
                "A read (GET) action of this connector whose answer shows approvers what a call is "
                "about. Save a new action first to choose it here."
            )
        return formset


@admin.register(Connector)
class ConnectorAdmin(
    SecretsClearedMessageMixin, ArchivableAdminMixin, OrganizationScopedAdmin, ConfigHistoryAdmin
):
    """Archiving a connector (operators) withdraws its tools from every agent."""

    form = ConnectorAdminForm
    formfield_overrides = {URLField: URL_FORMFIELD}
    list_display = (
        "name",
        "slug",
        "organization",
        "kind",
        "base_url",
        "action_count",
        "is_archived",
        "created_at",
    )
    list_select_related = ("organization",)
    list_filter = (
        "kind",
        ("archived_at", admin.EmptyFieldListFilter),
        ("organization", admin.RelatedOnlyFieldListFilter),
    )
    search_fields = ("name", "slug", "base_url", "organization__name")
    readonly_fields = ("secrets_state", *ArchivableAdminMixin.archive_fields)
    inlines = (ConnectorActionInline,)
    actions = ("archive_selected", "unarchive_selected")
    archive_service, unarchive_service = "connector_archive", "connector_unarchive"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Connector]:
        return super().get_queryset(request).annotate(_actions=Count("actions", distinct=True))

    def get_fields(self, request: HttpRequest, obj: Connector | None = None) -> list[str]:
        fields = [
            "organization",
            "slug",
            "name",
            "kind",
            "base_url",
            "secrets_state",
            "secrets",
            "timeout_seconds",
            *self.archive_fields,
        ]
        if obj is not None and not self.has_change_permission(request, obj):
            # A view-only page renders every field as text: leave the secrets out.
            fields.remove("secrets")
        return fields

    @admin.display(description="actions", ordering="_actions")
    def action_count(self, obj: Connector) -> int:
        return obj._actions  # type: ignore[attr-defined]

    @admin.display(description="stored secrets")
    def secrets_state(self, obj: Connector) -> str:
        return secrets_state(obj.secrets) if obj.pk is not None else "—"


# --- conversations and runs -----------------------------------------------------------------------


@admin.register(Conversation)
class ConversationAdmin(OrganizationScopedAdmin):
    list_display = ("__str__", "agent", "organization", "user", "run_count", "created_at")
    list_select_related = ("agent", "organization", "user")
    list_filter = (("organization", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("title", "agent__name", "user__username")
    date_hierarchy = "created_at"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        return super().get_queryset(request).annotate(_runs=Count("runs", distinct=True))

    def has_delete_permission(self, request: HttpRequest, obj: Conversation | None = None) -> bool:
        return False  # a conversation is history (its runs hang from it)

    @admin.display(description="runs", ordering="_runs")
    def run_count(self, obj: Conversation) -> int:
        return obj._runs  # type: ignore[attr-defined]


class RunEventInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = RunEvent
    extra = 0
    can_delete = False
    fields = ("seq", "type", "payload", "created_at")
    readonly_fields = fields
    ordering = ("seq",)


@admin.register(Run)
class RunAdmin(ReadOnlyAdminMixin, OrganizationScopedAdmin):
    list_display = ("id", "status", "agent", "user", "execution_path", "hooks_bypassed", "created_at", "took")
    list_select_related = ("agent", "user")
    list_filter = (
        "status",
        "execution_path",
        "hooks_bypassed",
        ("agent__organization", admin.RelatedOnlyFieldListFilter),
    )
    search_fields = ("=id", "input", "agent__name", "user__username")
    date_hierarchy = "created_at"
    fieldsets = (
        (
            None,
            {
                "fields": (
                    ("agent", "user", "conversation", "parent_run"),
                    ("status", "execution_path", "hooks_bypassed", "cancel_requested"),
                    "input",
                    "output",
                    "error",
                    ("created_at", "started_at", "finished_at"),
                )
            },
        ),
        # The executor's bookkeeping: rarely what a reader wants, so folded away.
        (
            "Lease and checkpoint (internals)",
            {
                "fields": (("lease_owner", "lease_expires_at", "heartbeat_at"), "checkpoint", "hook_chain"),
                "classes": ("collapse",),
            },
        ),
    )
    inlines = (RunEventInline,)
    actions = ("cancel_runs",)

    @admin.display(description="took")
    def took(self, obj: Run) -> str:
        if obj.started_at is None or obj.finished_at is None:
            return "—"
        return duration_text((obj.finished_at - obj.started_at).total_seconds())

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        """Cancelling is the one change made to a run here: it needs the change permission."""
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")

    @admin.action(description="Cancel selected runs", permissions=["cancel"])
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        # The service checks that the staff user operates each run's organisation and records
        # who cancelled.
        cancelled = 0
        refused: list[str] = []
        for run in queryset.select_related("user", "agent").order_by("pk"):
            try:
                services.run_cancel(run=run, user=request.user)
            except ServiceError as exc:
                refused.append(f"run {run.pk}: {exc.message}")
            else:
                cancelled += 1
        if cancelled:
            self.message_user(
                request,
                f"{cancelled} run(s) cancelled (running ones stop at their next step).",
                messages.SUCCESS,
            )
        if refused:
            self.message_user(request, "Not cancelled: " + "; ".join(refused), messages.WARNING)


@admin.register(ToolExecution)
class ToolExecutionAdmin(ReadOnlyAdminMixin, OrganizationScopedAdmin):
    list_display = ("tool_name", "status", "agent", "requested_by", "run", "started_at", "duration")
    list_select_related = ("run", "run__agent", "run__user")
    list_filter = (
        "status",
        ("run__agent__organization", admin.RelatedOnlyFieldListFilter),
        ("run__agent", admin.RelatedOnlyFieldListFilter),
        "run__hooks_bypassed",
    )
    search_fields = ("tool_name", "tool_call_id", "=run__id")
    date_hierarchy = "started_at"
    fields = (
        ("run", "tool_call_id"),
        ("tool_name", "status"),
        "args",
        "args_sha256",
        "result",
        ("started_at", "finished_at", "duration"),
    )
    readonly_fields = ("duration",)

    @admin.display(description="duration", ordering="duration_ms")
    def duration(self, obj: ToolExecution) -> str:
        return "—" if obj.duration_ms is None else duration_text(obj.duration_ms / 1000)

    @admin.display(description="requested by", ordering="run__user__username")
    def requested_by(self, obj: ToolExecution) -> Any:
        return obj.run.user

    @admin.display(description="agent", ordering="run__agent__name")
    def agent(self, obj: ToolExecution) -> Agent:
        return obj.run.agent


AUDIT_READER_ROLES = (*selectors.ORG_MANAGER_ROLES, Role.AUDITOR)


@admin.register(ConnectorCallLog)
class ConnectorCallLogAdmin(ReadOnlyAdminMixin, OrganizationScopedAdmin):
    """The append-only log of connector calls written by the ``audit_log`` hook: nobody adds,
    changes or deletes a row; staff see the rows of the organisations where they are an operator,
    an admin or an auditor."""

    list_display = (
        "created_at",
        "tool_name",
        "outcome",
        "blocked_by",
        "organization",
        "agent",
        "user",
        "run",
        "duration_ms",
        "result_size",
    )
    list_select_related = ("organization", "agent", "user", "run")
    list_filter = (
        "outcome",
        ("organization", admin.RelatedOnlyFieldListFilter),
        ("agent", admin.RelatedOnlyFieldListFilter),
        "connector_slug",
    )
    search_fields = ("tool_name", "tool_call_id", "blocked_by", "=run__id")
    date_hierarchy = "created_at"
    fields = (
        ("organization", "agent", "user"),
        ("run", "tool_call_id"),
        ("tool_name", "connector_slug"),
        "arguments",
        ("outcome", "blocked_by"),
        ("duration_ms", "result_size", "result_sha256"),
        "error",
        "created_at",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[ConnectorCallLog]:
        queryset = admin.ModelAdmin.get_queryset(self, request)
        if request.user.is_superuser:
            return queryset
        readable = selectors.organization_ids_of(user=request.user, roles=AUDIT_READER_ROLES)
        return queryset.filter(organization_id__in=readable)
