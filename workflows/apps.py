from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"

    # What each role may do on this app's models (composed by tenancy.roles).
    role_permissions = {
        "auditor": {
            "workflows.workflow": ("view",),
            "workflows.workflowrun": ("view",),
            "workflows.workflownoderun": ("view",),
        },
        "operator": {
            "workflows.workflow": ("view", "add", "change"),
            "workflows.workflowrun": ("view", "change"),  # "change" is the Cancel action
        },
    }

    def ready(self) -> None:
        # Imported here, once the app registry is ready: these modules load models. The tasks
        # module registers the Celery task the services enqueue by name (services.ADVANCE_TASK).
        import workflows.tasks  # noqa: F401
        from agents.engine.runner import register_engine
        from agents.models import ExecutionPath
        from agents.signals import run_cancelled, run_settled
        from workflows.receivers import engine_for_workflow_run, node_run_settled

        run_settled.connect(node_run_settled, dispatch_uid="workflows.node_run_settled")
        run_cancelled.connect(node_run_settled, dispatch_uid="workflows.node_run_cancelled")
        register_engine(ExecutionPath.WORKFLOW, engine_for_workflow_run)
