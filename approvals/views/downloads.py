"""The auditor's record as CSV downloads, streamed (the lines are written by
:mod:`approvals.exports`), with the same filters and the same refusals as its pages.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from approvals import selectors
from approvals.exports import history_csv_lines, tool_calls_csv_lines
from approvals.views.history import history_form, tool_call_form
from approvals.views.layout import signed_in


@signed_in
@require_GET
def history_export(request: HttpRequest) -> HttpResponse:
    """The filtered history as CSV, streamed (see ``approvals.exports``)."""
    form = history_form(request)
    if isinstance(form, HttpResponse):
        return form
    requests = selectors.history_for(user=request.user, filters=form.filters())
    response = StreamingHttpResponse(history_csv_lines(requests), content_type="text/csv; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="approvals-{stamp}.csv"'
    return response


@signed_in
@require_GET
def tool_calls_export(request: HttpRequest) -> HttpResponse:
    """The filtered tool calls as CSV, streamed."""
    form = tool_call_form(request)
    if isinstance(form, HttpResponse):
        return form
    rows = selectors.tool_calls_for(user=request.user, filters=form.filters())
    response = StreamingHttpResponse(tool_calls_csv_lines(rows), content_type="text/csv; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="tool-calls-{stamp}.csv"'
    return response
