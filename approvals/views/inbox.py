"""The approver's pages: the inbox of pending requests (and its live refresh), one request with
its event log, and the decision form's answer.

Thin views (HackSoft style): each validates its input with a form, reads through
``approvals.selectors`` and writes through the one service call ``confirmation_decide``. Requests
a user may not read are reported as 404, so ids of other people's requests reveal nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import redirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from approvals import presentation, selectors
from approvals.apis import DecisionThrottle
from approvals.condition_rows import ConditionRowsWidget, check_rows
from approvals.event_lines import EventLine
from approvals.services import (
    MAX_BATCH,
    MAX_REASON_LENGTH,
    BatchItem,
    BatchTooLarge,
    check_batch,
    confirmation_decide,
    confirmation_decide_batch,
)
from approvals.services.grants import GrantAsk, GrantRefused, confirmation_approve_granting, grant_text
from approvals.views.cards import RequestCard, left_notice
from approvals.views.layout import bad_request, render_page, signed_in
from fimone.parsers import loads as json_loads

MAX_EDITED_ARGS_LENGTH = 100_000


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    reason = forms.CharField(required=False, max_length=MAX_REASON_LENGTH, strip=True)
    # Offered when the request's policy allows edits: the arguments to run instead, as JSON.
    arguments = forms.CharField(required=False, max_length=MAX_EDITED_ARGS_LENGTH, strip=True)
    # The hash of the arguments the page showed: approving arguments changed since is refused.
    args_sha256 = forms.CharField(required=False, max_length=64)
    # A standing approval asked with the approval (when the request's policy allows it).
    grant = forms.BooleanField(required=False)
    grant_scope = forms.ChoiceField(
        required=False, choices=[("conversation", "conversation"), ("agent", "agent")]
    )
    grant_hours = forms.IntegerField(required=False, min_value=1)
    grant_until_revoked = forms.BooleanField(required=False)
    # Rows of field, operator and value (approvals.condition_rows), posted as their JSON.
    grant_conditions = forms.CharField(
        required=False,
        max_length=MAX_EDITED_ARGS_LENGTH,
        strip=True,
        widget=ConditionRowsWidget(preview=False),
    )

    def clean_grant_conditions(self) -> list[Any]:
        text = self.cleaned_data["grant_conditions"]
        if not text:
            return []
        try:
            value = json_loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"The conditions cannot be read: {exc}.") from None
        if not isinstance(value, list):
            raise forms.ValidationError("The conditions must be a list of {field, op, value}.")
        check_rows(value)
        return value

    def grant_ask(self) -> GrantAsk | None:
        data = self.cleaned_data
        if not data.get("grant") or data.get("decision") != "approve":
            return None
        # No hours and not until revoked reads as 0 hours, which the service refuses in words.
        hours = None if data.get("grant_until_revoked") else data.get("grant_hours") or 0
        return GrantAsk(
            scope=data.get("grant_scope") or "conversation",
            hours=hours,
            conditions=data.get("grant_conditions") or [],
        )

    def clean_arguments(self) -> dict[str, Any] | None:
        text = self.cleaned_data["arguments"]
        if not text:
            return None
        try:
            value = json_loads(text)
        except ValueError as exc:  # InvalidJSON: not JSON, or nested too deep (never RecursionError)
            raise forms.ValidationError(f"The arguments cannot be read: {exc}.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("The arguments must be a JSON object.")
        return value


class InboxFilterForm(forms.Form):
    """The inbox's filters. The lists offer what the inbox holds; a value it no longer holds (a
    shared link, a request decided meanwhile) simply matches nothing."""

    agent = forms.IntegerField(required=False, widget=forms.Select)
    tool = forms.CharField(required=False, max_length=120, widget=forms.Select)
    requester = forms.IntegerField(required=False, label="Requested by", widget=forms.Select)
    amount_min = forms.DecimalField(required=False, label="Amount from", max_digits=30, decimal_places=6)
    amount_max = forms.DecimalField(required=False, label="Amount up to", max_digits=30, decimal_places=6)

    def __init__(self, *args: Any, requests: list[Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        agents = {r.agent_id: r.agent.name for r in requests}
        tools = {r.tool_name: r.tool_title or presentation.title_of(r.tool_name) for r in requests}
        people = {r.requested_by_id: selectors.display_name(r.requested_by) for r in requests}
        for name, options, anyone in (
            ("agent", agents, "Any agent"),
            ("tool", tools, "Any tool"),
            ("requester", people, "Anyone"),
        ):
            ordered = sorted(options.items(), key=lambda item: item[1].lower())
            self.fields[name].widget.choices = [("", anyone), *ordered]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        low, high = data.get("amount_min"), data.get("amount_max")
        if low is not None and high is not None and high < low:
            self.add_error("amount_max", "The upper bound is below the lower one.")
        return data

    @property
    def active(self) -> bool:
        return (
            self.is_bound and self.is_valid() and any(v not in (None, "") for v in self.cleaned_data.values())
        )

    def keeps(self, confirmation: Any) -> bool:
        """Whether ``confirmation`` passes the filters (an amount bound leaves out calls without
        an amount)."""
        data = self.cleaned_data
        if data.get("agent") is not None and confirmation.agent_id != data["agent"]:
            return False
        if data.get("tool") and confirmation.tool_name != data["tool"]:
            return False
        if data.get("requester") is not None and confirmation.requested_by_id != data["requester"]:
            return False
        low, high = data.get("amount_min"), data.get("amount_max")
        if low is None and high is None:
            return True
        amount = presentation.amount_of(confirmation.tool_args)
        return amount is not None and (low is None or amount >= low) and (high is None or amount <= high)


def _inbox_filtered(request: HttpRequest) -> tuple[list[Any], InboxFilterForm, int]:
    """The user's pending requests, the filter form (bound to the query) and how many wait in all.
    Invalid filters filter nothing (the form says what is wrong)."""
    requests = list(selectors.inbox_for(user=request.user))
    filters = {k: v for k, v in request.GET.items() if k in InboxFilterForm.base_fields}
    form = InboxFilterForm(filters or None, requests=requests)
    shown = [r for r in requests if form.keeps(r)] if form.active else requests
    return shown, form, len(requests)


@signed_in
@require_GET
def inbox(request: HttpRequest) -> HttpResponse:
    """The pending requests the user may decide, soonest deadline first; filtered on request, and
    decided one by one or several at once (:func:`request_decide_batch`)."""
    shown, form, total = _inbox_filtered(request)
    bad = form.is_bound and not form.is_valid()
    return render_page(
        request,
        "approvals/inbox.html",
        {
            "cards": [RequestCard.of(r) for r in shown],
            "stand_ins": selectors.stand_in_for(user=request.user, request_ids=[r.pk for r in shown]),
            "grant_offers": selectors.grant_offers(shown),
            "total": total,
            "filters": form,
            "filtered": form.active,
            "query": request.GET.urlencode(),
            "max_batch": MAX_BATCH,
            "absences": selectors.absences_of(user=request.user),
            "nav": "inbox",
        },
        status=400 if bad else 200,
    )


def _ids(text: str, *, most: int = 200) -> set[uuid.UUID]:
    """The request ids of a comma-separated list; what is not an id is left out."""
    ids = set()
    for part in text.split(",")[:most]:
        try:
            ids.add(uuid.UUID(part.strip()))
        except ValueError:
            continue
    return ids


@signed_in
@require_GET
def inbox_live(request: HttpRequest) -> JsonResponse:
    """What a live inbox page needs after a push (``approvals.live``): the user's pending count,
    and with ``?cards=1`` their inbox's cards as HTML, in the inbox's order (the page adds the
    new ones and drops those that left), filtered as the page is (it sends its filters). The same
    read as :func:`inbox`: nothing more is shown. With ``shown`` (the ids of the cards the page
    shows, comma-separated), ``left`` says in words what became of those that left the inbox,
    among the requests the user may read (:func:`~approvals.views.cards.left_notice`)."""
    shown, _form, total = _inbox_filtered(request)
    answer: dict[str, Any] = {"pending": total}
    if request.GET.get("cards") == "1":
        stand_ins = selectors.stand_in_for(user=request.user, request_ids=[r.pk for r in shown])
        offers = selectors.grant_offers(shown)
        answer["cards"] = [
            {
                "id": str(r.pk),
                "html": render_to_string(
                    "approvals/_inbox_card.html",
                    {"card": RequestCard.of(r), "stand_ins": stand_ins, "grant_offers": offers},
                    request,
                ),
            }
            for r in shown
        ]
        gone = _ids(request.GET.get("shown", "")) - {r.pk for r in shown}
        left = selectors.requests_get(request_ids=sorted(gone), user=request.user) if gone else []
        answer["left"] = {str(r.pk): left_notice(r, viewer=request.user) for r in left}
    response = JsonResponse(answer)
    response["Cache-Control"] = "no-store"
    return response


@signed_in
@require_GET
def request_detail(request: HttpRequest, request_id: uuid.UUID) -> HttpResponse:
    """One request with its status, its run's status and its event log."""
    confirmation = selectors.request_get(request_id=request_id, user=request.user)
    if confirmation is None:
        raise Http404("No such approval request.")
    events = EventLine.lines_of(confirmation, list(selectors.request_events(request=confirmation)))
    can_decide = selectors.may_decide(request=confirmation, user=request.user)
    # Back to where the reader came from: the history for auditors, the inbox for deciders.
    from_history = request.GET.get("from") == "history" or (
        not can_decide and selectors.may_view_history(user=request.user)
    )
    return render_page(
        request,
        "approvals/detail.html",
        {
            "card": RequestCard.of(confirmation),
            "events": events,
            "can_decide": can_decide,
            "grant_offers": selectors.grant_offers([confirmation]) if can_decide else {},
            "back": ("History", reverse("approvals:history"))
            if from_history
            else ("Inbox", reverse("approvals:inbox")),
            "run_record_url": _admin_url(request, "agents_run_change", confirmation.run_id),
            "agent_record_url": _admin_url(request, "agents_agent_change", confirmation.agent_id),
        },
    )


