"""Sign-in's one answer of this app's own: the lockout page. The sign-in and sign-out pages are
Django's (``approvals.urls``): the admin's login form only admits staff, and approvers are
usually not staff.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def login_locked_out(request: HttpRequest, *_details: Any) -> HttpResponse:
    """The answer to a sign-in refused by the lockout (django-axes' ``AXES_LOCKOUT_CALLABLE``, for
    both login pages): 429 with how long to wait. It echoes nothing that was posted."""
    cool_off = int(settings.AXES_COOLOFF_TIME.total_seconds())
    response = render(request, "registration/locked_out.html", {"minutes": cool_off // 60}, status=429)
    response["Retry-After"] = str(cool_off)
    return response
