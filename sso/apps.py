from django.apps import AppConfig


class SsoConfig(AppConfig):
    name = "sso"
    verbose_name = "Single sign-on"
    default_auto_field = "django.db.models.BigAutoField"

    # What each role may do on this app's models (composed by tenancy.roles).
    role_permissions = {
        "auditor": {"sso.identityprovider": ("view",), "sso.signinrecord": ("view",)},
        "admin": {"sso.identityprovider": ("view", "add", "change", "delete")},
    }

    def ready(self) -> None:
        # The admin site sits below this app: it signs out through the view registered here, which
        # also offers the identity provider's sign-out (docs/design.md §2: import down, signal up).
        from django.urls import reverse_lazy

        from fimone.admin_site import register_logout_view
        from sso.views import SignOut

        register_logout_view(SignOut.as_view(next_page=reverse_lazy("admin:login")))
