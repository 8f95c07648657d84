"""The page where an invited user accepts an invitation to an organisation (``/invitations/<token>/``)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.views.decorators.http import require_http_methods

from agents.invitations import InvitationRefused, invitation_accept, invitation_check

TEMPLATE = "agents/invitation.html"


@login_required(login_url=reverse_lazy("approvals:login"))
@require_http_methods(["GET", "POST"])
def invitation(request: HttpRequest, token: str) -> HttpResponse:
    """GET shows the invitation; POST (with CSRF) accepts it. Refusals are pages with their 4xx."""
    user = request.user
    context = {"user_label": user.get_full_name() or user.get_username()}
    try:
        if request.method == "POST":
            membership = invitation_accept(token=token, user=user)
            messages.success(
                request,
                f"You joined {membership.organization.name} as {membership.get_role_display().lower()}.",
            )
            return redirect("approvals:inbox")
        found = invitation_check(token=token, user=user)
    except InvitationRefused as refused:
        return render(request, TEMPLATE, {**context, "problem": refused.message}, status=refused.status)
    return render(request, TEMPLATE, {**context, "invitation": found})
