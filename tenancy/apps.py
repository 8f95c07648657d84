from django.apps import AppConfig


class TenancyConfig(AppConfig):
    """Organisations, their members and roles, invitations: the ground every other app stands on.

    Each app declares the model permissions its roles need as ``role_permissions`` on its own
    AppConfig; :mod:`tenancy.roles` composes them into the role groups."""

    name = "tenancy"
    verbose_name = "Organisations and members"

    role_permissions = {
        "auditor": {"tenancy.organization": ("view",), "tenancy.membership": ("view",)},
        "admin": {
            "tenancy.organization": ("view", "change"),
            "tenancy.membership": ("view", "add", "change", "delete"),
            "tenancy.invitation": ("view", "add", "delete"),
        },
    }

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_delete, post_migrate, post_save

        # Streams stop when their watcher loses access (tenancy.access).
        from tenancy.access import account_changed, membership_changed
        from tenancy.models import Membership
        from tenancy.roles import role_groups_sync_after_migrate

        for signal, uid in ((post_save, "saved"), (post_delete, "deleted")):
            signal.connect(membership_changed, sender=Membership, dispatch_uid=f"tenancy.membership_{uid}")
        post_save.connect(account_changed, sender=get_user_model(), dispatch_uid="tenancy.account_changed")
        post_migrate.connect(role_groups_sync_after_migrate, dispatch_uid="tenancy.role_groups_sync")
