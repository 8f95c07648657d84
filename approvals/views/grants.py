"""``/approvals/grants/``: the standing approvals in force in the reader's organisations, each
with who granted it, what it covers, until when and how often it was used; its granter or an
organisation admin revokes it at once."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods

from approvals.models import StandingGrant
from approvals.policy import APPROVER_ROLES
from approvals.selectors import audited_organization_ids, grants_in_force
from approvals.services.grants import grant_revoke, grant_text, may_revoke
from approvals.views.layout import forbidden, render_page, signed_in
from tenancy.models import Membership, Role

READERS = (*APPROVER_ROLES, Role.AUDITOR, Role.OPERATOR)


@signed_in
@require_http_methods(["GET", "POST"])
def grants(request: HttpRequest) -> HttpResponse:
    """List the grants in force; ``POST grant=<id>`` revokes one (its granter, or an admin)."""
    user = request.user
    if user.is_superuser:
        organization_ids = list(audited_organization_ids(user=user))
    else:
        organization_ids = list(
            Membership.objects.filter(user=user, role__in=READERS).values_list("organization_id", flat=True)
        )
    if not organization_ids and not user.is_superuser:
        return forbidden(request)
    if request.method == "POST":
        grant = StandingGrant.objects.filter(
            pk=_int(request.POST.get("grant")), organization_id__in=organization_ids
        ).first()
        if grant is None or not may_revoke(grant=grant, user=user):
            return forbidden(request)
        grant_revoke(grant=grant, by=user)
        messages.success(request, f"Standing approval #{grant.pk} revoked: later calls ask a person again.")
        return redirect("approvals:grants")
    lines = [
        {"grant": grant, "text": grant_text(grant), "may_revoke": may_revoke(grant=grant, user=user)}
        for grant in grants_in_force(organization_ids=organization_ids)
    ]
    return render_page(request, "approvals/grants.html", {"lines": lines})


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None
