"""Signals other apps listen to (the approvals app cancels a cancelled run's pending requests)."""

from django.dispatch import Signal

run_cancelled = Signal()  # sender=Run, run_id=int, reason=str (why it was cancelled)

# Sent when a run that is still running is asked to stop: it ends at its next step, but one that
# waits inline for a verdict takes that step only when its window ends, so the approvals app
# withdraws its pending requests now (nobody approves a call whose run is being stopped).
run_cancel_requested = Signal()  # sender=Run, run_id=int, reason=str

# Sent once committed, each time a driven run stops running: it ended (completed, failed,
# cancelled) or parked on an approval (awaiting_approval). Workflows follow their nodes' runs by it.
# ``execution_path`` is the run's when the sender knew it (``None``: look it up), so that a
# receiver skips the runs of other paths without a query.
run_settled = Signal()  # sender=Run, run_id=int, status=str, execution_path=str | None
