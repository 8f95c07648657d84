"""Roles in the admin: one auth group per membership role, with the model permissions it needs.

A member's groups and ``is_staff`` follow from their memberships (:func:`user_roles_sync`), so
nobody hands out permissions one by one. Permissions are global in Django; the tenancy wall is the
admin's: every listing is scoped to the user's organisations and every change is checked against
the object's organisation (``agents.admin.scoping.OrganizationScopedAdmin``).

- **operator** configures agents, connectors, approver policies and channels, reads runs and
  the approval record, but decides nothing: deciding takes the approver role (or the policy).
- **approver** decides in the web inbox or a chat channel; not staff, so no admin.
- **auditor** views everything audit-related and changes nothing.
- **organisation admin** is an operator who also manages members, invitations and the
  organisation itself.

Celery beat's tables are in no group: superusers only. New permissions later mean a new data
migration that calls :func:`role_groups_sync` again (it is idempotent).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, Permission
from django.db import transaction

from agents.models import Membership, Organization, Role
from agents.services import ServiceError

GROUP_NAMES: dict[str, str] = {
    Role.OPERATOR: "Operators",
    Role.APPROVER: "Approvers",
    Role.AUDITOR: "Auditors",
    Role.ADMIN: "Organisation admins",
}
"""The auth group of each role that has one (plain members have none)."""

STAFF_ROLES = (Role.OPERATOR, Role.AUDITOR, Role.ADMIN)
"""Roles that sign in to the admin."""

_VIEW = ("view",)
_CONFIGURE = ("view", "add", "change")

_AUDIT_RECORD: dict[str, tuple[str, ...]] = {
    "agents.organization": _VIEW,
    "agents.membership": _VIEW,
    "agents.agent": _VIEW,
    "agents.connector": _VIEW,
    "agents.connectoraction": _VIEW,
    "agents.conversation": _VIEW,
    "agents.run": _VIEW,
    "agents.runevent": _VIEW,
    "agents.toolexecution": _VIEW,
    "agents.connectorcalllog": _VIEW,
    "agents.shadowdecision": _VIEW,
    "agents.hookdeclaration": _VIEW,
    "approvals.approverpolicy": _VIEW,
    "approvals.confirmationrequest": _VIEW,
    "approvals.confirmationevent": _VIEW,
    "channels_im.channelconfig": _VIEW,
    "channels_im.imidentity": _VIEW,
    "workflows.workflow": _VIEW,
    "workflows.workflowrun": _VIEW,
    "workflows.workflownoderun": _VIEW,
    "evals.evalset": _VIEW,
    "evals.evalcase": _VIEW,
    "evals.evalrun": _VIEW,
    "evals.evalresult": _VIEW,
    "mcp_gateway.gateway": _VIEW,
    "mcp_gateway.gatewaycall": _VIEW,
    "sso.identityprovider": _VIEW,
    "sso.signinrecord": _VIEW,
}

_OPERATOR: dict[str, tuple[str, ...]] = {
    **_AUDIT_RECORD,
    "agents.agent": _CONFIGURE,
    "agents.connector": _CONFIGURE,
    "agents.connectoraction": ("view", "add", "change", "delete"),
    # class hooks only: command / python / http kinds also take agents.manage_code_hooks
    "agents.hookdeclaration": ("view", "add", "change", "delete"),
    "agents.run": ("view", "change"),  # "change" is the Cancel action; runs are read-only records
    "approvals.approverpolicy": ("view", "add", "change", "delete"),
    "channels_im.channelconfig": ("view", "add", "change", "delete"),
    "channels_im.imidentity": ("view", "delete"),  # unlink; only the person links
    "workflows.workflow": _CONFIGURE,
    "workflows.workflowrun": ("view", "change"),  # "change" is the Cancel action
    "evals.evalset": _CONFIGURE,
    "evals.evalcase": ("view", "add", "change", "delete"),
    "evals.evalrun": ("view", "add"),  # adding one starts it
    "mcp_gateway.gateway": _CONFIGURE,  # never deleted: switched off
}

ROLE_PERMISSIONS: dict[str, dict[str, tuple[str, ...]]] = {
    Role.OPERATOR: _OPERATOR,
    Role.APPROVER: {"approvals.confirmationrequest": _VIEW, "approvals.confirmationevent": _VIEW},
    Role.AUDITOR: _AUDIT_RECORD,
    Role.ADMIN: {
        **_OPERATOR,
        "agents.organization": ("view", "change"),
        "agents.membership": ("view", "add", "change", "delete"),
        "agents.invitation": ("view", "add", "delete"),
        "sso.identityprovider": ("view", "add", "change", "delete"),
    },
}
"""For each role, ``"app_label.model": actions`` — the model permissions of its group."""


def _permissions_of(role: str, permission_model: Any) -> list[Any]:
    wanted = []
    for model, actions in ROLE_PERMISSIONS[role].items():
        app_label, model_name = model.split(".")
        for action in actions:
            permission = permission_model.objects.filter(
                content_type__app_label=app_label, codename=f"{action}_{model_name}"
            ).first()
            # A model whose app is migrated later (workflows, evals) has no permission yet: that
            # app's own migration syncs the groups again once it exists.
            if permission is not None:
                wanted.append(permission)
    return wanted


def role_groups_sync(*, apps: Any) -> None:
    """Create the role groups and set exactly the permissions of :data:`ROLE_PERMISSIONS` (a
    permission taken out of the map is taken from the group). Safe to run again; runs inside a
    data migration with that migration's ``apps``."""
    from django.contrib.auth.management import create_permissions

    # Permissions are normally created after all migrations ran; a data migration needs them now.
    for app_config in apps.get_app_configs():
        models_module = getattr(app_config, "models_module", None)  # a migration's stubs have none
        app_config.models_module = models_module or True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = models_module
    group_model = apps.get_model("auth", "Group")
    permission_model = apps.get_model("auth", "Permission")
    for role in ROLE_PERMISSIONS:
        group, _ = group_model.objects.get_or_create(name=GROUP_NAMES[role])
        group.permissions.set(_permissions_of(role, permission_model))


