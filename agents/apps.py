from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents and runs"

    def ready(self) -> None:
        from django.db.models.signals import pre_delete

        # The hooks that need this app's data register themselves in the hook catalog.
        import agents.audit
        import agents.guards
        import agents.rate_limit  # noqa: F401
        from agents.history import refuse_deleting_connector_with_history
        from agents.models import Connector

        pre_delete.connect(
            refuse_deleting_connector_with_history,
            sender=Connector,
            dispatch_uid="agents.refuse_deleting_connector_with_history",
        )
