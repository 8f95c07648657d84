"""Reads of workflows and their runs, scoped to the caller's organisations."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from tenancy.models import Role
from tenancy.selectors import ORG_MANAGER_ROLES, organization_ids_of
from workflows.models import Workflow, WorkflowRun

RUN_READER_ROLES = (*ORG_MANAGER_ROLES, Role.AUDITOR)


def workflow_list(*, user: Any, include_archived: bool = False) -> QuerySet[Workflow]:
    """The workflows of the organisations ``user`` belongs to, by name."""
    workflows = Workflow.objects.filter(organization_id__in=organization_ids_of(user=user))
    if not include_archived:
        workflows = workflows.filter(archived_at__isnull=True)
    return workflows.order_by("name", "pk")


def workflow_get(*, workflow_id: int, user: Any) -> Workflow | None:
    """Workflow ``workflow_id`` if it belongs to one of ``user``'s organisations, else ``None``."""
    return workflow_list(user=user, include_archived=True).filter(pk=workflow_id).first()


def workflow_run_get(*, workflow_run_id: int, user: Any) -> WorkflowRun | None:
    """A workflow run ``user`` started, or one of an organisation where ``user`` is an operator,
    an admin or an auditor; else ``None``."""
    visible = Q(started_by=user) | Q(
        organization_id__in=organization_ids_of(user=user, roles=RUN_READER_ROLES)
    )
    return WorkflowRun.objects.filter(visible, pk=workflow_run_id).select_related("workflow").first()
