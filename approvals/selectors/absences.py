"""Absences running now: who stands in for a person, and whom they stand in for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.utils import timezone

from approvals.models import Absence


@dataclass(frozen=True)
class AbsencesOf:
    """``user``'s absences running now (``away``: someone decides in their place) and those of
    others they stand in for (``standing_in``), each with its person and stand-in loaded."""

    away: list[Absence]
    standing_in: list[Absence]


def absences_of(*, user: Any) -> AbsencesOf:
    """The absences running now that concern ``user``, in one query, soonest end first."""
    now = timezone.now()
    running = list(
        Absence.objects.filter(ended_at__isnull=True, starts_at__lte=now, ends_at__gt=now)
        .filter(Q(user_id=user.pk) | Q(delegate_id=user.pk))
        .select_related("user", "delegate")
        .order_by("ends_at", "pk")
    )
    return AbsencesOf(
        away=[a for a in running if a.user_id == user.pk],
        standing_in=[a for a in running if a.delegate_id == user.pk],
    )
