from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The operators' console: the admin of organisations, agents, connectors and their records;
    the hook editor and the configuration editor; hook import; "Try this chain" and replays.

    It writes through the agents app's services and models and holds none of its own."""

    name = "console"
    verbose_name = "Console"
