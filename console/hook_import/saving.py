"""Saving a plan: the declarations appended to the agent's own, all or nothing."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from agents.hook_declarations import hook_declaration_save
from agents.models import Agent, HookDeclaration
from console.hook_import.claude import claude_settings_plan
from console.hook_import.fim_one import fim_one_config_plan
from console.hook_import.plans import CLAUDE, FIM_ONE, HookImportError, ImportPlan
from tenancy.permissions import check_operator

# --- saving ----------------------------------------------------------------------------------------


@transaction.atomic
def hook_import_save(*, agent: Agent, plan: ImportPlan, actor: Any) -> list[HookDeclaration]:
    """Append ``plan``'s declarations to ``agent``'s own (after them; nothing is replaced), all or
    nothing, each through :func:`hook_declaration_save` (``actor=None``: the console, trusted).
    A plan asking for ``require_confirmation_for_all`` turns the agent's flag on (never off).

    Raises ``ServiceError`` (``forbidden``) for an actor who may not (the code-hooks permission
    for command hooks), :class:`HookImportError` naming the declaration that does not validate."""
    rows = []
    for planned in plan.hooks:
        row = planned.declaration(agent)
        try:
            hook_declaration_save(declaration=row, actor=actor)
        except ValidationError as exc:
            problems = "; ".join(exc.messages)
            raise HookImportError(f"{planned.where} ({planned.name}): {problems}") from None
        rows.append(row)
    if plan.require_confirmation_for_all and not agent.require_confirmation_for_all:
        if actor is not None:
            check_operator(user=actor, organization_id=agent.organization_id)
        agent.require_confirmation_for_all = True
        agent.save(update_fields=["require_confirmation_for_all"])
    return rows


def hook_import_plan(*, source: str, text: str, project_dir: str | None = None) -> ImportPlan:
    """The plan of ``text`` read as ``source`` (:data:`CLAUDE` or :data:`FIM_ONE`)."""
    if source == CLAUDE:
        return claude_settings_plan(text, project_dir=project_dir)
    if source == FIM_ONE:
        return fim_one_config_plan(text)
    raise ValueError(f"unknown source {source!r}")
