from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        from agents.history import register_connector_history
        from agents.signals import run_cancelled
        from approvals.receivers import cancel_requests_of_run, requests_for_tools_of

        run_cancelled.connect(cancel_requests_of_run, dispatch_uid="approvals.cancel_requests_of_run")
        register_connector_history("approvals.requests", requests_for_tools_of)
        import approvals.gate  # noqa: F401 - registers the gate hooks in the catalog
