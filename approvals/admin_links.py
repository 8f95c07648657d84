"""What the admin shows of the approvals pages beside their models: the header's links to the
inbox (with the count waiting) and to the approval history, and the history's row in the index's
Audit group. Registered with the admin site (:mod:`fimone.admin_site`) by ``ApprovalsConfig.ready``.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import reverse

from approvals.selectors import inbox_for, may_use_inbox, may_view_history


def approval_links(request: HttpRequest) -> dict[str, Any]:
    """The header's links to the approvals inbox (and the count waiting) and to the approval
    history, for the staff users who may use them (empty for anyone else)."""
    user = request.user
    if not getattr(user, "is_authenticated", False) or not user.is_staff:
        return {}
    pending = inbox_for(user=user).count()
    return {
        "inbox_url": reverse("approvals:inbox") if pending or may_use_inbox(user=user) else "",
        "pending": pending,
        "history_url": reverse("approvals:history") if may_view_history(user=user) else "",
    }


def history_entry(request: HttpRequest) -> dict[str, Any] | None:
    """The approval history's row in the admin index, for those who may read it."""
    if not may_view_history(user=request.user):
        return None
    return {
        "name": "Approval history (filters, CSV export)",
        "object_name": "ApprovalHistory",
        "admin_url": reverse("approvals:history"),
        "add_url": None,
        "view_only": True,
        "perms": {"view": True},
    }
