"""``/im/email/<token>/``: where an approval e-mail's links lead. No session is needed, but the
link decides only for the approver it was sent to, once they are known to be the one clicking:
signed in as them, or holding the code this page sends to their own address
(:mod:`channels_im.email.links`), and only until its request's deadline, which it carries: past
it the page answers 410 and sends no code. Opening the page decides nothing (mail scanners open links);
the decision is a POST, checked again like any other (eligibility, the arguments shown, one
verdict) by ``approvals.services.confirmation_decide``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from approvals.selectors import display_name, request_for_decision
from approvals.services import clean_text, confirmation_decide
from channels_im.cards import card_facts
from channels_im.email.links import CODE_SECONDS, LinkExpired, code_check, code_send, count_within, link_of

CODES_PER_LINK = 3
"""Codes one link may have sent within :data:`~channels_im.email.links.CODE_SECONDS`."""


def _masked(address: str) -> str:
    name, _, domain = address.partition("@")
    return f"{name[:1]}***@{domain}" if domain else "your address"


def _page(request: HttpRequest, context: dict[str, Any], *, status: int = 200) -> HttpResponse:
    return render(request, "channels_im/email_decision.html", context, status=status)


@require_http_methods(["GET", "POST"])
def email_decision(request: HttpRequest, token: str) -> HttpResponse:
    try:
        link = link_of(token)
    except LinkExpired:
        problem = (
            "This link has expired: its request's deadline passed. If the request is still open, "
            "decide it in your web inbox."
        )
        return _page(request, {"problem": problem}, status=410)
    confirmation = request_for_decision(request_id=link.request_id) if link is not None else None
    approver = get_user_model().objects.filter(pk=link.user_id).first() if link is not None else None
    if link is None or confirmation is None or approver is None:
        return _page(
            request, {"problem": "This link is not valid: it may have been cut or changed."}, status=404
        )
    verb = "approve" if link.approve else "reject"
    base = {"facts": card_facts(confirmation), "verb": verb, "approver": display_name(approver)}
    if not confirmation.is_pending:
        return _page(request, {**base, "done": f"This request was already {confirmation.status}."})
    signed_in = request.user.is_authenticated
    if signed_in and request.user.pk != approver.pk:
        return _page(
            request,
            {
                **base,
                "problem": f"This link was sent to {display_name(approver)}; you are signed in as "
                f"{display_name(request.user)}. It decides nothing for you: decide in your own inbox.",
            },
            status=403,
        )
    proven = signed_in  # as the approver (checked above)
    if request.method == "GET":
        return _page(request, {**base, "proven": proven, "masked": _masked(approver.email)})
    action = request.POST.get("action")
    reason = clean_text(request.POST.get("reason", ""))
    if action == "code" and not proven:
        # Counted atomically: requests sent together cannot each read the same count.
        sends = f"fimone:email-code-sends:{token[-40:]}"
        if not count_within(sends, limit=CODES_PER_LINK, seconds=CODE_SECONDS):
            return _page(
                request,
                {**base, "problem": "Codes were sent too often for this link: wait ten minutes."},
                status=429,
            )
        code = code_send(token)
        send_mail(
            subject=f"Your code: {code}",
            message=f"Enter {code} on the page you opened to {verb} {base['facts'].tool}. "
            "If you did not open it, ignore this message: nothing is decided without the code.",
            from_email=None,
            recipient_list=[approver.email],
        )
        return _page(
            request, {**base, "code_sent": True, "masked": _masked(approver.email), "reason": reason}
        )
    if action != "decide":
        return _page(request, {**base, "problem": "Nothing to do."}, status=400)
    if not proven:
        problem = code_check(token, request.POST.get("code"))
        if problem is not None:
            context = {**base, "code_sent": True, "masked": _masked(approver.email), "reason": reason}
            return _page(request, {**context, "problem": f"Nothing was decided: {problem}."}, status=400)
    outcome = confirmation_decide(
        request_id=confirmation.pk,
        user=approver,
        approve=link.approve,
        reason=reason,
        via_channel_id=link.channel_id,
        external_id=f"email:{approver.email}",
        seen_args_sha256=link.args_sha256,
    )
    return _page(request, {**base, "outcome": outcome}, status=200 if outcome.counted else 409)
