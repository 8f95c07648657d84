from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents and runs"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_delete, post_save, pre_delete

        # The hooks that need this app's data register themselves in the hook catalog.
        import agents.audit
        import agents.budget

        # The runner and the Celery tasks install how runs are driven and enqueued
        # (agents.executors), so dispatching never imports upwards.
        import agents.engine.runner
        import agents.fim_one_hooks  # FIM One's hook names, as aliases of ours
        import agents.guards
        import agents.prompt_hooks
        import agents.rate_limit
        import agents.tasks  # noqa: F401
        from agents.history import refuse_deleting_connector_with_history, register_connector_history
        from agents.models import Connector
        from agents.selectors import tool_executions_of

        register_connector_history("agents.tool_executions", tool_executions_of)

        pre_delete.connect(
            refuse_deleting_connector_with_history,
            sender=Connector,
            dispatch_uid="agents.refuse_deleting_connector_with_history",
        )
        # Streams stop when their watcher loses access (agents.access).
        from agents.access import account_changed, membership_changed
        from agents.models import Membership

        for signal, uid in ((post_save, "saved"), (post_delete, "deleted")):
            signal.connect(membership_changed, sender=Membership, dispatch_uid=f"agents.membership_{uid}")
        post_save.connect(account_changed, sender=get_user_model(), dispatch_uid="agents.account_changed")
