"""E-mail: a message per approver, with the call's business fields and two signed links (approve,
reject), through Django's e-mail framework (the ``EMAIL_*`` settings: SMTP in production).

A request's message goes to the people its current stage asks (all its approvers without stages),
each their own links (:mod:`channels_im.email.links`); people asked later — the next stage, an
escalation tier — get theirs when the request is sent again, and nobody gets the same request
twice (the message reference lists who was mailed). A sent e-mail cannot be changed, so nothing is
updated after a vote or the verdict. The configuration's ``settings_json`` may name the sender
(``{"from": "Approvals <approvals@example.com>"}``); the default is ``DEFAULT_FROM_EMAIL``.
"""

from __future__ import annotations

import logging
import smtplib
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMultiAlternatives, get_connection
from django.core.validators import validate_email
from django.template.loader import render_to_string
from django.urls import reverse

from approvals.channel_contract import Channel, DeliveryError
from approvals.channels import register_provider
from approvals.models import ConfirmationApprover, ConfirmationEvent
from channels_im.cards import card_facts
from channels_im.email.links import Link, link_token

log = logging.getLogger(__name__)

REF_PREFIX = "email:"


def _mailed_before(request: Any) -> set[int]:
    """Who was mailed this request already (from its ``delivered`` events)."""
    mailed: set[int] = set()
    for details in request.events.filter(kind=ConfirmationEvent.Kind.DELIVERED).values_list(
        "details", flat=True
    ):
        ref = str((details or {}).get("message_id") or "")
        if ref.startswith(REF_PREFIX):
            mailed |= {int(part) for part in ref[len(REF_PREFIX) :].split(",") if part.isdigit()}
    return mailed


def link_url(link: Link) -> str:
    return settings.SITE_URL + reverse("im-email-decision", args=[link_token(link)])


@register_provider
class EmailChannel(Channel):
    kind = "email"
    updates_pending_cards = False

    def sender(self) -> str:
        options = (
            self.config.settings_json
            if self.config is not None and isinstance(self.config.settings_json, dict)
            else {}
        )
        return str(options.get("from") or settings.DEFAULT_FROM_EMAIL)

    def check_config(self) -> None:
        options = self.config.settings_json if isinstance(self.config.settings_json, dict) else {}
        sender = options.get("from")
        if sender:
            address = str(sender).rsplit("<", 1)[-1].rstrip(">").strip()
            try:
                validate_email(address)
            except ValidationError:
                raise ValueError(f"from: {sender!r} is not an e-mail address") from None
        unknown = set(options) - {"from"}
        if unknown:
            raise ValueError(f"unknown settings {sorted(unknown)} (an e-mail channel takes only 'from')")

    def send_interactive_card(self, request: Any, *, maybe_posted: bool = False) -> str:
        asked = (
            ConfirmationApprover.objects.filter(
                request_id=request.pk, stage=request.stage_index, withdrawn_at__isnull=True
            )
            .select_related("user")
            .order_by("pk")
        )
        already = _mailed_before(request)
        facts = card_facts(request)
        messages, mailed = [], []
        for row in asked:
            user = row.user
            if user.pk in already or not user.is_active or not user.email:
                continue
            links = {
                verdict: link_url(
                    Link(
                        str(request.pk),
                        user.pk,
                        verdict == "approve",
                        request.args_sha256,
                        self.config.pk,
                        request.expires_at,
                    )
                )
                for verdict in ("approve", "reject")
            }
            context = {"facts": facts, "user": user, "links": links, "request": request}
            message = EmailMultiAlternatives(
                subject=f"Approval needed: {facts.tool} for {facts.requester} ({facts.agent})",
                body=render_to_string("channels_im/email_request.txt", context),
                from_email=self.sender(),
                to=[user.email],
                headers={"X-FIM-Request": str(request.pk)},
            )
            message.attach_alternative(
                render_to_string("channels_im/email_request.html", context), "text/html"
            )
            messages.append(message)
            mailed.append(user.pk)
        if not mailed and not already:
            raise DeliveryError("none of the people asked has an e-mail address", retryable=False)
        if messages:
            try:
                with get_connection(fail_silently=False) as connection:
                    connection.send_messages(messages)
            except (TimeoutError, smtplib.SMTPException, OSError) as exc:
                raise DeliveryError(
                    f"the mail server refused or did not answer: {exc}", maybe_sent=False
                ) from exc
        return REF_PREFIX + ",".join(str(pk) for pk in mailed)

    def update_card(self, request: Any) -> None:
        """A sent e-mail cannot change: nothing to do."""
        return None
