"""The auditor's record as CSV downloads, streamed (the lines are written by
:mod:`approvals.exports`), with the same filters and the same refusals as its pages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from approvals import selectors
from approvals.exports import history_csv_lines, tool_calls_csv_lines
from approvals.views.history import HistoryFilterForm, ToolCallFilterForm, history_form
from approvals.views.layout import csv_download, signed_in


def _csv_export(
    request: HttpRequest,
    form_class: type[HistoryFilterForm],
    rows_of: Callable[..., Any],
    lines_of: Callable[[Any], Iterable[str]],
    name: str,
) -> HttpResponse:
    """The rows a page's filters (``form_class``) select, as the CSV ``lines_of`` writes; or that
    page's refusal (403, 400) when its form says so."""
    form = history_form(request, form_class=form_class)
    if isinstance(form, HttpResponse):
        return form
    return csv_download(lines_of(rows_of(user=request.user, filters=form.filters())), name)


@signed_in
@require_GET
def history_export(request: HttpRequest) -> HttpResponse:
    """The filtered history as CSV, streamed (see ``approvals.exports``)."""
    return _csv_export(request, HistoryFilterForm, selectors.history_for, history_csv_lines, "approvals")


@signed_in
@require_GET
def tool_calls_export(request: HttpRequest) -> HttpResponse:
    """The filtered tool calls as CSV, streamed."""
    return _csv_export(
        request, ToolCallFilterForm, selectors.tool_calls_for, tool_calls_csv_lines, "tool-calls"
    )
