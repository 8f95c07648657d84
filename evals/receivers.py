"""What this app hears from the apps below it (import down, signal up)."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from agents.models import ExecutionPath
from evals.models import EvalResult
from evals.services import eval_result_record

log = logging.getLogger(__name__)


def case_run_settled(sender: Any, *, run_id: int, execution_path: str | None = None, **kwargs: Any) -> None:
    """An eval case's run ended: grade it once this transaction commits."""
    if execution_path is not None and execution_path != ExecutionPath.EVAL:
        return  # not a case's run: a case's runs are all of the eval path
    if EvalResult.objects.filter(run_id=run_id).exists():
        transaction.on_commit(lambda: _grade(run_id))


def _grade(run_id: int) -> None:
    try:
        eval_result_record(run_id=run_id)
    except Exception:  # the run that ended must not fail for its grading
        log.exception("the eval case of run %s could not be graded", run_id)
