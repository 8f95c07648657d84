"""Deciding several requests at once: the inbox's batch bar and the API's batch endpoint.

Each request of a batch is decided by :func:`~approvals.services.deciding.confirmation_decide`,
exactly as it would be alone — the decider's eligibility, the hash of the arguments they were
shown, the quorum, the one verdict — and in a transaction of its own: a request that someone else
decided a moment before, or that the decider may not decide, is answered as it would be alone and
leaves the others' decisions standing. That is why this service is not one transaction (HackSoft's
``@transaction.atomic``): one lock held across a hundred requests would stall every other decider,
and a refusal of one would undo decisions that stand on their own.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from approvals.services.deciding import DecisionOutcome, confirmation_decide

MAX_BATCH = 100
"""The most requests one batch decides."""


class BatchTooLarge(ValueError):
    """More than :data:`MAX_BATCH` requests, or none: nothing was decided."""


@dataclass(frozen=True)
class BatchItem:
    """One request of a batch, with the hash of the arguments the decider was shown (optional
    for a rejection; an approval of arguments changed since is refused, as alone)."""

    request_id: uuid.UUID
    args_sha256: str = ""


@dataclass(frozen=True)
class BatchLine:
    """One request's outcome, as a single decision would have told it."""

    request_id: uuid.UUID
    outcome: DecisionOutcome


def check_batch(items: Sequence[BatchItem]) -> list[BatchItem]:
    """The batch without repeats (a request listed twice is decided once, at its first place), or
    :class:`BatchTooLarge`."""
    unique: dict[uuid.UUID, BatchItem] = {}
    for item in items:
        unique.setdefault(item.request_id, item)
    if not unique:
        raise BatchTooLarge("Select at least one request.")
    if len(unique) > MAX_BATCH:
        raise BatchTooLarge(f"At most {MAX_BATCH} requests at once; {len(unique)} were selected.")
    return list(unique.values())


def confirmation_decide_batch(
    *, items: Sequence[BatchItem], user: Any, approve: bool, reason: str = ""
) -> list[BatchLine]:
    """Approve or reject every request of ``items`` for ``user``, with one ``reason``, each as a
    single decision (module docstring), in the order given. Precondition: the caller counted the
    batch's decisions against the decider's rate (``DECISION_RATE``), all of them or none."""
    return [
        BatchLine(
            item.request_id,
            confirmation_decide(
                request_id=item.request_id,
                user=user,
                approve=approve,
                reason=reason,
                seen_args_sha256=item.args_sha256,
            ),
        )
        for item in check_batch(items)
    ]
