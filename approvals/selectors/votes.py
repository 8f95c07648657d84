"""Votes on a request: the tally against its quorum, each vote as people read it, and whether a
person may still vote or edit the arguments.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db.models import Count

from approvals.models import ConfirmationApprover, ConfirmationRequest, ConfirmationStatus, ConfirmationVote
from approvals.presentation import moment_text
from approvals.selectors.requests import display_name

_NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def _count_words(n: int) -> str:
    return _NUMBER_WORDS.get(n, str(n))


@dataclass(frozen=True)
class Tally:
    """The votes on a request against its quorum (the snapshot taken at opening).

    ``eligible`` is the size of the approver snapshot: with ``any_rejection_rejects`` off, a
    request is rejected once so many have rejected that the others can no longer reach
    ``required``."""

    approvals: int
    rejections: int
    required: int
    eligible: int
    any_rejection_rejects: bool = True

    @property
    def outcome(self) -> str | None:
        """``approved``, ``rejected``, or ``None`` while the request must wait for more votes."""
        if self.rejections and self.any_rejection_rejects:
            return ConfirmationStatus.REJECTED
        if self.approvals >= self.required:
            return ConfirmationStatus.APPROVED
        undecided = max(self.eligible - self.approvals - self.rejections, 0)
        if self.approvals + undecided < self.required:
            return ConfirmationStatus.REJECTED
        return None

    @property
    def is_quorum(self) -> bool:
        """Whether the request needs more than one approval (cards show a tally only then)."""
        return self.required > 1

    @property
    def count_text(self) -> str:
        """E.g. "1 of 2 approvals", "1 of 3 approvals, 1 rejection"."""
        noun = "approval" if self.required == 1 else "approvals"
        line = f"{self.approvals} of {self.required} {noun}"
        if self.rejections:
            line += f", {self.rejections} rejection" + ("s" if self.rejections > 1 else "")
        return line

    @property
    def waiting_text(self) -> str:
        """E.g. "waiting for one more"; empty once the votes settle the request."""
        missing = self.required - self.approvals
        return f"waiting for {_count_words(missing)} more" if self.outcome is None and missing > 0 else ""

    @property
    def text(self) -> str:
        """E.g. "1 of 2 approvals — waiting for one more"."""
        return self.count_text + (f" — {self.waiting_text}" if self.waiting_text else "")

    def text_with(self, votes: list[VoteLine]) -> str:
        """The tally with who voted, e.g. "1 of 2 approvals: april approved 10:02 UTC — waiting for
        one more" (a vote's reason in quotes after it)."""
        if not votes:
            return self.text
        said = ", ".join(vote.text + (f" (“{vote.reason}”)" if vote.reason else "") for vote in votes)
        return f"{self.count_text}: {said}" + (f" — {self.waiting_text}" if self.waiting_text else "")


def tally_of(*, request: ConfirmationRequest) -> Tally:
    """Count the votes on ``request`` (two indexed queries): of a staged request, those of the
    people its current stage asks, against that stage's quorum."""
    votes = ConfirmationVote.objects.filter(request_id=request.pk)
    asked = ConfirmationApprover.objects.filter(request_id=request.pk)
    if request.stage_plan:
        asked = asked.filter(stage=request.stage_index)
        votes = votes.filter(user_id__in=asked.values("user_id"))
    counted = dict(votes.values("approve").annotate(n=Count("pk")).values_list("approve", "n"))
    # Seats, not people: an absent approver's stand-in takes their seat (one vote between them),
    # and a reassigned person's seat went to whom it was reassigned to.
    seats = asked.filter(withdrawn_at__isnull=True, absence__isnull=True)
    return Tally(
        approvals=counted.get(True, 0),
        rejections=counted.get(False, 0),
        required=request.approvals_required,
        eligible=seats.count(),
        any_rejection_rejects=request.any_rejection_rejects,
    )


@dataclass(frozen=True)
class VoteLine:
    """One vote as pages, cards and run events show it: who, which way, when, why."""

    by: str
    approve: bool
    at: dt.datetime
    reason: str = ""

    @property
    def verb(self) -> str:
        return "approved" if self.approve else "rejected"

    @property
    def text(self) -> str:
        """E.g. "april approved 10:02 UTC"."""
        return f"{self.by} {self.verb} {moment_text(self.at)}"

    def as_payload(self) -> dict[str, Any]:
        """``{"by", "approve", "at", "reason"}`` for run events (``approval.voted``, ``approval.decided``)."""
        return {"by": self.by, "approve": self.approve, "at": self.at.isoformat(), "reason": self.reason}


def votes_by_request(*, request_ids: list[Any]) -> dict[Any, list[VoteLine]]:
    """The votes on each of ``request_ids``, oldest first, with their voters' names (one query)."""
    votes: dict[Any, list[VoteLine]] = {}
    rows = (
        ConfirmationVote.objects.filter(request_id__in=request_ids)
        .select_related("user")
        .order_by("created_at", "pk")
    )
    for vote in rows:
        votes.setdefault(vote.request_id, []).append(
            VoteLine(by=display_name(vote.user), approve=vote.approve, at=vote.created_at, reason=vote.reason)
        )
    return votes


def votes_of(*, request: ConfirmationRequest) -> list[VoteLine]:
    """The votes on ``request``, oldest first."""
    return votes_by_request(request_ids=[request.pk]).get(request.pk, [])


def vote_summary(*, request: ConfirmationRequest) -> dict[str, Any]:
    """The votes of ``request`` as a run event carries them: ``{"votes": [{"by", "approve", "at",
    "reason"}], "approvals": <approving votes>, "approvals_required"}``."""
    votes = votes_of(request=request)
    return {
        "votes": [vote.as_payload() for vote in votes],
        "approvals": sum(1 for vote in votes if vote.approve),
        "approvals_required": request.approvals_required,
    }


def may_edit_arguments(*, request: ConfirmationRequest) -> bool:
    """Whether an approver may still change ``request``'s arguments: its policy allows it, it is
    pending, and nobody has voted on the arguments yet."""
    return (
        request.allow_edit_on_approve
        and request.is_pending
        and not ConfirmationVote.objects.filter(request_id=request.pk).exists()
    )


def has_voted(*, request: ConfirmationRequest, user: Any) -> bool:
    return ConfirmationVote.objects.filter(request_id=request.pk, user_id=user.pk).exists()


def seat_taken(*, request: ConfirmationRequest, user: Any) -> str | None:
    """Why ``user``'s seat on ``request`` has voted already through someone else (``None`` when it
    has not): the person they stand in for voted, or their stand-in voted in their place. One
    seat, one vote: an absence never lets two people vote for one approver."""
    delegator = (
        ConfirmationApprover.objects.filter(request_id=request.pk, user_id=user.pk)
        .values_list("delegate_of_id", flat=True)
        .first()
    )
    if delegator is not None:
        vote = (
            ConfirmationVote.objects.filter(request_id=request.pk, user_id=delegator)
            .select_related("user")
            .first()
        )
        if vote is not None:
            return f"{display_name(vote.user)}, whom you stand in for, has already voted on it"
    stand_ins = ConfirmationApprover.objects.filter(request_id=request.pk, delegate_of_id=user.pk).values(
        "user_id"
    )
    vote = (
        ConfirmationVote.objects.filter(request_id=request.pk, user_id__in=stand_ins)
        .select_related("user")
        .first()
    )
    if vote is not None:
        return f"{display_name(vote.user)} has already voted on it in your place"
    return None