def _role_groups(roles: set[str]) -> list[Group]:
    """The groups of ``roles``; one missing (a database emptied since the migration) is made
    again from the same map."""
    groups = []
    for role in sorted(r for r in roles if r in GROUP_NAMES):
        group, created = Group.objects.get_or_create(name=GROUP_NAMES[role])
        if created:
            _create_missing_permissions()
            group.permissions.set(_permissions_of(role, Permission))
        groups.append(group)
    return groups


def _create_missing_permissions() -> None:
    """Model permissions are made after migrations; a database emptied since may lack them."""
    from django.apps import apps
    from django.contrib.auth.management import create_permissions
    from django.contrib.contenttypes.models import ContentType

    ContentType.objects.clear_cache()  # ids cached before the database was emptied are stale
    for app_config in apps.get_app_configs():
        create_permissions(app_config, verbosity=0)


@transaction.atomic
def user_roles_sync(*, user: Any) -> None:
    """Make ``user``'s role groups and ``is_staff`` follow their memberships: the groups of the roles
    they hold in any organisation, and staff while they hold a staff role (or are a superuser).
    Groups that are not role groups are left alone. Call after any membership change."""
    roles = set(Membership.objects.filter(user=user).values_list("role", flat=True))
    wanted = _role_groups(roles)
    user.groups.remove(
        *Group.objects.filter(name__in=GROUP_NAMES.values()).exclude(pk__in=[g.pk for g in wanted])
    )
    user.groups.add(*wanted)
    is_staff = bool(user.is_superuser) or bool(roles & set(STAFF_ROLES))
    if user.is_staff != is_staff:
        user.is_staff = is_staff
        user.save(update_fields=["is_staff"])


# --- the last admin of an organisation -------------------------------------------------------------


def last_admin_message(organization: Any) -> str:
    return (
        f"{organization} would be left without an admin: it needs at least one active admin. Make "
        "someone else an admin first."
    )


def active_admin_memberships(*, organization_id: int) -> Any:
    """The admin memberships of the organisation whose users are active."""
    return Membership.objects.filter(organization_id=organization_id, role=Role.ADMIN, user__is_active=True)


def leaves_no_admin(
    *, organization_id: int, dropped_memberships: Any = (), deactivated_users: Any = ()
) -> bool:
    """Whether the organisation, which has an active admin now, would have none once
    ``dropped_memberships`` (ids) are gone or demoted and ``deactivated_users`` (ids) inactive."""
    admins = active_admin_memberships(organization_id=organization_id)
    if not admins.exists():
        return False  # nothing to keep (a new or an abandoned organisation)
    left = admins.exclude(pk__in=list(dropped_memberships)).exclude(user_id__in=list(deactivated_users))
    return not left.exists()


def organizations_only_administered_by(*, user: Any) -> list[Any]:
    """The organisations of which ``user`` is the only active admin."""
    mine = Membership.objects.filter(user=user, role=Role.ADMIN).values_list("organization_id", flat=True)
    return [
        organization
        for organization in Organization.objects.filter(pk__in=list(mine)).order_by("name")
        if leaves_no_admin(organization_id=organization.pk, deactivated_users=[user.pk])
    ]


def may_administer(*, user: Any, organization_id: int) -> bool:
    """Whether ``user`` is an admin of the organisation (superusers administer all)."""
    if getattr(user, "is_superuser", False):
        return True
    return Membership.objects.filter(user=user, organization_id=organization_id, role=Role.ADMIN).exists()


def _check_keeps_an_admin(*, membership: Membership) -> None:
    # Locked, so that two admins demoting each other at once cannot both succeed.
    list(active_admin_memberships(organization_id=membership.organization_id).select_for_update())
    if membership.role == Role.ADMIN and leaves_no_admin(
        organization_id=membership.organization_id, dropped_memberships=[membership.pk]
    ):
        raise ServiceError(last_admin_message(membership.organization), code="conflict", field="role")


@transaction.atomic
def membership_set(*, organization: Any, user: Any, role: str) -> Membership:
    """Give ``user`` ``role`` in ``organization`` (idempotent), groups and staff flag included."""
    membership, _ = Membership.objects.get_or_create(organization=organization, user=user, role=role)
    user_roles_sync(user=user)
    return membership


@transaction.atomic
def membership_remove(*, membership: Membership) -> None:
    """Take a role away; the user's groups and staff flag follow. Refused (``conflict``) for the
    last active admin of the organisation: an organisation always keeps one."""
    _check_keeps_an_admin(membership=membership)
    user = membership.user
    membership.delete()
    user_roles_sync(user=user)


@transaction.atomic
def membership_role_change(*, membership: Membership, role: str) -> Membership:
    """Give the membership another role; the user's groups and staff flag follow. Refused
    (``conflict``) when it would demote the last active admin of the organisation."""
    if role not in Role.values:
        raise ServiceError(f"unknown role {role!r}", field="role")
    if role != membership.role:
        if role != Role.ADMIN:
            _check_keeps_an_admin(membership=membership)
        membership.role = role
        membership.save(update_fields=["role"])
        user_roles_sync(user=membership.user)
    return membership
