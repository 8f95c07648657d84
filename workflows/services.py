"""Writes on workflows and their runs (HackSoft style: ``<entity>_<verb>``, keyword-only, atomic).

A workflow run is a small state machine advanced by :func:`workflow_run_advance`: it walks the
graph from START, one node at a time. An AGENT or CONNECTOR node starts a ``Run``
(``execution_path="workflow"``) and the walk stops until that run settles
(``agents.signals.run_settled``): completed → the next node; parked on an approval → the workflow
run waits too (``awaiting_approval``); failed or cancelled → the workflow run fails, naming the
node. The approval's verdict resumes the node's run, whose ending resumes the walk.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from celery import signature
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from agents import executors
from agents.models import Agent, ConnectorAction, Conversation, ExecutionPath, Run, RunStatus
from agents.services import run_cancel, run_start, run_starts_take
from fimone.errors import ServiceError
from tenancy.models import Membership
from tenancy.permissions import check_member, check_operator, may_manage_runs_of
from workflows import graph as g
from workflows.checks import workflow_chain, workflow_check
from workflows.models import NodeStatus, Workflow, WorkflowNodeRun, WorkflowRun, WorkflowStatus

log = logging.getLogger(__name__)

ADVANCE_TASK = "workflows.tasks.workflow_run_advance_task"
"""The registered name of the Celery task that runs :func:`workflow_run_advance`."""


# --- definitions ------------------------------------------------------------------------------------


def _service_error(exc: ValidationError) -> ServiceError:
    field, messages = next(iter(exc.message_dict.items()))
    return ServiceError("; ".join(messages), field=None if field == "__all__" else field)


@transaction.atomic
def workflow_create(
    *,
    user: Any,
    organization_id: int,
    name: str,
    graph: dict[str, Any],
    hooks: list[Any] | None = None,
    description: str = "",
    require_confirmation_for_all: bool = False,
    connector_agent_id: int | None = None,
) -> Workflow:
    """Define a workflow, as an operator of its organisation (others are told ``not_found``).
    Refused (``invalid``, naming the field) unless :func:`workflow_check` passes."""
    check_operator(user=user, organization_id=organization_id)
    workflow = Workflow(
        organization_id=organization_id,
        name=name,
        description=description,
        graph=graph,
        hooks=hooks if hooks is not None else [],
        require_confirmation_for_all=require_confirmation_for_all,
        connector_agent_id=connector_agent_id,
        created_by=user,
    )
    try:
        workflow.full_clean()
    except ValidationError as exc:
        raise _service_error(exc) from None
    workflow.save()
    return workflow


# --- runs -------------------------------------------------------------------------------------------


@transaction.atomic
def workflow_run_start(*, workflow: Workflow, user: Any, input: str) -> WorkflowRun:
    """Start ``workflow`` for ``user`` (a member of its organisation; others: ``not_found``).

    Refused if the workflow is archived (``conflict``), cannot run as it stands now
    (``invalid``), or the user started too many runs (``throttled``: ``RUN_START_RATE``). The
    run keeps the graph and the CONNECTOR nodes' chain it starts with; its walk begins once
    committed."""
    check_member(user=user, organization_id=workflow.organization_id)
    if workflow.archived_at is not None:
        raise ServiceError("this workflow is archived and cannot start", code="conflict")
    try:
        workflow_check(workflow=workflow)
    except ValidationError as exc:
        raise _service_error(exc) from None
    run_starts_take(user=user)  # whichever door it came through: the API, the admin, a command
    workflow_run = WorkflowRun.objects.create(
        workflow=workflow,
        organization_id=workflow.organization_id,
        started_by=user,
        input=(input or "").strip(),
        graph=workflow.graph,
        hook_chain=workflow_chain(workflow=workflow),
        current_node=g.start_node(workflow.graph),
    )
    WorkflowNodeRun.objects.bulk_create(
        WorkflowNodeRun(workflow_run=workflow_run, node_id=node["id"], kind=node["type"], position=i)
        for i, node in enumerate(workflow.graph["nodes"])
    )
    transaction.on_commit(lambda: dispatch_advance(workflow_run.pk))
    return workflow_run


def dispatch_advance(workflow_run_id: int) -> None:
    """Advance a workflow run: in a Celery worker, or here (embedded). Call once committed."""
    if settings.RUN_EXECUTOR == "celery":
        # By the task's registered name: the task module sits above this one (it calls
        # workflow_run_advance). The signature resolves to the registered task, so eager mode and
        # routing are those of ``.delay``; WorkflowsConfig.ready imports the tasks module.
        signature(ADVANCE_TASK).delay(workflow_run_id)
        return
    try:
        workflow_run_advance(workflow_run_id=workflow_run_id)
    except Exception:  # the run that settled must not fail for it; the walk is retried on the next
        log.exception("workflow run %s could not advance", workflow_run_id)


@transaction.atomic
def workflow_run_advance(*, workflow_run_id: int) -> WorkflowRun:
    """Walk the workflow run as far as it can go now. Idempotent: the row is locked, and a node
    whose run has not settled stops the walk where it is."""
    wr = WorkflowRun.objects.select_for_update().get(pk=workflow_run_id)
    if wr.is_terminal:
        return wr
    nodes = g.nodes_by_id(wr.graph)
    states = {s.node_id: s for s in WorkflowNodeRun.objects.filter(workflow_run=wr).select_related("run")}
    outputs = {k: s.output for k, s in states.items() if s.status == NodeStatus.COMPLETED}
    now = timezone.now()
    while True:
        node, state = nodes[wr.current_node], states[wr.current_node]
        kind = node["type"]
        if kind in (g.AGENT, g.CONNECTOR):
            waiting = _step_with_run(wr, node, state, outputs)
            if waiting:
                wr.save()
                return wr
            if state.status == NodeStatus.FAILED:
                _end(wr, WorkflowStatus.FAILED, error=f"node {node['id']!r} failed: {state.error}")
                return wr
            outputs[node["id"]] = state.output
            following = g.next_node(wr.graph, node["id"])
        elif kind == g.CONDITION:
            holds = g.condition_holds(node, outputs.get(node["source"], ""))
            _state_done(state, output="true" if holds else "false", now=now)
            following = g.next_node(wr.graph, node["id"], when=holds)
        elif kind == g.END:
            _state_done(state, output="", now=now)
            last = [s for s in states.values() if s.kind in (g.AGENT, g.CONNECTOR) and s.finished_at]
            last.sort(key=lambda s: s.finished_at)
            _end(wr, WorkflowStatus.COMPLETED, output=last[-1].output if last else "")
            return wr
        else:  # START
            _state_done(state, output="", now=now)
            following = g.next_node(wr.graph, node["id"])
        assert following is not None  # check_graph: every node but END has a next node
        wr.current_node = following


def _state_done(state: WorkflowNodeRun, *, output: str, now: Any) -> None:
    state.status, state.output = NodeStatus.COMPLETED, output
    state.started_at = state.started_at or now
    state.finished_at = now
    state.save(update_fields=["status", "output", "started_at", "finished_at"])


def _end(wr: WorkflowRun, status: str, *, output: str = "", error: str = "") -> None:
    wr.status, wr.output, wr.error, wr.finished_at = status, output, error, timezone.now()
    wr.save()
    pending = WorkflowNodeRun.objects.filter(workflow_run=wr, status=NodeStatus.PENDING)
    pending.update(status=NodeStatus.SKIPPED)


def _step_with_run(
    wr: WorkflowRun, node: dict[str, Any], state: WorkflowNodeRun, outputs: dict[str, str]
) -> bool:
    """Start or follow the run of an AGENT / CONNECTOR node. ``True``: the walk waits for it;
    ``False``: the node ended (``state.status`` completed or failed)."""
    now = timezone.now()
    if state.run_id is None:
        state.started_at = now
        try:
            state.run = _start_node_run(wr, node, state, outputs)
        except ServiceError as exc:
            state.status, state.error, state.finished_at = NodeStatus.FAILED, exc.message, now
            state.save()
            return False
        state.status = NodeStatus.RUNNING
        state.save()
        wr.status = WorkflowStatus.RUNNING
        return True
    run = Run.objects.get(pk=state.run_id)
    if run.status == RunStatus.COMPLETED:
        state.status, state.output, state.finished_at = NodeStatus.COMPLETED, run.output, now
        state.save(update_fields=["status", "output", "finished_at"])
        wr.status = WorkflowStatus.RUNNING
        return False
    if run.status in (RunStatus.FAILED, RunStatus.CANCELLED):
        error = run.error or run.status
        state.status, state.error, state.finished_at = NodeStatus.FAILED, error, now
        state.save(update_fields=["status", "error", "finished_at"])
        return False
    if run.status == RunStatus.AWAITING_APPROVAL:
        state.status, wr.status = NodeStatus.AWAITING_APPROVAL, WorkflowStatus.AWAITING_APPROVAL
    else:  # queued or running (resumed)
        state.status, wr.status = NodeStatus.RUNNING, WorkflowStatus.RUNNING
    state.save(update_fields=["status"])
    return True


def _start_node_run(
    wr: WorkflowRun, node: dict[str, Any], state: WorkflowNodeRun, outputs: dict[str, str]
) -> Run:
    """A new ``Run`` for an AGENT node (that agent, its own chain) or a CONNECTOR node (the
    workflow's connector agent, the workflow run's chain), handed to the executor on commit."""
    if node["type"] == g.AGENT:
        agent = Agent.objects.filter(pk=node["agent"], organization_id=wr.organization_id).first()
        if agent is None:
            raise ServiceError(f"agent {node['agent']} no longer exists in this organisation")
        text = g.render(node.get("input", "{{ input }}"), input=wr.input, outputs=outputs)
        state.input = text
        return run_start(agent=agent, user=wr.started_by, input=text, execution_path=ExecutionPath.WORKFLOW)
    workflow = wr.workflow
    agent = Agent.objects.select_related("organization").filter(pk=workflow.connector_agent_id).first()
    if agent is None:
        raise ServiceError("the workflow has no connector agent")
    archived = agent.archived_reason()
    if archived is not None:
        raise ServiceError(f"its connector agent cannot run: {archived}")
    if not Membership.objects.filter(user=wr.started_by, organization_id=wr.organization_id).exists():
        raise ServiceError("the user who started the workflow is no longer a member")
    action = (
        ConnectorAction.objects.select_related("connector")
        .filter(pk=node["action"], connector__organization_id=wr.organization_id)
        .first()
    )
    if action is None:
        raise ServiceError(f"connector action {node['action']} no longer exists in this organisation")
    state.arguments = g.render_arguments(node.get("arguments", {}), input=wr.input, outputs=outputs)
    state.input = f"{action.tool_name}({_short(state.arguments)})"
    conversation = Conversation.objects.create(
        organization_id=wr.organization_id,
        agent=agent,
        user=wr.started_by,
        title=f"{workflow.name}: {node['id']}"[:200],
    )
    run = Run.objects.create(
        conversation=conversation,
        agent=agent,
        user=wr.started_by,
        input=f"Workflow {workflow.name!r}, node {node['id']!r}: {state.input}",
        execution_path=ExecutionPath.WORKFLOW,
        hook_chain=wr.hook_chain,  # the workflow's chain, kept for the run's resumes
    )
    transaction.on_commit(lambda: executors.dispatch_execute(run.pk))
    return run


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 300 else text[:299] + "…"


@transaction.atomic
def workflow_run_cancel(*, workflow_run: WorkflowRun, user: Any) -> WorkflowRun:
    """Cancel a workflow run in flight, as its starter or an operator: its node's run is
    cancelled (pending approvals withdrawn) and nothing after it starts."""
    if workflow_run.started_by_id != user.pk and not may_manage_runs_of(
        user=user, organization_id=workflow_run.organization_id
    ):
        raise ServiceError("not found", code="not_found")
    wr = WorkflowRun.objects.select_for_update().get(pk=workflow_run.pk)
    if wr.is_terminal:
        raise ServiceError(f"the workflow run is already {wr.status}", code="conflict")
    error = f"cancelled by {user.get_username()}"
    _end(wr, WorkflowStatus.CANCELLED, error=error)
    in_flight = WorkflowNodeRun.objects.filter(
        workflow_run=wr, status__in=[NodeStatus.RUNNING, NodeStatus.AWAITING_APPROVAL]
    )
    for state in in_flight.select_related("run"):
        if state.run is not None and not state.run.is_terminal:
            run_cancel(run=state.run, user=state.run.user)
        state.status, state.error, state.finished_at = NodeStatus.CANCELLED, error, timezone.now()
        state.save(update_fields=["status", "error", "finished_at"])
    return wr
