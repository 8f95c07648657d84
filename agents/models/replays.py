"""Replays: a proposed hook chain run over an agent's recorded calls, dry (``console.chain_replay``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from agents.models.agents import Agent
from tenancy.models import organisation_key


class ChainReplay(models.Model):
    """One replay an operator asked for: which chain (``chain``, the record a run would keep, and
    ``chain_label`` saying where it came from), over which recorded calls (``window``: ``last``,
    ``since``, ``until``, ``tool``), and what it found — progress (``done`` of ``total``), the
    calls whose outcome would change (``changes``, one object each), counts per change and per
    hook (``summary``), or why it failed (``error``). Written by its task only, after it started;
    nothing in it ran a tool, opened a request or counted against a quota."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    organization = organisation_key(on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="chain_replays")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    chain = models.JSONField(help_text="The proposed chain, as a run would keep it.")
    chain_label = models.CharField(max_length=200)
    window = models.JSONField(default=dict)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    changes = models.JSONField(default=list)
    summary = models.JSONField(default=dict)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["agent", "-created_at"])]

    def __str__(self) -> str:
        return f"replay of {self.chain_label} on {self.agent_id} ({self.status})"

    @property
    def percent(self) -> int:
        return (
            100 if self.status == self.Status.DONE else int(100 * self.done / self.total) if self.total else 0
        )

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)

    def window_text(self) -> str:
        """The window in words: "the last 1,000 calls of oa__purchase_pay since 2026-12-01"."""
        window: dict[str, Any] = self.window or {}
        text = f"the last {window['last']:,} calls" if window.get("last") else "the calls"
        if window.get("tool"):
            text += f" of {window['tool']}"
        if window.get("since"):
            text += f" since {window['since']}"
        if window.get("until"):
            text += f" before {window['until']}"
        return text
