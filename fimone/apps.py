from django.apps import AppConfig
from django.contrib.admin.apps import AdminConfig


class FimOneAdminConfig(AdminConfig):
    """Django's admin with the product's site (:mod:`fimone.admin_site`)."""

    default_site = "fimone.admin_site.FimOneAdminSite"


class FimOneConfig(AppConfig):
    """The project's own models (the audit chains' heads)."""

    name = "fimone"
    label = "fimone"
    verbose_name = "FIM One"
