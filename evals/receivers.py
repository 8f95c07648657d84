"""What this app hears from the apps below it (import down, signal up)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction

from evals.models import EvalResult


def case_run_settled(sender: Any, *, run_id: int, **kwargs: Any) -> None:
    """An eval case's run ended: grade it once this transaction commits."""
    from evals.services import eval_result_record

    if EvalResult.objects.filter(run_id=run_id).exists():
        transaction.on_commit(lambda: eval_result_record(run_id=run_id))


def engine_for_eval_run(run_id: int) -> Callable[..., Any] | None:
    from evals.engine import EvalEngine

    return EvalEngine
