"""Signals other apps listen to (the approvals app cancels a cancelled run's pending requests)."""

from django.dispatch import Signal

run_cancelled = Signal()  # sender=Run, run_id=int, reason=str (why it was cancelled)

# Sent once committed, each time a driven run stops running: it ended (completed, failed,
# cancelled) or parked on an approval (awaiting_approval). Workflows follow their nodes' runs by it.
run_settled = Signal()  # sender=Run, run_id=int, status=str
