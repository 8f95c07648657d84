"""Workflows: a graph of START / AGENT / CONNECTOR / CONDITION / END nodes, and its runs.

Every tool call of a workflow goes through hooks (docs/design.md §1.2): an AGENT node is a full run of
that agent with its own chain; a CONNECTOR node is a run (recorded under the workflow's
``connector_agent``) whose one call goes through the tool-call pipeline with the *workflow's*
chain and the approval gate. History is never deleted (docs/design.md §1.9): relations are PROTECT.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from agents.models import Agent, Run
from tenancy.models import organisation_key
from workflows.checks import workflow_check


class Workflow(models.Model):
    organization = organisation_key(on_delete=models.PROTECT, related_name="workflows")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    graph = models.JSONField(
        default=dict,
        help_text='{"nodes": [{"id", "type": start|agent|connector|condition|end, …}], '
        '"edges": [{"from", "to", "when": true|false for a condition}]}',
    )
    hooks = models.JSONField(
        default=list,
        blank=True,
        help_text='The hooks CONNECTOR nodes run, as an agent declares them: ["name", {"name": …, '
        '"params": {…}}]. The organisation\'s enforced hooks and the approval gate always apply.',
    )
    require_confirmation_for_all = models.BooleanField(
        default=False, help_text="Every CONNECTOR node's call waits for a human's approval."
    )
    connector_agent = models.ForeignKey(
        Agent,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="CONNECTOR nodes' calls are recorded as runs of this agent and follow its approver "
        "policy; its hooks do not apply (the workflow's do). Needed when the graph has CONNECTOR nodes.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    archived_at = models.DateTimeField(null=True, blank=True, help_text="Archived workflows cannot start.")

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        workflow_check(workflow=self)


class WorkflowStatus(models.TextChoices):
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_WORKFLOW_STATUSES = frozenset(
    {WorkflowStatus.COMPLETED, WorkflowStatus.FAILED, WorkflowStatus.CANCELLED}
)


class WorkflowRun(models.Model):
    """One run of a workflow. It keeps the graph and the hook chain it started with, so editing
    the workflow never changes a run in flight (docs/design.md §1.10)."""

    workflow = models.ForeignKey(Workflow, on_delete=models.PROTECT, related_name="runs")
    organization = organisation_key(on_delete=models.PROTECT, related_name="+")
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    input = models.TextField(blank=True)
    status = models.CharField(
        max_length=20, choices=WorkflowStatus.choices, default=WorkflowStatus.RUNNING, db_index=True
    )
    graph = models.JSONField(editable=False)
    hook_chain = models.JSONField(editable=False, help_text="The chain CONNECTOR nodes run.")
    current_node = models.CharField(max_length=40, blank=True)
    output = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.workflow} #{self.pk} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_WORKFLOW_STATUSES


class NodeStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"


class WorkflowNodeRun(models.Model):
    """The state of one node in one workflow run; AGENT and CONNECTOR nodes link their ``Run``."""

    workflow_run = models.ForeignKey(WorkflowRun, on_delete=models.PROTECT, related_name="nodes")
    node_id = models.CharField(max_length=40)
    kind = models.CharField(max_length=12)
    position = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=20, choices=NodeStatus.choices, default=NodeStatus.PENDING)
    run = models.OneToOneField(
        Run, null=True, blank=True, on_delete=models.PROTECT, related_name="workflow_node"
    )
    input = models.TextField(blank=True)
    arguments = models.JSONField(null=True, blank=True, help_text="A CONNECTOR node's call, as it ran.")
    output = models.TextField(blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["workflow_run", "position"]
        constraints = [
            models.UniqueConstraint(fields=["workflow_run", "node_id"], name="workflow_node_unique")
        ]

    def __str__(self) -> str:
        return f"{self.node_id} ({self.kind}, {self.status})"

    @property
    def tool_call_id(self) -> str:
        return f"node-{self.node_id}"
