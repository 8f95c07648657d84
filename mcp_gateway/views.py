"""The "MCP clients" page of the portal: the gateways a person may point an MCP client at, with the
lines to paste, and their own API token (made or replaced here, shown once)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from mcp_gateway import selectors, services


@login_required(login_url="portal:login")
@require_http_methods(["GET", "POST"])
def connect(request: HttpRequest) -> HttpResponse:
    """GET: the page. POST: a new API token (any earlier one stops working), shown on this answer
    only; replacing one that exists must be confirmed (``confirm=yes``), since every client
    using it is refused from then on — without it, nothing changes and the page says why."""
    new_token = None
    refusal = ""
    had_token = selectors.token_created_at(user=request.user) is not None
    if request.method == "POST":
        if had_token and request.POST.get("confirm") != "yes":
            refusal = "Your token was not replaced: tick the box to confirm that its clients stop working."
        else:
            new_token = services.api_token_replace(user=request.user)
    gateways = [
        {"gateway": gateway, "address": request.build_absolute_uri(gateway.path)}
        for gateway in selectors.gateways_for(user=request.user)
    ]
    context = {
        "nav": "mcp",
        "gateways": gateways,
        "token_created_at": selectors.token_created_at(user=request.user),
        "new_token": new_token,
        "token_text": new_token or "<your token>",
        "refusal": refusal,
        "server_now": timezone.now(),
    }
    return render(request, "mcp_gateway/connect.html", context, status=400 if refusal else 200)
