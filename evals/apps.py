from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "evals"
    verbose_name = "Evals"

    def ready(self) -> None:
        from agents.engine.runner import register_engine
        from agents.models import ExecutionPath
        from agents.signals import run_cancelled, run_settled
        from evals.receivers import case_run_settled, engine_for_eval_run

        run_settled.connect(case_run_settled, dispatch_uid="evals.case_run_settled")
        run_cancelled.connect(case_run_settled, dispatch_uid="evals.case_run_cancelled")
        register_engine(ExecutionPath.EVAL, engine_for_eval_run)
