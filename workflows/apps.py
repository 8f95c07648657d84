from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"

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
