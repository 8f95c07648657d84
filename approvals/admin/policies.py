"""The admin of approver policies (an organisation's default, or one agent's) and their
escalation tiers.

Policies are configured here by operators and organisation admins of the policy's organisation;
their changes are recorded (who, when, old and new values). Separation of duties (docs/design.md §1.13)
is checked on save: a policy or tier names only approvers and admins of its organisation, and only
organisation admins (and superusers) set what widens approvers' powers (:data:`ADMIN_SETTINGS`:
self-approval, the initiator, standing approvals, their hours and "until revoked"; shown disabled
to others; a forged change is a form error).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ObjectDoesNotExist
from django.db.models import QuerySet
from django.http import HttpRequest

from agents.admin.scoping import OrganizationScopedFieldsMixin
from approvals.admin.scoping import managed_only, manages, visible
from approvals.condition_rows import ConditionRowsWidget, check_rows
from approvals.models import ApprovalStage, ApproverPolicy, EscalationTier
from approvals.policy import APPROVER_ROLES, is_organisation_admin, non_approvers
from approvals.selectors import display_name
from fimone.history import ConfigHistoryAdmin
from fimone.humanize import duration_text
from hooks.conditions import conditions_of
from tenancy import selectors as tenancy_selectors
from tenancy.models import Membership, Role

ADMIN_SETTINGS = (
    "allow_self_approval",
    "allow_initiator",
    "standing_grants",
    "grant_max_hours",
    "grants_until_revoked",
)
"""Policy settings only an organisation admin (or a superuser) sets, every one that widens what
approvers may do (docs/design.md §1.16): who may approve their own call, and whether, where, how long and
until when one approval may stand for later calls. :func:`approvals.services.grants.check_grant`
holds every grant to them when it is made."""


SEPARATION_OF_DUTIES = (
    "Operators decide nothing unless they are also approvers: whoever configures an agent, its "
    "hooks or its approver policy decides that agent's requests only if an organisation admin made "
    "them an approver (Members), and never their own call."
)


class ApproversOnlyWidget(forms.CheckboxSelectMultiple):
    """The named-users picker: a box to tick per person, in a line that wraps (an organisation has
    a few approvers: two lists with arrows between them made the page thousands of pixels tall).
    Lists only :attr:`shown` (the approvers and admins one may name), and whoever is already
    named. The field still accepts any member of the staff user's organisations, so that naming
    someone else is refused by the form in words (who, and why)."""

    shown: frozenset[str] = frozenset()

    def optgroups(self, name: str, value: Any, attrs: Any = None) -> Any:
        groups = []
        for group, options, index in super().optgroups(name, value, attrs):
            kept = [o for o in options if o["selected"] or str(o["value"]) in self.shown]
            if kept:
                groups.append((group, kept, index))
        return groups


def _named_users_field(field: Any, request: HttpRequest, help_text: str) -> Any:
    """Scope the named-users choices to the members of the organisations the staff user manages
    (any organisation for a superuser), and list only their approvers and admins."""
    members = Membership.objects.all()
    if not request.user.is_superuser:
        managed = tenancy_selectors.organization_ids_of(
            user=request.user, roles=tenancy_selectors.ORG_MANAGER_ROLES
        )
        members = members.filter(organization_id__in=managed)
    field.queryset = field.queryset.filter(pk__in=members.values("user_id")).order_by("username")
    widget = ApproversOnlyWidget(attrs={"class": "tick-line"})
    widget.shown = frozenset(
        str(pk) for pk in members.filter(role__in=APPROVER_ROLES).values_list("user_id", flat=True)
    )
    field.widget = widget
    # The model's own words, not the admin's "Hold down Control…" for a multiple select.
    field.help_text = help_text
    return field


def _named_users_problem(organization: Any, users: Any) -> str | None:
    """Why ``users`` may not be named by a policy of ``organization`` (``None`` when they may)."""
    if organization is None or not users:
        return None
    outsiders = non_approvers(organization_id=organization.pk, users=users)
    if not outsiders:
        return None
    names = ", ".join(sorted(display_name(user) for user in outsiders))
    return (
        f"Only approvers and admins of {organization} can be named; not {names}. An organisation "
        "admin gives the approver role in Members."
    )


def _parent_organization(instance: Any) -> Any:
    """The organisation of the policy a tier or stage is saved with (the inline's parent), or
    ``None`` while the policy's own form still misses it (that form says what is missing)."""
    try:
        return instance.policy.organization
    except ObjectDoesNotExist:
        return None


class EscalationTierForm(forms.ModelForm):
    """A tier names only approvers and admins of its policy's organisation, and escalates one of
    its policy's stages, or the requests no stage applies to."""

    class Meta:
        model = EscalationTier
        fields = ("after_seconds", "named_users", "channel_config", "stage")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        problem = _named_users_problem(_parent_organization(self.instance), cleaned.get("named_users"))
        if problem is not None:
            self.add_error("named_users", problem)
        stage = cleaned.get("stage")
        if (
            stage is not None
            and self.instance.policy_id is not None
            and stage.policy_id != self.instance.policy_id
        ):
            self.add_error("stage", "Choose a stage of this policy.")
        return cleaned


ROLE_CHOICES = [(role.value, f"Everyone with the {role.label.lower()} role") for role in APPROVER_ROLES]


class ApprovalStageForm(forms.ModelForm):
    """A stage: when it applies (``confirm_when``'s condition rows), who it asks (named approvers,
    roles, the requester's manager: at least one of them), its quorum and its deadline."""

    roles = forms.MultipleChoiceField(
        choices=ROLE_CHOICES,
        required=False,
        widget=forms.CheckboxSelectMultiple(attrs={"class": "tick-line"}),
        label="Roles",
    )

    class Meta:
        model = ApprovalStage
        fields = (
            "position",
            "name",
            "conditions",
            "condition_mode",
            "named_users",
            "roles",
            "requester_manager",
            "approvals_required",
            "timeout_seconds",
        )
        # Rows of field, operator and value, said back in words (approvals.condition_rows).
        widgets = {"conditions": ConditionRowsWidget()}
        help_texts = {
            "conditions": "When this stage applies: a field of the call's arguments (amount, vendor …; "
            "@tool and @agent name the tool and the agent), how it compares and a value, a row each. "
            "No row: always."
        }

    def clean_conditions(self) -> Any:
        rows = self.cleaned_data.get("conditions")
        rows = [] if rows in (None, "") else rows
        check_rows(rows)
        try:
            conditions_of(rows)
        except ValueError as exc:
            raise forms.ValidationError(f"{exc}.") from None
        return rows

    def clean_roles(self) -> list[str]:
        return list(self.cleaned_data.get("roles") or [])

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        problem = _named_users_problem(_parent_organization(self.instance), cleaned.get("named_users"))
        if problem is not None:
            self.add_error("named_users", problem)
        if not (cleaned.get("named_users") or cleaned.get("roles") or cleaned.get("requester_manager")):
            self.add_error(
                None, "A stage asks somebody: name approvers, tick a role or the requester's manager."
            )
        timeout = cleaned.get("timeout_seconds")
        if timeout is not None and timeout < 10:
            self.add_error("timeout_seconds", "At least 10 seconds (or empty: the policy's timeout).")
        return cleaned


class ApproverPolicyForm(forms.ModelForm):
    """The policy form for one staff user (:attr:`user`, set by the admin's ``get_form``):
    named users must be approvers or admins of the policy's organisation, and
    :data:`ADMIN_SETTINGS` are disabled, and a posted change of them refused, unless the user is
    an admin of that organisation or a superuser."""

    user: Any = None

    class Meta:
        model = ApproverPolicy
        fields = (
            "organization",
            "agent",
            "allow_org_approvers",
            "allow_agent_owner",
            "allow_initiator",
            "named_users",
            "allow_self_approval",
            "approvals_required",
            "any_rejection_rejects",
            "allow_edit_on_approve",
            "timeout_seconds",
            "inline_wait_seconds",
            "channel_config",
            "first_tier_may_decide_after_escalation",
            "standing_grants",
            "grant_max_hours",
            "grants_until_revoked",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        user, organization_id = self.user, self.instance.organization_id if self.instance.pk else None
        if user is None:
            locked = True
        elif organization_id is None:  # a new policy: enabled for whoever administers an organisation
            locked = not (user.is_superuser or user.memberships.filter(role=Role.ADMIN).exists())
        else:
            locked = not is_organisation_admin(user=user, organization_id=organization_id)
        for name in ADMIN_SETTINGS:
            if name in self.fields:
                self.fields[name].disabled = locked
                self.fields[name].help_text += " Set by organisation admins only."

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        organization = cleaned.get("organization")
        if organization is None:
            return cleaned
        problem = _named_users_problem(organization, cleaned.get("named_users"))
        if problem is not None:
            self.add_error("named_users", problem)
        if is_organisation_admin(user=self.user, organization_id=organization.pk):
            return cleaned
        moved = self.instance.pk is not None and self.instance.organization_id != organization.pk
        for name in ADMIN_SETTINGS:
            if name not in self.fields:
                continue
            default = ApproverPolicy._meta.get_field(name).get_default()
            before = getattr(self.instance, name) if self.instance.pk else default
            field = self.fields[name]
            if field.disabled:
                # A disabled field is not sent: only a posted value (a forged request) changes it.
                sent = self.add_prefix(name) in self.data
                wanted = _posted(field, self.data.get(self.add_prefix(name))) if sent else before
            else:
                wanted = cleaned.get(name)
            if wanted != before or (wanted != default and moved):
                self.add_error(name, f"Only an organisation admin of {organization} can change this.")
        return cleaned


def _posted(field: forms.Field, raw: Any) -> Any:
    """A disabled field's posted value as the field reads it ("8" is 8 hours), or the raw text
    when it does not read (a change all the same)."""
    try:
        return field.to_python(raw)
    except forms.ValidationError:
        return raw


class EscalationTierInline(OrganizationScopedFieldsMixin, admin.TabularInline):
    """The policy's escalation tiers, edited on the policy's page with the policy's permissions
    (a tier is part of the policy, not an object of its own)."""

    model = EscalationTier
    form = EscalationTierForm
    extra = 0
    fields = ("after_seconds", "named_users", "channel_config", "stage")
    verbose_name = "escalation tier"
    verbose_name_plural = "Escalation tiers — if nobody decides in time, ask these people too"

    def _may_edit(self, request: HttpRequest, obj: Any) -> bool:
        return request.user.has_perm("approvals.change_approverpolicy") and manages(request, obj)

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_manytomany(db_field, request, **kwargs)
        if db_field.name == "named_users" and field is not None:
            field = _named_users_field(field, request, db_field.help_text)
        return field

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm("approvals.view_approverpolicy") or self._may_edit(request, obj)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_edit(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_edit(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_edit(request, obj)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "channel_config" and not request.user.is_superuser:
            kwargs["queryset"] = managed_only(request, db_field.related_model._default_manager.all())
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)
        # A tier escalates one of this policy's stages (saved ones: a new stage can be chosen
        # once the policy is saved with it).
        field = formset.form.base_fields.get("stage")
        if field is not None:
            field.queryset = (
                ApprovalStage.objects.filter(policy=obj) if obj is not None else ApprovalStage.objects.none()
            )
            field.help_text = (
                "The stage this tier escalates (counted from when it opens); "
                "empty: calls no stage applies to."
            )
        return formset


class ApprovalStageInline(OrganizationScopedFieldsMixin, admin.StackedInline):
    """The policy's stages, edited on the policy's page with the policy's permissions; saving them
    saves the policy, so its history records who changed them (separation of duties reads it)."""

    model = ApprovalStage
    form = ApprovalStageForm
    extra = 0
    verbose_name = "stage"
    verbose_name_plural = (
        "Stages — for the calls they apply to, ask these people in order; each stage must approve "
        "before the next is asked, and any stage's rejection rejects"
    )
    _may_edit = EscalationTierInline._may_edit
    has_view_permission = EscalationTierInline.has_view_permission
    has_add_permission = EscalationTierInline.has_add_permission
    has_change_permission = EscalationTierInline.has_change_permission
    has_delete_permission = EscalationTierInline.has_delete_permission

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_manytomany(db_field, request, **kwargs)
        if db_field.name == "named_users" and field is not None:
            field = _named_users_field(field, request, db_field.help_text)
        return field


@admin.register(ApproverPolicy)
class ApproverPolicyAdmin(OrganizationScopedFieldsMixin, ConfigHistoryAdmin):
    """One policy per organisation with no agent (its default) and at most one per agent."""

    form = ApproverPolicyForm
    list_display = (
        "__str__",
        "organization",
        "agent",
        "deciders",
        "self_approval",
        "timeout",
        "inline_wait",
        "quorum",
        "channel_config",
    )
    list_select_related = ("organization", "agent", "channel_config")
    list_filter = (("organization", admin.RelatedOnlyFieldListFilter), "allow_self_approval")
    search_fields = ("organization__name", "agent__name")
    fieldsets = (
        (
            None,
            {
                "fields": ("organization", "agent"),
                "description": "Leave the agent empty for the organisation's default policy; a policy "
                "for one agent replaces the default for that agent's calls.",
            },
        ),
        (
            "Who may decide",
            {
                "fields": (
                    "allow_org_approvers",
                    "allow_agent_owner",
                    "allow_initiator",
                    "named_users",
                    "allow_self_approval",
                ),
                "description": "Anyone ticked here may decide, while they are active members of the "
                f"organisation. {SEPARATION_OF_DUTIES}",
            },
        ),
        (
            "Quorum and edits",
            {
                "fields": ("approvals_required", "any_rejection_rejects", "allow_edit_on_approve"),
                "description": "E.g. 2 approvals of the finance group, any rejection rejecting; "
                "approvers may lower an amount before approving.",
            },
        ),
        ("Timing and channel", {"fields": ("timeout_seconds", "inline_wait_seconds", "channel_config")}),
        (
            "Standing approvals",
            {
                "fields": ("standing_grants", "grant_max_hours", "grants_until_revoked"),
                "description": "Whether an approver, approving a call, may also approve later calls of the "
                "same tool whose arguments meet conditions they set (listed and revocable under Standing "
                "approvals in the inbox). Set by organisation admins only.",
            },
        ),
        (
            "Escalation",
            {
                "fields": ("first_tier_may_decide_after_escalation",),
                "description": "Tiers are listed below the form. A tier's people are added to the "
                "approvers of a request nobody has decided in time, and its card is sent again.",
            },
        ),
    )
    inlines = (ApprovalStageInline, EscalationTierInline)

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApproverPolicy]:
        return visible(request, super().get_queryset(request))

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (form,), {"user": request.user})

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "timeout_seconds" and field is not None:
            field.help_text = (
                "Seconds before an undecided request expires (at least 10); the tool never runs then."
            )
            field.min_value = 10
        if db_field.name == "allow_agent_owner" and field is not None:
            field.help_text = (
                "The agent's owner (set by an organisation admin), only while they hold the approver "
                "or admin role."
            )
        if db_field.name == "named_users" and field is not None:
            field.help_text = (
                "These people too: approvers and admins of the organisation only (an operator cannot "
                "name themselves)."
            )
        return field

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_manytomany(db_field, request, **kwargs)
        if db_field.name == "named_users" and field is not None:
            field = _named_users_field(field, request, db_field.help_text)
        return field

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "channel_config" and not request.user.is_superuser:
            # Only the channels of the organisations the staff user manages.
            kwargs["queryset"] = managed_only(request, db_field.related_model._default_manager.all())
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_change_permission(self, request: HttpRequest, obj: ApproverPolicy | None = None) -> bool:
        return super().has_change_permission(request, obj) and manages(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: ApproverPolicy | None = None) -> bool:
        return super().has_delete_permission(request, obj) and manages(request, obj)

    @admin.display(description="who may decide")
    def deciders(self, obj: ApproverPolicy) -> str:
        who = [
            label
            for flag, label in (
                (obj.allow_org_approvers, "approvers & admins"),
                (obj.allow_agent_owner, "agent owner"),
                (obj.allow_initiator, "requester"),
            )
            if flag
        ]
        return ", ".join(who) or "named users only"

    @admin.display(description="approvals needed", ordering="approvals_required")
    def quorum(self, obj: ApproverPolicy) -> str:
        if obj.approvals_required == 1:
            return "1"
        rule = "any rejection rejects" if obj.any_rejection_rejects else "rejected when impossible"
        return f"{obj.approvals_required} ({rule})"

    @admin.display(description="timeout", ordering="timeout_seconds")
    def timeout(self, obj: ApproverPolicy) -> str:
        return duration_text(obj.timeout_seconds)

    # Short column titles: the fields' labels are sentences, made for the form.
    @admin.display(description="self-approval", boolean=True, ordering="allow_self_approval")
    def self_approval(self, obj: ApproverPolicy) -> bool:
        return obj.allow_self_approval

    @admin.display(description="waits before suspending", ordering="inline_wait_seconds")
    def inline_wait(self, obj: ApproverPolicy) -> str:
        return f"{obj.inline_wait_seconds} s"
