from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        from django.db.models.signals import pre_delete

        from agents.models import Connector
        from agents.signals import run_cancelled
        from approvals.receivers import cancel_requests_of_run, protect_connector_requests

        run_cancelled.connect(cancel_requests_of_run, dispatch_uid="approvals.cancel_requests_of_run")
        pre_delete.connect(
            protect_connector_requests, sender=Connector, dispatch_uid="approvals.protect_connector_requests"
        )
        import approvals.gate  # noqa: F401 - registers the gate hooks in the catalog
