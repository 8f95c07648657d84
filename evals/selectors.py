"""Reads of eval sets and eval runs, scoped to the organisations the caller manages or audits."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from evals.models import EvalRun, EvalSet
from tenancy.models import Role
from tenancy.selectors import ORG_MANAGER_ROLES, organization_ids_of

EVAL_READER_ROLES = (*ORG_MANAGER_ROLES, Role.AUDITOR)


def eval_set_list(*, user: Any) -> QuerySet[EvalSet]:
    orgs = organization_ids_of(user=user, roles=EVAL_READER_ROLES)
    return EvalSet.objects.filter(organization_id__in=orgs).order_by("name", "pk")


def eval_set_get(*, eval_set_id: int, user: Any) -> EvalSet | None:
    return eval_set_list(user=user).filter(pk=eval_set_id).first()


def eval_run_get(*, eval_run_id: int, user: Any) -> EvalRun | None:
    """An eval run of an organisation where ``user`` is an operator, an admin or an auditor."""
    orgs = organization_ids_of(user=user, roles=EVAL_READER_ROLES)
    return EvalRun.objects.filter(pk=eval_run_id, organization_id__in=orgs).first()
