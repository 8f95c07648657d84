"""Conversations and their runs, with each run's trace: its events, the chat messages it
exchanged with its model, and the tool calls it made.

History (docs/design.md §1.9): every relation is PROTECT; nothing a run hangs from may be deleted while
the run exists.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from agents.models.agents import Agent
from tenancy.models import organisation_key


class Conversation(models.Model):
    # History (docs/design.md §1.9): every relation is PROTECT, so deleting an organisation, an agent or a
    # user that has conversations is refused; archive the agent or deactivate the user instead.
    organization = organisation_key(on_delete=models.PROTECT, related_name="conversations")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="conversations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="conversations")
    title = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    archived_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Archived by its user: out of their list, kept with all its runs for the record.",
    )

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"


class ExecutionPath(models.TextChoices):
    PORTAL = "portal"
    API = "api"
    DAG = "dag"
    DELEGATE = "delegate"
    WORKFLOW = "workflow"
    EVAL = "eval"
    MCP = "mcp", "MCP gateway"


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_RUN_STATUSES = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})


class Run(models.Model):
    # History (docs/design.md §1.9): nothing a run hangs from may be deleted while the run exists.
    conversation = models.ForeignKey(Conversation, on_delete=models.PROTECT, related_name="runs")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="runs")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="runs")
    parent_run = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    execution_path = models.CharField(max_length=16, choices=ExecutionPath.choices, default=ExecutionPath.API)
    parent_call_id = models.CharField(
        max_length=120,
        blank=True,
        editable=False,
        help_text="A child run: what of its parent it runs (a DAG step ``step:<id>``, or the "
        "``call_agent`` tool call's id). One child per parent and call.",
    )
    status = models.CharField(
        max_length=20, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True
    )
    input = models.TextField()
    output = models.TextField(blank=True)
    checkpoint = models.JSONField(default=dict, blank=True)
    hooks_bypassed = models.BooleanField(default=False)
    hook_chain = models.JSONField(
        null=True,
        blank=True,
        editable=False,
        help_text="The hook chain resolved when the run was created (declared hooks with their "
        "params, priority, timeout and on_error; system hooks). Resumes rebuild it from here.",
    )
    cancel_requested = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    lease_owner = models.CharField(max_length=100, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["user", "-created_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["parent_run", "parent_call_id"],
                condition=models.Q(parent_run__isnull=False),
                name="run_unique_child_per_call",
            )
        ]

    def __str__(self) -> str:
        return f"Run {self.pk} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_RUN_STATUSES


class RunEvent(models.Model):
    """One entry of a run's trace; ``seq`` orders a run's events (types: ``agents.events``)."""

    # No index of its own: the (run, seq) unique index serves every lookup by run.
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="events", db_index=False)
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=40)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="runevent_unique_seq")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.type}"

    def as_message(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "seq": self.seq,
            "type": self.type,
            "payload": self.payload,
            "created_at": self.created_at.isoformat(),
        }


class RunMessage(models.Model):
    """One chat message of a run's conversation with its model, appended in order and never
    changed: a step stores only its new messages instead of rewriting the whole history."""

    # No index of its own: the (run, index) unique index serves every lookup by run.
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="messages", db_index=False)
    index = models.PositiveIntegerField()
    message = models.JSONField()

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="runmessage_unique_index")]

    def __str__(self) -> str:
        return f"{self.run_id}[{self.index}] {self.message.get('role', '?')}"


class ToolExecution(models.Model):
    """Written before a tool runs (``started``) and after (``succeeded``/``failed``); a row left
    ``started`` means the process died mid-call: its outcome is unknown and it is never re-run."""

    class Status(models.TextChoices):
        STARTED = "started"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        UNKNOWN = "unknown"

    # No index of its own: the (run, tool_call_id) unique index serves every lookup by run.
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="tool_executions", db_index=False)
    tool_call_id = models.CharField(max_length=100)
    tool_name = models.CharField(max_length=120)
    args = models.JSONField(default=dict)
    args_sha256 = models.CharField(max_length=64)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.STARTED)
    result = models.JSONField(null=True, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "tool_call_id"], name="toolexecution_unique_call")
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} [{self.status}]"
