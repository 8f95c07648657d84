"""Recording what hooks in shadow mode would have done (``hooks.shadow``) in the audit record: one
:class:`~agents.models.ShadowDecision` per note, a link of its organisation's hash chain.

The engine calls :func:`shadow_notes_record` after a chain whose shadow hooks would have changed
something (the trace already holds the same notes, marked). A failure to record is logged and
changes nothing for the call: a hook in shadow never decides a call, its record neither.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.db import transaction

from agents.models import ShadowDecision
from agents.tools.redaction import redact_credentials
from fimone.audit_chain import chain_append
from hooks import SideEffect

log = logging.getLogger(__name__)


@transaction.atomic
def shadow_decisions_record(
    *,
    org_id: int,
    agent_id: int | None,
    run_id: int | None,
    point: str,
    tool_call_id: str | None,
    tool_name: str,
    notes: Sequence[SideEffect],
) -> list[ShadowDecision]:
    """Append one decision per shadow note (``note.shadow`` set), all or none. Precondition: the
    notes come from a registry's outcome (only the registry sets ``shadow``)."""
    rows = []
    for note in notes:
        shadow: dict[str, Any] = note.shadow or {}
        declaration = shadow.get("declaration")
        row = ShadowDecision(
            organization_id=org_id,
            agent_id=agent_id,
            run_id=run_id,
            declaration_pk=declaration if type(declaration) is int else None,
            hook=note.hook[:100],
            source=str(shadow.get("source") or "")[:20],
            point=point,
            tool_call_id=str(tool_call_id or "")[:100],
            tool_name=tool_name[:120],
            decision=str(shadow.get("decision") or ""),
            detail=redact_credentials(note.message),
        )
        rows.append(chain_append(row))
    return rows


def shadow_notes_record(**fields: Any) -> None:
    """:func:`shadow_decisions_record`, its failure logged instead of raised (module docstring).
    Runs in the database thread."""
    try:
        shadow_decisions_record(**fields)
    except Exception:
        log.exception("the shadow decisions of run %s could not be recorded", fields.get("run_id"))
