"""Inbound callbacks: one URL per channel configuration, ``/im/callback/<callback_key>/``; and
the page where a clicker links their IM account to their own (``/im/link/<token>/``).

The provider verifies the request (signature, token, timestamp window, replay) before it parses
anything; only then is the clicker mapped to a user of ours and the decision handed to the
approvals service (:mod:`channels_im.callbacks`, or on the event loop :mod:`channels_im.quick`).
Nothing here ever answers 500: a failure is a clear 4xx and a log line.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from approvals.services import clicks_on_the_loop
from channels_im import quick
from channels_im.callbacks import im_callback_in_thread
from channels_im.identities import LinkRefused, im_identity_link, link_offer_check


@csrf_exempt  # verified by the provider's signature instead; the platform holds no CSRF token
@require_http_methods(["GET", "POST"])
async def im_callback(http_request: HttpRequest, callback_key: str) -> HttpResponse:
    """Callbacks are answered on the server's event loop where they can be
    (:mod:`channels_im.quick`), else in a thread, as Django runs every synchronous view."""
    if clicks_on_the_loop():
        return await quick.answer_callback(http_request, callback_key)
    return await sync_to_async(im_callback_in_thread)(http_request, callback_key)


LINK_TEMPLATE = "channels_im/link.html"


@login_required(login_url=reverse_lazy("approvals:login"))
@require_http_methods(["GET", "POST"])
def link_identity(http_request: HttpRequest, token: str) -> HttpResponse:
    """Link the IM account a one-time link was made for to the signed-in user (GET asks, POST
    confirms). Refusals are pages with their 4xx status and a plain message."""
    user = http_request.user
    context = {"user_label": user.get_full_name() or user.get_username()}
    try:
        if http_request.method == "POST":
            identity = im_identity_link(token=token, user=user)
            messages.success(
                http_request,
                f"Your {identity.get_provider_display()} account is now linked in "
                f"{identity.organization.name}: your clicks on approval cards count as yours.",
            )
            return redirect("approvals:inbox")
        offer = link_offer_check(token=token, user=user)
    except LinkRefused as refused:
        return render(
            http_request, LINK_TEMPLATE, {**context, "problem": refused.message}, status=refused.status
        )
    return render(http_request, LINK_TEMPLATE, {**context, "offer": offer})
