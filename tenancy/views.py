"""The pages of an invitation to an organisation (``/invitations/<token>/``).

- Signed in as the invitee: the invitation, and Accept (POST, with CSRF); then the page where
  their role starts (:func:`tenancy.invitations.landing_url`).
- Signed in as someone else: whom the invitation is for, and a way to sign out to accept it.
- Signed out, with an account that has a password: sign in to accept.
- Signed out, with an account that has none yet (invited by e-mail): on to setting a password,
  through Django's own password-setting view and token (:class:`InvitationPasswordView`), which
  accepts the invitation and signs them in.

Refusals (unknown, expired, accepted) are pages with their 4xx, never an error page.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.tokens import default_token_generator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.views.decorators.http import require_http_methods

from tenancy.invitations import (
    InvitationRefused,
    addressee_label,
    invitation_accept,
    invitation_check,
    invitation_find,
    invitee_of,
    landing_url,
)

TEMPLATE = "tenancy/invitation.html"


def _joined(request: HttpRequest, membership: Any) -> HttpResponse:
    messages.success(
        request,
        f"You joined {membership.organization.name} as {membership.get_role_display().lower()}.",
    )
    return redirect(landing_url(membership.role))


@require_http_methods(["GET", "POST"])
def invitation(request: HttpRequest, token: str) -> HttpResponse:
    """GET shows the invitation (or what to do to accept it); POST (with CSRF) accepts it."""
    user = request.user
    if not user.is_authenticated:
        return _signed_out(request, token)
    context: dict[str, Any] = {"user_label": user.get_full_name() or user.get_username(), "token": token}
    try:
        if request.method == "POST":
            return _joined(request, invitation_accept(token=token, user=user))
        found = invitation_check(token=token, user=user)
    except InvitationRefused as refused:
        context.update(problem=refused.message, addressee=refused.addressee)
        return render(request, TEMPLATE, context, status=refused.status)
    return render(request, TEMPLATE, {**context, "invitation": found, "landing": landing_url(found.role)})


def _signed_out(request: HttpRequest, token: str) -> HttpResponse:
    try:
        found = invitation_find(token=token)
    except InvitationRefused as refused:
        return render(request, TEMPLATE, {"problem": refused.message}, status=refused.status)
    invitee = invitee_of(found)
    if invitee is not None and not invitee.has_usable_password():
        uid = urlsafe_base64_encode(force_bytes(invitee.pk))
        set_token = default_token_generator.make_token(invitee)
        return redirect("invitation-password", invitation=token, uidb64=uid, token=set_token)
    context = {
        "invitation": found,
        "signed_out": True,
        "addressee": addressee_label(found),
        "login_url": f"{reverse('approvals:login')}?next={request.path}",
        "no_account": invitee is None,
    }
    return render(request, TEMPLATE, context)


class InvitationPasswordView(auth_views.PasswordResetConfirmView):
    """``/invitations/<invitation>/password/<uidb64>/<token>/``: Django's own "set a new password"
    view for a newly invited person, with the account's token (which expires, and is spent once
    the password is set) and its set-password form. Once the password is set, the invitation is
    accepted and the person is signed in, then sent where their role starts."""

    template_name = "tenancy/invitation_password.html"
    post_reset_login = True
    post_reset_login_backend = "django.contrib.auth.backends.ModelBackend"

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        try:
            self.invitation = invitation_find(token=kwargs["invitation"])
        except InvitationRefused as refused:
            return render(request, TEMPLATE, {"problem": refused.message}, status=refused.status)
        return super().dispatch(request, *args, **kwargs)

    def get_user(self, uidb64: str) -> Any:
        user = super().get_user(uidb64)
        invitee = invitee_of(self.invitation)
        if user is None or invitee is None or user.pk != invitee.pk or user.has_usable_password():
            return None  # only the invitee, and only for a first password
        return user

    def get_success_url(self) -> str:
        return landing_url(self.invitation.role)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(invitation=self.invitation, invitee=getattr(self, "user", None))
        return context

    def form_valid(self, form: Any) -> HttpResponse:
        super().form_valid(form)  # sets the password and signs them in
        try:
            membership = invitation_accept(token=self.kwargs["invitation"], user=self.user)
        except InvitationRefused as refused:
            return render(self.request, TEMPLATE, {"problem": refused.message}, status=refused.status)
        return _joined(self.request, membership)
