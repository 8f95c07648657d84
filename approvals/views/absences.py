"""``/approvals/away/``: an approver says they are away until a date and who decides in their
place, or that they are back; an organisation admin reassigns a person's pending requests to
someone else. Both through :mod:`approvals.services.absences`, which checks everything again."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from approvals import selectors
from approvals.models import Absence
from approvals.policy import APPROVER_ROLES
from approvals.selectors import display_name
from approvals.services.absences import AbsenceRefused, absence_end, absence_set, confirmation_reassign
from approvals.views.layout import forbidden, render_page, signed_in
from tenancy.models import Membership, Organization, Role

User = get_user_model()


class PersonChoice(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return display_name(obj)


def _approvers_of(organization_ids: Any) -> Any:
    ids = Membership.objects.filter(organization_id__in=organization_ids, role__in=APPROVER_ROLES).values(
        "user_id"
    )
    return User.objects.filter(pk__in=ids, is_active=True).order_by("username")


class AwayForm(forms.Form):
    organization = forms.ModelChoiceField(queryset=Organization.objects.none(), label="Organisation")
    until = forms.DateTimeField(
        label="Away until",
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )
    delegate = PersonChoice(queryset=User.objects.none(), label="Who decides in my place")

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["until"].help_text = f"In {timezone.get_current_timezone_name()}, the server's time zone."
        mine = Membership.objects.filter(user=user, role__in=APPROVER_ROLES).values("organization_id")
        self.fields["organization"].queryset = Organization.objects.filter(pk__in=mine).order_by("name")
        self.fields["delegate"].queryset = _approvers_of(mine).exclude(pk=user.pk)
        if self.fields["organization"].queryset.count() == 1:
            self.fields["organization"].initial = self.fields["organization"].queryset.get()


class ReassignForm(forms.Form):
    organization = forms.ModelChoiceField(queryset=Organization.objects.none(), label="Organisation")
    person = PersonChoice(queryset=User.objects.none(), label="The pending requests of")
    to = PersonChoice(queryset=User.objects.none(), label="Go to")

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        administered = _administered(user)
        self.fields["organization"].queryset = Organization.objects.filter(pk__in=administered).order_by(
            "name"
        )
        members = Membership.objects.filter(organization_id__in=administered).values("user_id")
        self.fields["person"].queryset = User.objects.filter(pk__in=members).order_by("username")
        self.fields["to"].queryset = _approvers_of(administered)


def _administered(user: Any) -> Any:
    if user.is_superuser:
        return Organization.objects.values("pk")
    return Membership.objects.filter(user=user, role=Role.ADMIN).values("organization_id")


@signed_in
@require_http_methods(["GET", "POST"])
def away(request: HttpRequest) -> HttpResponse:
    """Set an absence, end one, or (organisation admins) reassign a person's pending requests."""
    user = request.user
    is_approver = Membership.objects.filter(user=user, role__in=APPROVER_ROLES).exists()
    is_admin = user.is_superuser or Membership.objects.filter(user=user, role=Role.ADMIN).exists()
    if not (is_approver or is_admin):
        return forbidden(request)
    away_form = AwayForm(user=user)
    reassign_form = ReassignForm(user=user) if is_admin else None
    status = 200
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "away" and is_approver:
            away_form = AwayForm(request.POST, user=user)
            if away_form.is_valid():
                data = away_form.cleaned_data
                try:
                    absence = absence_set(
                        user=user,
                        organization_id=data["organization"].pk,
                        delegate=data["delegate"],
                        ends_at=_aware(data["until"]),
                    )
                except AbsenceRefused as exc:
                    away_form.add_error(None, f"{exc}.")
                else:
                    messages.success(
                        request,
                        f"You are away until {absence.ends_at:%Y-%m-%d %H:%M}: "
                        f"{display_name(absence.delegate)} decides in your place.",
                    )
                    return redirect("approvals:away")
            status = 400
        elif action == "back":
            absence = Absence.objects.filter(pk=_int(request.POST.get("absence")), user=user).first()
            if absence is not None:
                absence_end(absence=absence)
                messages.success(request, "Welcome back: your requests are yours alone again.")
            return redirect("approvals:away")
        elif action == "reassign" and reassign_form is not None:
            reassign_form = ReassignForm(request.POST, user=user)
            if reassign_form.is_valid():
                data = reassign_form.cleaned_data
                try:
                    moved = confirmation_reassign(
                        organization_id=data["organization"].pk, person=data["person"], to=data["to"], by=user
                    )
                except AbsenceRefused as exc:
                    reassign_form.add_error(None, f"{exc}.")
                else:
                    noun = "request" if moved == 1 else "requests"
                    messages.success(
                        request,
                        f"{moved} pending {noun} of {display_name(data['person'])} went to "
                        f"{display_name(data['to'])}.",
                    )
                    return redirect("approvals:away")
            status = 400
        else:
            return forbidden(request)
    absences = selectors.absences_of(user=user)
    context = {
        "is_approver": is_approver,
        "away_form": away_form,
        "reassign_form": reassign_form,
        "mine": absences.away,
        "standing_in": absences.standing_in,
    }
    return render_page(request, "approvals/away.html", context, status=status)


def _aware(moment: dt.datetime) -> dt.datetime:
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
