from django.contrib.admin.apps import AdminConfig


class FimOneAdminConfig(AdminConfig):
    """Django's admin with the product's site (:mod:`fimone.admin_site`)."""

    default_site = "fimone.admin_site.FimOneAdminSite"
