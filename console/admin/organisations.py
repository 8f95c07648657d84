"""The admin of organisations, their memberships and invitations, and of the people in them
(Django's user admin, which keeps every organisation an admin).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db.models import Count, ForeignKey, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from agents.admin.archiving import ArchivableAdminMixin
from agents.admin.scoping import OrganizationScopedAdmin, OrganizationScopedFieldsMixin
from agents.models import HookDeclaration
from console.admin.hook_inlines import HOOK_HISTORY_FIELDS, EnforcedHookInline, hook_subject
from fimone.admin_errors import PlainErrorsAdminMixin
from fimone.history import ConfigHistoryAdmin
from tenancy import invitations, roles
from tenancy import selectors as tenancy_selectors
from tenancy.models import Invitation, Membership, Organization, Role

User = get_user_model()


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
        self._check_managers(organization)
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

    def _check_managers(self, organization: Organization) -> None:
        """A manager (whom an approval stage may ask) is another member of the organisation."""
        members = set(Membership.objects.filter(organization=organization).values_list("user_id", flat=True))
        for form in self.forms:
            manager = form.cleaned_data.get("manager") if form not in self.deleted_forms else None
            if manager is None:
                continue
            if manager.pk == getattr(_row_user(form), "pk", None):
                form.add_error("manager", "A person cannot be their own manager.")
            elif manager.pk not in members:
                form.add_error("manager", f"{manager} is not a member of {organization}.")


class MembershipInline(OrganizationScopedFieldsMixin, admin.TabularInline):
    """Members and their roles. Joining an organisation takes the person's consent: organisation
    admins invite (:class:`InvitationAdmin`) and change the roles of existing members; only a
    superuser adds a user directly or changes whose membership a row is. The last active admin
    of an organisation is neither demoted nor removed (:class:`MembershipFormSet`)."""

    model = Membership
    formset = MembershipFormSet
    extra = 0
    fields = ("user", "role", "manager")
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

    def get_formset(self, request: HttpRequest, obj: Organization | None = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)
        field = formset.form.base_fields.get("manager")
        if field is not None:  # a manager is one of the organisation's members
            members = Membership.objects.filter(organization=obj).values("user_id") if obj is not None else []
            field.queryset = User.objects.filter(pk__in=members).order_by("username")
        return formset

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
    fields = ("name", "read_only", *ArchivableAdminMixin.archive_fields)
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
        return [(hook_subject, enforced, HOOK_HISTORY_FIELDS)]

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
    """Whom to invite by their username (people know each other's usernames, not their row ids),
    or by e-mail address."""

    invited_user = forms.CharField(
        required=False,
        label="Username",
        max_length=150,
        help_text="Someone who already has an account here; or leave it empty and give their e-mail address.",
    )

    class Meta:
        model = Invitation
        fields = ("organization", "invited_user", "email", "role")

    def clean_invited_user(self) -> Any:
        """The account named by the username typed (exactly, whatever its case), or ``None``."""
        username = (self.cleaned_data.get("invited_user") or "").strip()
        if not username:
            return None
        user = User.objects.filter(username__iexact=username, is_active=True).first()
        if user is None:
            raise forms.ValidationError(
                f"No account is named “{username}”. Check the spelling, or give their e-mail address instead."
            )
        return user


@admin.register(Invitation)
class InvitationAdmin(PlainErrorsAdminMixin, admin.ModelAdmin):
    """Organisation admins invite existing users (or e-mail addresses) to their organisation; the
    link to pass on is shown once, when the invitation is saved. Invitations are not edited:
    delete one to revoke it."""

    form = InvitationAdminForm
    # Whether it is still waiting comes first after whom it invites: on a narrow screen the list
    # scrolls sideways, and what is cut off then is when it was made.
    list_display = ("invitee", "state", "organization", "role", "invited_by", "created_at")
    list_select_related = ("organization", "invited_user", "invited_by", "accepted_by")
    list_filter = ("role",)
    search_fields = ("email", "invited_user__username", "organization__name")
    readonly_fields = ("invited_by", "created_at", "expires_at", "accepted_at", "accepted_by")

    @admin.display(description="invitee", ordering="email")
    def invitee(self, obj: Invitation) -> str:
        return str(obj.invited_user or obj.email)

    @admin.display(description="state")
    def state(self, obj: Invitation) -> str:
        from django.utils import timezone
        from django.utils.timesince import timeuntil

        if obj.accepted_at is not None:
            return f"accepted by {obj.accepted_by or 'a former user'}"
        if obj.expires_at <= timezone.now():
            return "expired"
        # Compact in a narrow column ("waiting," / "6 days left", never a word a line); the exact
        # moment on hovering, and on the invitation's page.
        return format_html(
            '<span title="Valid until {} UTC">waiting, <span class="nowrap">{} left</span></span>',
            f"{obj.expires_at:%Y-%m-%d %H:%M}",
            timeuntil(obj.expires_at, depth=1),
        )

    def _invitable(self, request: HttpRequest) -> QuerySet[Organization]:
        organizations = Organization.objects.all()
        if request.user.is_superuser:
            return organizations
        return organizations.filter(
            pk__in=tenancy_selectors.organization_ids_of(user=request.user, roles=(Role.ADMIN,))
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Invitation]:
        return super().get_queryset(request).filter(organization__in=self._invitable(request))

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        """An admin of one organisation invites to it: it is chosen already."""
        initial = super().get_changeform_initial_data(request)
        invitable = list(self._invitable(request).values_list("pk", flat=True)[:2])
        if len(invitable) == 1:
            initial.setdefault("organization", invitable[0])
        return initial

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
        sent = f"sent by e-mail to {made.emailed_to}" if made.emailed_to else "not sent by e-mail"
        # Told by message_user (below) in place of Django's "was added successfully".
        # Told by message_user (below) in place of Django's "was added successfully", with the
        # link in a box of its own and a button that copies it (portal/copy.js).
        request.invitation_made_message = format_html(
            "Invitation for {} to {} as {}: {}. The link below is shown only once, to pass on yourself "
            'if need be; it works until {} UTC: <code id="invitation-link">{}</code> '
            '<button type="button" class="button" data-copy="invitation-link" hidden>Copy the link</button>',
            obj.invited_user or obj.email,
            invitation.organization,
            invitation.get_role_display().lower(),
            sent,
            f"{invitation.expires_at:%Y-%m-%d %H:%M}",
            made.link,
        )

    def message_user(
        self, request: HttpRequest, message: Any, level: int = messages.INFO, *args: Any, **kwargs: Any
    ) -> None:
        """After an invitation is added, the one message that says what was made, sent and shown
        replaces Django's "was added successfully" (which would name less, and come second)."""
        told = getattr(request, "invitation_made_message", None)
        if told is not None and level == messages.SUCCESS:
            message = told
            del request.invitation_made_message
        super().message_user(request, message, level, *args, **kwargs)
