"""The admin's header links to the approvals inbox (with the count waiting) for those requests may
go to, even when nothing is pending, and to the approval history for those who read the record;
an operator, who configures approvals but never decides them, gets no "Inbox (0)"."""

from __future__ import annotations

import pytest

from tests.admin_kit import logged_in, page_text

pytestmark = pytest.mark.django_db

INBOX = '<a href="/approvals/" class="nav-inbox"'
HISTORY = '<a href="/approvals/history/" class="nav-history">Approval history</a>'


def test_an_admin_sees_the_inbox_and_the_history_with_nothing_pending(governed) -> None:
    page = page_text(logged_in(governed.admin).get("/admin/"))

    assert INBOX in page and "Inbox (0)</a>" in page
    assert HISTORY in page


def test_an_operator_sees_the_history_but_no_inbox_until_something_waits_for_them(governed) -> None:
    from tests.approvals.kit import recorded_request

    page = page_text(logged_in(governed.operator).get("/admin/"))
    assert HISTORY in page and INBOX not in page

    recorded_request(governed, approvers=[governed.operator])  # named on a request after all
    assert "Inbox (1)</a>" in page_text(logged_in(governed.operator).get("/admin/"))


def test_an_auditor_sees_the_history_and_no_inbox_to_decide_in(governed) -> None:
    page = page_text(logged_in(governed.auditor).get("/admin/"))

    assert HISTORY in page and INBOX not in page


def test_the_inbox_link_counts_what_waits_for_the_user(governed) -> None:
    from tests.approvals.kit import recorded_request

    recorded_request(governed, approvers=[governed.admin])
    recorded_request(governed, approvers=[governed.admin])
    recorded_request(governed, approvers=[governed.approver])

    page = page_text(logged_in(governed.admin).get("/admin/agents/agent/"))

    assert "Inbox (2)</a>" in page and 'title="2 waiting for your decision"' in page
