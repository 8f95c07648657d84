"""Signals other apps listen to (the approvals app cancels a cancelled run's pending requests)."""

from django.dispatch import Signal

run_cancelled = Signal()  # sender=Run, run_id=int, reason=str (why it was cancelled)
