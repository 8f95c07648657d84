"""What this app hears from the apps below it (import down, signal up)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction

from agents.models import ExecutionPath
from workflows.engine import ConnectorNodeEngine
from workflows.models import WorkflowNodeRun
from workflows.services import dispatch_advance

log = logging.getLogger(__name__)


def node_run_settled(sender: Any, *, run_id: int, execution_path: str | None = None, **kwargs: Any) -> None:
    """A run stopped running (ended, parked or was cancelled): if it is a workflow node's, the
    workflow run walks on (or waits, or fails) once this transaction commits."""
    if execution_path is not None and execution_path != ExecutionPath.WORKFLOW:
        return  # not a node's run: a node's runs are all of the workflow path
    workflow_run_id = (
        WorkflowNodeRun.objects.filter(run_id=run_id).values_list("workflow_run_id", flat=True).first()
    )
    if workflow_run_id is not None:
        transaction.on_commit(lambda: dispatch_advance(workflow_run_id))


def engine_for_workflow_run(run_id: int) -> Callable[..., Any] | None:
    """The engine of a workflow's run: a CONNECTOR node's has no LLM; an AGENT node's run is its
    agent's own (``None``)."""
    if WorkflowNodeRun.objects.filter(run_id=run_id, kind="connector").exists():
        return ConnectorNodeEngine
    return None
