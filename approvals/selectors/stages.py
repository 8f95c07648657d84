"""A staged request's stages as pages and cards show them: each stage's people, votes and where
the request stands (approved, asked now, not yet asked)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from approvals.models import ConfirmationApprover, ConfirmationRequest, ConfirmationStatus, ConfirmationVote
from approvals.selectors.requests import display_name
from approvals.selectors.votes import VoteLine


@dataclass(frozen=True)
class StageLine:
    """One stage of a request: its place, name and quorum, who it asks, their votes, and its
    state: ``approved``, ``rejected``, ``expired``, ``cancelled``, ``asking`` (the request waits
    for it) or ``later`` (not asked yet; not asked at all once the request settled)."""

    number: int
    of: int
    name: str
    required: int
    state: str
    asked: list[str] = field(default_factory=list)
    votes: list[VoteLine] = field(default_factory=list)
    #: those it asks who have not voted yet (what the stage waits for)
    waiting: list[str] = field(default_factory=list)

    @property
    def current(self) -> bool:
        return self.state == "asking"

    @property
    def heading(self) -> str:
        """E.g. "Stage 2 of 2 — Finance (2 approvals)"."""
        quorum = f"{self.required} approval{'s' if self.required > 1 else ''}"
        return f"Stage {self.number} of {self.of} — {self.name} ({quorum})"

    @property
    def state_text(self) -> str:
        return {
            "approved": "approved",
            "rejected": "rejected",
            "expired": "expired: nobody decided in time",
            "cancelled": "cancelled",
            "asking": "asked now",
            "later": "not asked yet",
        }.get(self.state, self.state)

    @property
    def text(self) -> str:
        """One line for a card: "Stage 1 of 2 — Team lead (1 approval): approved — lee approved 10:02 UTC"."""
        line = f"{self.heading}: {self.state_text}"
        if self.votes:
            line += " — " + ", ".join(vote.text for vote in self.votes)
        return line


def stages_of(*, request: ConfirmationRequest) -> list[StageLine]:
    """The stages of ``request`` in order (``[]`` without stages), in two queries."""
    plan = request.stage_plan or []
    if not plan:
        return []
    asked: dict[int, list[str]] = {}
    asked_users: dict[int, list[tuple[int, str]]] = {}
    stage_of_user: dict[int, int] = {}
    rows = ConfirmationApprover.objects.filter(request_id=request.pk, withdrawn_at__isnull=True)
    for row in rows.select_related("user", "delegate_of").order_by("pk"):
        name = display_name(row.user)
        if row.delegate_of_id is not None:
            name += f" (for {display_name(row.delegate_of)})"
        asked.setdefault(row.stage, []).append(name)
        asked_users.setdefault(row.stage, []).append((row.user_id, name))
        stage_of_user[row.user_id] = row.stage
    votes: dict[int, list[VoteLine]] = {}
    voted: set[int] = set()
    for vote in ConfirmationVote.objects.filter(request_id=request.pk).select_related("user"):
        voted.add(vote.user_id)
        line = VoteLine(
            by=display_name(vote.user), approve=vote.approve, at=vote.created_at, reason=vote.reason
        )
        votes.setdefault(stage_of_user.get(vote.user_id, 0), []).append(line)
    settled = request.status != ConfirmationStatus.PENDING
    lines = []
    for index, stage in enumerate(plan):
        if index < request.stage_index:
            state = "approved"
        elif index == request.stage_index:
            state = str(request.status) if settled else "asking"
        else:
            state = "later"
        lines.append(
            StageLine(
                number=index + 1,
                of=len(plan),
                name=str(stage.get("name") or f"Stage {index + 1}"),
                required=int(stage.get("approvals_required") or 1),
                state=state,
                asked=asked.get(index, []),
                votes=sorted(votes.get(index, []), key=lambda v: v.at),
                waiting=[name for user_id, name in asked_users.get(index, []) if user_id not in voted],
            )
        )
    return lines


def current_stage_votes(*, request: ConfirmationRequest, stages: list[StageLine]) -> list[VoteLine]:
    """The votes of the stage ``request`` is at (what its tally counts)."""
    for line in stages:
        if line.number == request.stage_index + 1:
            return line.votes
    return []


def stage_heading(request: ConfirmationRequest) -> str:
    """The stage a staged request waits for, as its run's page shows it: "Stage 2 of 2 — Finance"
    (empty without stages)."""
    plan = request.stage_plan or []
    if not plan or request.stage_index >= len(plan):
        return ""
    name = plan[request.stage_index].get("name") or ""
    where = f"Stage {request.stage_index + 1} of {len(plan)}"
    return f"{where} — {name}" if name else where


def stage_vote_summary(*, request: ConfirmationRequest) -> dict[str, Any]:
    """What ``approval.voted`` carries for a staged request: the votes of its current stage (what
    its tally counts) against that stage's quorum, the stage, who it asks and its deadline."""
    stages = stages_of(request=request)
    votes = current_stage_votes(request=request, stages=stages)
    asked = next((line.asked for line in stages if line.number == request.stage_index + 1), [])
    return {
        "approvers": [{"name": name} for name in asked],
        "votes": [vote.as_payload() for vote in votes],
        "approvals": sum(1 for vote in votes if vote.approve),
        "approvals_required": request.approvals_required,
        "stage": stage_heading(request),
        "expires_at": request.expires_at.isoformat(),
    }
