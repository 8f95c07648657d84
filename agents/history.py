"""What makes a row history that must not be deleted, where no foreign key can say it.

Tool executions and confirmation requests name their tool (``<slug>__<action>``) rather than point
at its connector, so ``on_delete=PROTECT`` cannot keep a connector whose tools ran. The checks here
do: :func:`check_connector_deletable` runs before a connector (or a queryset of them) is deleted,
and again on ``pre_delete`` for a connector reached by a cascade. Higher apps add their own checks
at start-up with :func:`register_connector_history` (this app: tool executions, see
``agents.selectors``; the approvals app: requests for its tools).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from django.db.models import Model, ProtectedError

if TYPE_CHECKING:
    from agents.models import Connector

PROTECTED_SAMPLE = 10
"""How many of the protecting rows a refusal names (the error is for people, not a report)."""

ConnectorHistory = Callable[["Connector"], list[Model]]
"""Returns up to :data:`PROTECTED_SAMPLE` history rows of a connector; empty if it has none."""

_connector_history: dict[str, ConnectorHistory] = {}


def register_connector_history(name: str, history: ConnectorHistory) -> None:
    """Add a source of connector history (idempotent per ``name``)."""
    _connector_history[name] = history


def check_connector_deletable(connectors: Iterable[Connector]) -> None:
    """Raise :class:`ProtectedError` (as Django's ``PROTECT`` does) if any of ``connectors`` has
    history: its tools ran, or were put to approvers. Archive such a connector instead."""
    for connector in connectors:
        for history in _connector_history.values():
            rows = history(connector)
            if rows:
                raise ProtectedError(
                    f"Cannot delete the connector {connector}: its tools have history "
                    "(tool executions or approval requests), and history is kept. Archive it instead.",
                    set(rows),
                )


def refuse_deleting_connector_with_history(sender: Any, *, instance: Connector, **kwargs: Any) -> None:
    """``pre_delete`` receiver: the last guard, for a connector reached by a cascade."""
    check_connector_deletable([instance])
