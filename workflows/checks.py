"""Validation of a workflow's definition and the hook chain its CONNECTOR nodes run, shared by the
model's ``clean`` (admin forms, ``full_clean``), the services and the admin.

Sits below :mod:`workflows.models`: it reads a workflow only through its attributes, so the model
can call it without importing upwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError

from agents.models import Agent, ConnectorAction, HookDeclaration
from hooks.catalog import HookDeclarationError, resolve_chain
from workflows import graph as g

if TYPE_CHECKING:
    from workflows.models import Workflow


def workflow_chain(*, workflow: Workflow) -> dict[str, Any]:
    """The hook chain a new run of ``workflow``'s CONNECTOR nodes keeps: its organisation's
    enforced declarations, the workflow's own hooks, the system hooks (the gate last); or the
    reason it cannot be built, recorded so the node fails closed with it."""
    enforced = (
        HookDeclaration.objects.filter(organization_id=workflow.organization_id, agent__isnull=True)
        .exclude(mode=HookDeclaration.Mode.OFF)
        .order_by("priority", "pk")
    )
    try:
        return resolve_chain(
            workflow.hooks,
            require_confirmation_for_all=workflow.require_confirmation_for_all,
            enforced=[row.as_item() for row in enforced],
        )
    except HookDeclarationError as exc:
        return {"v": 1, "error": f"the workflow's hooks cannot be built: {exc}"}


def workflow_check(*, workflow: Workflow) -> None:
    """Raise ``ValidationError`` (by field) unless ``workflow`` could run: a valid graph whose
    nodes point at agents and HTTP connector actions of its own organisation, hooks the catalog
    can build, and a ``connector_agent`` of the organisation when it has CONNECTOR nodes."""
    errors: dict[str, list[str]] = {}
    try:
        g.check_graph(workflow.graph)
    except g.GraphError as exc:
        errors["graph"] = exc.problems
    else:
        problems = _reference_problems(workflow)
        if problems:
            errors["graph"] = problems
        has_connectors = any(node["type"] == g.CONNECTOR for node in workflow.graph["nodes"])
        agent = workflow.connector_agent if workflow.connector_agent_id else None
        if has_connectors and agent is None:
            errors["connector_agent"] = ["a workflow with CONNECTOR nodes needs a connector agent"]
        elif agent is not None and agent.organization_id != workflow.organization_id:
            errors["connector_agent"] = ["must be an agent of the workflow's organisation"]
    if not isinstance(workflow.hooks, list):
        errors["hooks"] = ['must be a list of hooks, e.g. ["deny_tools"]']
    else:
        chain = workflow_chain(workflow=workflow)
        if "error" in chain:
            errors["hooks"] = [chain["error"]]
    if errors:
        raise ValidationError(errors)


def _reference_problems(workflow: Workflow) -> list[str]:
    nodes = workflow.graph["nodes"]
    agent_ids = {n["agent"] for n in nodes if n["type"] == g.AGENT}
    action_ids = {n["action"] for n in nodes if n["type"] == g.CONNECTOR}
    agents = set(
        Agent.objects.filter(pk__in=agent_ids, organization_id=workflow.organization_id).values_list(
            "pk", flat=True
        )
    )
    actions = set(
        ConnectorAction.objects.filter(
            pk__in=action_ids,
            connector__organization_id=workflow.organization_id,
            connector__kind="http",
        ).values_list("pk", flat=True)
    )
    problems = []
    for node in nodes:
        if node["type"] == g.AGENT and node["agent"] not in agents:
            problems.append(f"agent node {node['id']!r}: no agent {node['agent']} in this organisation")
        if node["type"] == g.CONNECTOR and node["action"] not in actions:
            problems.append(
                f"connector node {node['id']!r}: "
                f"no HTTP connector action {node['action']} in this organisation"
            )
    return problems
