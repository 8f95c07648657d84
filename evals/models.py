"""Eval sets and eval runs: an agent answers a set of cases with its hooks bypassed, in a sandbox.

The eval runner is the one path around the agent's hooks (docs/design.md §1.2): its runs say so
(``Run.hooks_bypassed``, ``execution_path="eval"``, a note in their trace), and it has no side
effects, ever: every tool call is answered without reaching the outside world — a dry run, or the
set's recorded answer for that tool — unless the set calls a read-only tool live, and then the
call still passes the organisation's enforced hooks and read-only mode. No eval asks a person
for approval. Delegates and DAG steps inside an eval inherit its sandbox
(:mod:`agents.tools.sandbox`).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from agents.models import Agent, Run
from agents.tools.sandbox import SandboxSpecError, sandbox_spec
from evals.grading import expectation_errors
from tenancy.models import organisation_key


class EvalSet(models.Model):
    organization = organisation_key(on_delete=models.PROTECT, related_name="eval_sets")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    live_tools = models.JSONField(
        default=list,
        blank=True,
        help_text='Tools the cases call for real, e.g. ["oa__purchase_list"]: only tools that just read '
        "(GET actions, sql_query). Their calls pass the organisation's enforced hooks (its audit log "
        "included) and read-only mode. Every other tool is answered without being called.",
    )
    tool_answers = models.JSONField(
        default=dict,
        blank=True,
        help_text="What a tool answers in these cases instead of being called, by tool name, e.g. "
        '{"oa__purchase_list": [{"id": "PO-1001", "amount": 1200}]}. A tool with no answer here '
        "(and not live) answers with a dry run naming the arguments it would have been called with.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        try:
            sandbox_spec(live_tools=self.live_tools, answers=self.tool_answers)
        except SandboxSpecError as exc:
            field = "live_tools" if "live" in str(exc) else "tool_answers"
            raise ValidationError({field: str(exc)}) from None

    def sandbox(self) -> dict[str, Any]:
        """The sandbox record every case run of this set keeps (:mod:`agents.tools.sandbox`)."""
        return sandbox_spec(live_tools=self.live_tools, answers=self.tool_answers)


class Check(models.TextChoices):
    CONTAINS = "contains", "Output contains"
    REGEX = "regex", "Output matches the regular expression"
    JSON_EQUALS = "json_equals", "Output is JSON equal to"


class EvalCase(models.Model):
    eval_set = models.ForeignKey(EvalSet, on_delete=models.CASCADE, related_name="cases")
    position = models.PositiveIntegerField(default=0)
    input = models.TextField()
    expectation = models.CharField(max_length=12, choices=Check.choices, default=Check.CONTAINS)
    expected = models.TextField(
        help_text="The text, regular expression or JSON the output is checked against."
    )

    class Meta:
        ordering = ["eval_set", "position", "pk"]

    def __str__(self) -> str:
        return f"{self.get_expectation_display()} {self.expected[:40]!r}"

    def clean(self) -> None:
        errors = expectation_errors(self.expectation, self.expected)
        if errors:
            raise ValidationError({"expected": errors})


class EvalStatus(models.TextChoices):
    RUNNING = "running"
    COMPLETED = "completed"


class EvalRun(models.Model):
    """One agent on one eval set. Its cases run concurrently; it completes when every case has."""

    organization = organisation_key(on_delete=models.PROTECT, related_name="+")
    eval_set = models.ForeignKey(EvalSet, on_delete=models.PROTECT, related_name="runs")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="eval_runs")
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=12, choices=EvalStatus.choices, default=EvalStatus.RUNNING)
    total = models.PositiveIntegerField(default=0)
    passed = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.agent} on {self.eval_set} #{self.pk}"

    @property
    def pass_rate(self) -> float | None:
        """Passed cases over all cases, once the run completed."""
        if self.status != EvalStatus.COMPLETED or not self.total:
            return None
        return self.passed / self.total


class Outcome(models.TextChoices):
    PENDING = "pending"
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error", "Run failed"


class EvalResult(models.Model):
    """One case of one eval run: the case as it was asked, the agent's run and the verdict."""

    eval_run = models.ForeignKey(EvalRun, on_delete=models.PROTECT, related_name="results")
    case = models.ForeignKey(EvalCase, null=True, on_delete=models.SET_NULL, related_name="+")
    position = models.PositiveIntegerField(default=0)
    input = models.TextField()
    expectation = models.CharField(max_length=12, choices=Check.choices)
    expected = models.TextField()
    run = models.OneToOneField(Run, on_delete=models.PROTECT, related_name="eval_result")
    outcome = models.CharField(max_length=8, choices=Outcome.choices, default=Outcome.PENDING)
    output = models.TextField(blank=True)
    detail = models.TextField(blank=True)

    class Meta:
        ordering = ["eval_run", "position", "pk"]

    def __str__(self) -> str:
        return f"case {self.position + 1}: {self.outcome}"
