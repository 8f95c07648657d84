import os

from django.apps import AppConfig
from django.contrib.admin.apps import AdminConfig
from django.core import checks

from fimone import telemetry, upgrades


class FimOneAdminConfig(AdminConfig):
    """Django's admin with the product's site (:mod:`fimone.admin_site`)."""

    default_site = "fimone.admin_site.FimOneAdminSite"


class FimOneConfig(AppConfig):
    """The project's own models (the audit chains' heads)."""

    name = "fimone"
    label = "fimone"
    verbose_name = "FIM One"

    def ready(self) -> None:
        # Before any request's middleware is loaded: Django's instrumentation adds its own.
        telemetry.configure(os.environ)
        # Run by migrate before it touches a database that an older release migrated.
        checks.register(upgrades.check_no_squash_half_applied, checks.Tags.database)
