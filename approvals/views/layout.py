"""What every page of the web inbox has: sign-in required, the layout's navigation and the
server's clock, and the shared answers to a bad request and a forbidden record.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse, reverse_lazy
from django.utils import timezone

from approvals import selectors
from approvals.selectors import display_name

LOGIN_URL = reverse_lazy("approvals:login")

signed_in = login_required(login_url=LOGIN_URL)


def render_page(
    request: HttpRequest, template: str, context: dict[str, Any], *, status: int = 200
) -> HttpResponse:
    """Render ``template`` with what the layout needs (navigation, the server's clock for the
    countdowns, so a client with a wrong clock still counts down correctly)."""
    user = request.user
    layout = {
        "show_history": selectors.may_view_history(user=user),
        "user_label": display_name(user) if user.is_authenticated else "",
        "server_now": timezone.now(),
        # Pages that list moments say in which zone (the server's: every time shown is in it).
        "time_zone": timezone.get_current_timezone_name(),
    }
    return render(request, template, {**layout, **context}, status=status)


def bad_request(request: HttpRequest, problems: dict[str, Any]) -> HttpResponse:
    """400, listing ``problems`` (a form's errors) by field."""
    return render_page(request, "approvals/bad_request.html", {"problems": problems}, status=400)


def forbidden(request: HttpRequest) -> HttpResponse:
    """403 for someone who may not read the record, with a way back to what they may use."""
    if selectors.may_use_inbox(user=request.user):
        back = ("Back to the inbox", reverse("approvals:inbox"))
    else:
        back = ("Back to your agents", reverse("portal:home"))
    return render_page(request, "approvals/forbidden.html", {"back": back}, status=403)


def csv_download(lines: Iterable[str], name: str) -> StreamingHttpResponse:
    """``lines`` streamed as a CSV attachment named ``<name>-<UTC timestamp>.csv``."""
    response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="{name}-{stamp}.csv"'
    return response
