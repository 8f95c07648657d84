from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "evals"
    verbose_name = "Evals"

    # What each role may do on this app's models (composed by tenancy.roles).
    role_permissions = {
        "auditor": {
            "evals.evalset": ("view",),
            "evals.evalcase": ("view",),
            "evals.evalrun": ("view",),
            "evals.evalresult": ("view",),
        },
        "operator": {
            "evals.evalset": ("view", "add", "change"),
            "evals.evalcase": ("view", "add", "change", "delete"),
            "evals.evalrun": ("view", "add"),  # adding one starts it
        },
    }

    def ready(self) -> None:
        # Imported here, once the app registry is ready: the receivers load models.
        from agents.signals import run_cancelled, run_settled
        from evals.receivers import case_run_settled

        # An eval case runs on its agent's own engine (ReAct or DAG), in the sandbox its
        # recorded chain carries (agents.tools.sandbox): no engine of its own.
        run_settled.connect(case_run_settled, dispatch_uid="evals.case_run_settled")
        run_cancelled.connect(case_run_settled, dispatch_uid="evals.case_run_cancelled")
