"""Reactions to model signals: history guards that on_delete alone cannot express."""

from __future__ import annotations

from typing import Any

from django.db.models import ProtectedError

from agents.models import Connector, ToolExecution

PROTECTED_SAMPLE = 10
"""How many of the protecting rows a refusal names (the error is for people, not a report)."""


def protect_connector_history(sender: Any, *, instance: Connector, **kwargs: Any) -> None:
    """Refuse to delete a connector whose tools have run (DESIGN §1.9): tool executions name their
    tool (``<slug>__<action>``) rather than point at the connector, so no foreign key protects it.
    Runs for queryset deletions and cascades too (``pre_delete`` is sent for every row)."""
    executions = ToolExecution.objects.filter(
        run__agent__organization_id=instance.organization_id, tool_name__startswith=instance.tool_prefix
    )
    sample = list(executions.order_by("pk")[:PROTECTED_SAMPLE])
    if sample:
        raise ProtectedError(
            f"Cannot delete the connector {instance}: its tools have run, and that history is kept. "
            "Archive it instead.",
            set(sample),
        )