def _admin_url(request: HttpRequest, name: str, pk: Any) -> str | None:
    """The admin page of a record, for staff users who can open it (auditors, operators)."""
    user = request.user
    app_label, model = name.split("_")[0], name.split("_")[1]
    if not user.is_staff or not user.has_perm(f"{app_label}.view_{model}"):
        return None
    return reverse(f"admin:{name}", args=[pk])


@signed_in
@require_POST
def request_decide(request: HttpRequest, request_id: uuid.UUID) -> HttpResponse:
    """Approve or reject, then back to the inbox with the outcome as a flash message. Decisions
    count against the same per-user rate as the API's (429 past it, nothing decided)."""
    refused = DecisionThrottle().refusal(request)
    if refused is not None:
        response = render_page(
            request,
            "approvals/too_many_requests.html",
            {"message": refused.message, "wait": refused.wait},
            status=429,
        )
        response["Retry-After"] = str(refused.wait)
        return response
    form = DecisionForm(request.POST)
    if not form.is_valid():
        typo = set(form.errors) <= {"arguments", "grant_conditions", "grant_hours"}
        if typo and selectors.request_get(request_id=request_id, user=request.user):
            # A typo in the edited arguments or a grant's conditions: say so on the inbox,
            # nothing was decided.
            messages.error(request, " ".join(" ".join(errors) for errors in form.errors.values()))
            return redirect("approvals:inbox")
        return bad_request(request, form.errors)
    approve = form.cleaned_data["decision"] == "approve"
    ask = form.grant_ask()
    grant = None
    if ask is not None and form.cleaned_data["arguments"] is None:
        try:
            outcome, grant = confirmation_approve_granting(
                request_id=request_id,
                user=request.user,
                ask=ask,
                reason=form.cleaned_data["reason"],
                seen_args_sha256=form.cleaned_data["args_sha256"],
            )
        except GrantRefused as exc:
            messages.error(request, f"Nothing was decided: {exc}.")
            return redirect("approvals:inbox")
    else:
        if ask is not None:
            messages.error(
                request, "Nothing was decided: a standing approval covers calls as proposed, not edited."
            )
            return redirect("approvals:inbox")
        outcome = confirmation_decide(
            request_id=request_id,
            user=request.user,
            approve=approve,
            reason=form.cleaned_data["reason"],
            edited_args=form.cleaned_data["arguments"],
            seen_args_sha256=form.cleaned_data["args_sha256"],
        )
    if outcome.status == "not_found":
        raise Http404(outcome.message)
    if outcome.accepted:
        verb = "Approved" if approve else "Rejected"
        decided = outcome.request
        tool = (decided.tool_title or presentation.title_of(decided.tool_name)) if decided else "the call"
        edited = outcome.request is not None and outcome.request.edited_by_id == request.user.pk
        messages.success(request, f"{verb}: {tool}" + (" with your changed arguments" if edited else ""))
        if grant is not None:
            messages.success(request, f"Standing approval #{grant.pk}: {grant_text(grant)}.")
    elif outcome.counted:  # a vote towards a quorum: the request still waits for others
        messages.success(request, outcome.message)
    elif outcome.refused:
        messages.error(request, outcome.message)
    else:  # someone else decided first, or the deadline passed
        messages.warning(request, outcome.message)
    return redirect("approvals:inbox")


class BatchDecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    reason = forms.CharField(required=False, max_length=MAX_REASON_LENGTH, strip=True)
    # The inbox's filters when the batch was sent: the way back keeps them.
    filters = forms.CharField(required=False, max_length=2000)


def _inbox_with(filters: str) -> str:
    """The inbox's address with the filters a batch was sent from: only the filters' own keys,
    encoded again (the field is the browser's to send, so nothing else of it reaches a URL)."""
    sent = QueryDict(filters)
    kept = QueryDict(mutable=True)
    for key in InboxFilterForm.base_fields:
        value = sent.get(key, "")
        if value:
            kept[key] = value[:200]
    return reverse("approvals:inbox") + (f"?{kept.urlencode()}" if kept else "")


def _batch_items(values: list[str]) -> list[BatchItem] | None:
    """The selected requests (``<id>:<hash of the arguments shown>`` each), or ``None`` if one
    cannot be read."""
    items = []
    for value in values:
        request_id, _, digest = value.partition(":")
        try:
            items.append(BatchItem(uuid.UUID(request_id), digest[:64]))
        except ValueError:
            return None
    return items


@signed_in
@require_POST
def request_decide_batch(request: HttpRequest) -> HttpResponse:
    """Approve or reject the selected requests with one reason, each decided as alone
    (:func:`~approvals.services.confirmation_decide_batch`), then a page with each one's outcome.
    The batch counts as that many decisions against the decider's rate, all or none (429)."""
    form = BatchDecisionForm(request.POST)
    items = _batch_items(request.POST.getlist("request"))
    if not form.is_valid() or items is None:
        return bad_request(request, form.errors if items is not None else {"request": ["not a request id"]})
    back = _inbox_with(form.cleaned_data["filters"])
    try:
        items = check_batch(items)
    except BatchTooLarge as exc:
        messages.error(request, str(exc))
        return redirect(back)
    refused = DecisionThrottle().refusal_for_user_taking(request.user.pk, len(items))
    if refused is not None:
        response = render_page(
            request,
            "approvals/too_many_requests.html",
            {"message": f"{refused.message} Nothing of the {len(items)} was decided.", "wait": refused.wait},
            status=429,
        )
        response["Retry-After"] = str(refused.wait)
        return response
    approve = form.cleaned_data["decision"] == "approve"
    lines = confirmation_decide_batch(
        items=items, user=request.user, approve=approve, reason=form.cleaned_data["reason"]
    )
    visible = {
        r.pk: r
        for r in selectors.requests_visible_to(user=request.user).filter(pk__in=[i.request_id for i in items])
    }
    return render_page(
        request,
        "approvals/batch_result.html",
        {
            "verb": "Approve" if approve else "Reject",
            "lines": [BatchResultLine.of(line, visible.get(line.request_id)) for line in lines],
            "back": back,
            "nav": "inbox",
        },
    )


@dataclass(frozen=True)
class BatchResultLine:
    """One request's outcome on the batch's page: what it was, and what became of it."""

    request_id: uuid.UUID
    title: str
    detail: str
    kind: str  # "done", "counted", "refused" or "late": the line's look
    message: str

    @classmethod
    def of(cls, line: Any, confirmation: Any) -> BatchResultLine:
        outcome = line.outcome
        if confirmation is None:
            title, detail = "A request you cannot see", ""
        else:
            title = confirmation.tool_title or presentation.title_of(confirmation.tool_name)
            parts = (
                confirmation.agent.name,
                f"requested by {selectors.display_name(confirmation.requested_by)}",
                presentation.amount_text(confirmation.tool_args),
            )
            detail = " · ".join(part for part in parts if part)
        if outcome.accepted:
            kind = "done"
        elif outcome.counted:
            kind = "counted"
        elif outcome.refused or outcome.status in ("not_found", "invalid_edit", "args_changed"):
            kind = "refused"
        else:
            kind = "late"
        return cls(line.request_id, title, detail, kind, outcome.message)
