from django.apps import AppConfig


class PortalConfig(AppConfig):
    """End users' pages: the agents they may use, their conversations and the streaming chat."""

    name = "portal"
    verbose_name = "Portal"
