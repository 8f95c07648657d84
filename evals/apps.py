from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "evals"
    verbose_name = "Evals"

    def ready(self) -> None:
        # Imported here, once the app registry is ready: the receivers load models.
        from agents.signals import run_cancelled, run_settled
        from evals.receivers import case_run_settled

        # An eval case runs on its agent's own engine (ReAct or DAG), in the sandbox its
        # recorded chain carries (agents.tools.sandbox): no engine of its own.
        run_settled.connect(case_run_settled, dispatch_uid="evals.case_run_settled")
        run_cancelled.connect(case_run_settled, dispatch_uid="evals.case_run_cancelled")
