from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents and runs"

    # What each role may do on this app's models (composed by tenancy.roles).
    role_permissions = {
        "auditor": {
            "agents.agent": ("view",),
            "agents.connector": ("view",),
            "agents.connectoraction": ("view",),
            "agents.conversation": ("view",),
            "agents.run": ("view",),
            "agents.runevent": ("view",),
            "agents.toolexecution": ("view",),
            "agents.connectorcalllog": ("view",),
            "agents.shadowdecision": ("view",),
            "agents.hookdeclaration": ("view",),
        },
        "operator": {
            "agents.agent": ("view", "add", "change"),
            "agents.connector": ("view", "add", "change"),
            "agents.connectoraction": ("view", "add", "change", "delete"),
            # class hooks only: command / python / http kinds also take agents.manage_code_hooks
            "agents.hookdeclaration": ("view", "add", "change", "delete"),
            "agents.run": ("view", "change"),  # "change" is the Cancel action; runs are read-only records
        },
    }

    def ready(self) -> None:
        """Every hand-off this app makes at start-up, in one place (each named for grep: the
        function called here is defined where the hand-off is received)."""
        from django.db.models.signals import pre_delete

        # Hook classes that need this app's data join the hook catalog as they are declared
        # (``@register_hook``, hooks.catalog); the ``prompt`` kind is built here.
        import agents.audit
        import agents.budget
        import agents.fim_one_hooks  # FIM One's hook names, as aliases of ours
        import agents.guards
        import agents.rate_limit  # noqa: F401
        from agents import executors
        from agents.engine import child_driver
        from agents.engine.runner import child_drive, run_execute, run_resume
        from agents.history import refuse_deleting_connector_with_history, register_connector_history
        from agents.models import Connector
        from agents.prompt_hooks import build_prompt_hook
        from agents.selectors import tool_executions_of
        from agents.tasks import run_execute_task, run_resume_task
        from hooks.catalog import register_kind

        register_kind("prompt", build_prompt_hook)

        # How runs are driven (the runner), queued (Celery) and how an engine drives a child run:
        # dispatching (agents.executors) and the engines (agents.engine.child_driver) reach them
        # through what is installed here, never by importing upwards.
        executors.install_driver(execute=run_execute, resume=run_resume)
        child_driver.install_child_driver(child_drive)
        # ``.delay`` is looked up when a run is sent, not now, so a test that stands in for the
        # broker by replacing it on the task is still the one called.
        executors.install_queue(
            execute=lambda run_id: run_execute_task.delay(run_id),
            resume=lambda run_id, reason: run_resume_task.delay(run_id, reason),
        )

        register_connector_history("agents.tool_executions", tool_executions_of)
        pre_delete.connect(
            refuse_deleting_connector_with_history,
            sender=Connector,
            dispatch_uid="agents.refuse_deleting_connector_with_history",
        )
