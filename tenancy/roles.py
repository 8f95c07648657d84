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

What each role may do on an app's models is declared by that app (``role_permissions`` on its
AppConfig) and composed here. Celery beat's tables are in no group: superusers only. The groups
are synced after every ``migrate`` that applied something, so new permissions need no data
migration of their own.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, Permission
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from fimone.errors import ServiceError
from tenancy.models import Membership, Organization, Role

GROUP_NAMES: dict[str, str] = {
    Role.OPERATOR: "Operators",
    Role.APPROVER: "Approvers",
    Role.AUDITOR: "Auditors",
    Role.ADMIN: "Organisation admins",
}
"""The auth group of each role that has one (plain members have none)."""

STAFF_ROLES = (Role.OPERATOR, Role.AUDITOR, Role.ADMIN)
"""Roles that sign in to the admin."""


def role_permissions() -> dict[str, dict[str, tuple[str, ...]]]:
    """For each role, ``"app_label.model": actions`` — the model permissions of its group,
    composed from what each installed app declares as ``role_permissions`` on its AppConfig
    (``{role: {"app_label.model": actions}}``; an app names only its own models).

    The roles build on each other: an operator has everything an auditor views and then what
    operators are given; an organisation admin everything an operator has and then what admins
    are given. Where a higher role names a model again, its actions replace the lower role's."""
    from django.apps import apps

    declared: dict[str, dict[str, tuple[str, ...]]] = {role: {} for role in GROUP_NAMES}
    for app_config in apps.get_app_configs():
        for role, permissions in getattr(app_config, "role_permissions", {}).items():
            if role not in declared:
                raise ImproperlyConfigured(
                    f"{app_config.label} declares permissions of unknown role {role!r}"
                )
            for model in permissions:
                if model.split(".")[0] != app_config.label:
                    raise ImproperlyConfigured(
                        f"{app_config.label} declares permissions on {model}, another app's model"
                    )
            declared[role].update(permissions)
    auditor = declared[Role.AUDITOR]
    operator = {**auditor, **declared[Role.OPERATOR]}
    return {
        Role.OPERATOR: operator,
        Role.APPROVER: declared[Role.APPROVER],
        Role.AUDITOR: auditor,
        Role.ADMIN: {**operator, **declared[Role.ADMIN]},
    }


def _permissions_of(role: str, permission_model: Any) -> list[Any]:
    wanted = []
    for model, actions in role_permissions()[role].items():
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
    """Create the role groups and set exactly the permissions of :func:`role_permissions` (a
    permission taken out of the map is taken from the group). Safe to run again; runs inside a
    data migration with that migration's ``apps``, and after every ``migrate`` that applied
    something (:func:`role_groups_sync_after_migrate`)."""
    from django.contrib.auth.management import create_permissions

    # Permissions are normally created after all migrations ran; a data migration needs them now.
    for app_config in apps.get_app_configs():
        models_module = getattr(app_config, "models_module", None)  # a migration's stubs have none
        app_config.models_module = models_module or True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = models_module
    group_model = apps.get_model("auth", "Group")
    permission_model = apps.get_model("auth", "Permission")
    for role in GROUP_NAMES:
        group, _ = group_model.objects.get_or_create(name=GROUP_NAMES[role])
        group.permissions.set(_permissions_of(role, permission_model))


def role_groups_sync_after_migrate(sender: Any, plan: Any = None, apps: Any = None, **kwargs: Any) -> None:
    """``post_migrate``: once the last app of a ``migrate`` that applied migrations is done, the
    groups get the permissions of every app (each app's models exist by then). Not on a flush
    (no plan): an emptied database makes its groups again when someone is given a role."""
    from django.apps import apps as installed

    with_models = [config for config in installed.get_app_configs() if config.models_module is not None]
    if not plan or apps is None or sender is not with_models[-1]:
        return
    role_groups_sync(apps=apps)


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
