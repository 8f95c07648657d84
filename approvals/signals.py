"""What the approvals app tells higher apps (import down, signal up: docs/design.md §2).

Every signal is sent after the transaction that made them true committed, so a receiver never
looks for a row that is not there yet. ``channels_im`` listens to deliver and update cards.
"""

from django.dispatch import Signal

confirmation_opened = Signal()
"""A new request awaits a verdict. ``sender=ConfirmationRequest``, ``request_id`` (UUID),
``channel`` (the provider kind its card goes to; ``"web"`` is the inbox)."""

confirmation_settled = Signal()
"""A request left ``pending`` (decided, expired or cancelled): its card should show it.
``sender=ConfirmationRequest``, ``request_id``, ``channel``, ``status``."""

confirmation_voted = Signal()
"""A vote was counted and the request still waits for more (a quorum not yet met): its cards
should show the new tally. ``sender=ConfirmationRequest``, ``request_id``, ``channel``."""
