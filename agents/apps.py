from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents and runs"

    def ready(self) -> None:
        from django.db.models.signals import pre_delete

        from agents.models import Connector
        from agents.receivers import protect_connector_history

        pre_delete.connect(
            protect_connector_history, sender=Connector, dispatch_uid="agents.protect_connector_history"
        )
