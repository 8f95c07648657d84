"""The web inbox of approvers (mounted at ``/approvals/``).

Thin views (HackSoft style): each validates its input with a form, reads through
``approvals.selectors`` and writes through the one service call ``confirmation_decide``. Requests
a user may not read are reported as 404, so ids of other people's requests reveal nothing.

Arguments shown here were produced by an LLM: they are rendered as text (autoescaped) inside
``<pre>``, never as markup.

Sign-in lives here too (``login/``, ``logout/``): the admin's login form only admits staff, and
approvers are usually not staff.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse, reverse_lazy
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET, require_POST

from agents.models import Agent, Membership, Organization, Role
from approvals import presentation, selectors
from approvals.apis import DecisionThrottle
from approvals.exports import history_csv_lines, tool_calls_csv_lines
from approvals.gate import pretty_arguments
from approvals.models import ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from approvals.selectors import display_name
from approvals.services import confirmation_decide
from fimone.humanize import ago, duration_text
from fimone.parsers import loads as json_loads

User = get_user_model()
LOGIN_URL = reverse_lazy("approvals:login")
HISTORY_PAGE_SIZE = 25
MAX_REASON_LENGTH = 2000
MAX_EDITED_ARGS_LENGTH = 100_000

signed_in = login_required(login_url=LOGIN_URL)


@dataclass(frozen=True)
class RequestCard:
    """A request as the pages show it: the model plus what templates cannot compute.

    What people read comes first (the tool's title, the call's business fields, the arguments as
    label / value rows with numbers written for people, the votes); the exact JSON and the tool's
    internal name stay one click away ("Show JSON")."""

    request: ConfirmationRequest
    title: str
    arguments: str
    #: the call's arguments as they are now: ``[{"label", "value", "argument"}]``
    argument_rows: list[dict[str, str]]
    #: what the tool's context action said about the call (empty when the arguments describe it)
    about: list[dict[str, str]]
    requester: str
    decider: str | None
    requested_ago: str
    votes: list[selectors.VoteLine] = field(default_factory=list)
    #: The votes against the quorum, for requests needing more than one approval.
    tally: selectors.Tally | None = None
    #: Whether an approver may still change the arguments (the policy allows it, nobody voted).
    editable: bool = False
    proposed: str = ""
    proposed_rows: list[dict[str, str]] = field(default_factory=list)
    editor: str | None = None

    @classmethod
    def of(
        cls, request: ConfirmationRequest, *, votes: list[selectors.VoteLine] | None = None
    ) -> RequestCard:
        context = [item for item in request.context or [] if isinstance(item, dict)]
        # Labels the request was opened with (from the tool's parameter schema) name the rows of
        # the arguments as they are now: an approver may have changed them since.
        labels = {
            str(item["argument"]): str(item.get("label", "")) for item in context if item.get("argument")
        }
        order = list(labels) or None  # the schema's order, as the request was opened with it
        # The currency the context gives the call ("1,200.00 USD"): its amounts in the arguments
        # read in it too, so "what will run" does not say less than "about this call".
        currency = _context_currency(context)
        rows = _labelled(presentation.argument_rows(request.tool_args, order=order), labels)
        return cls(
            request=request,
            title=request.tool_title or presentation.title_of(request.tool_name),
            arguments=pretty_arguments(request.tool_args),
            argument_rows=_with_currency(rows, request.tool_args, currency),
            about=[item for item in context if not item.get("argument")],
            requester=display_name(request.requested_by),
            decider=display_name(request.responded_by) if request.responded_by_id else None,
            requested_ago=ago(request.created_at),
            votes=selectors.votes_of(request=request) if votes is None else votes,
            tally=selectors.tally_of(request=request) if request.approvals_required > 1 else None,
            editable=request.allow_edit_on_approve and selectors.may_edit_arguments(request=request),
            proposed=pretty_arguments(request.proposed_args) if request.was_edited else "",
            proposed_rows=_with_currency(
                _labelled(presentation.argument_rows(request.proposed_args, order=order), labels),
                request.proposed_args,
                currency,
            )
            if request.was_edited
            else [],
            editor=display_name(request.edited_by) if request.was_edited else None,
        )

    @property
    def tally_line(self) -> str:
        """The quorum's progress with who voted and when ("1 of 2 approvals: april approved
        10:02 UTC — waiting for one more"); empty when one approval is enough."""
        return self.tally.text_with(self.votes) if self.tally is not None else ""

    @property
    def reason_text(self) -> str:
        """The request's reason as people read it (a withdrawal says who stopped the run)."""
        return reason_for_people(self.request.reason, request=self.request)

    @property
    def voters(self) -> str:
        """Everyone who voted, with their vote ("april (approved), adam (approved)"); else whoever
        settled the request."""
        if self.votes:
            return ", ".join(f"{vote.by} ({vote.verb})" for vote in self.votes)
        return self.decider or ""


def _labelled(rows: list[dict[str, str]], labels: dict[str, str]) -> list[dict[str, str]]:
    return [{**row, "label": labels.get(row.get("argument", "")) or row["label"]} for row in rows]


_CURRENCY = re.compile(r"[A-Z]{3}")
_WRITTEN_MONEY = re.compile(r"-?[\d.,\s]+\s(?P<currency>[A-Z]{3})")


def _context_currency(context: list[dict[str, Any]]) -> str | None:
    """The currency the call's context names: a "Currency" item, or an amount written with its
    currency ("1,200.00 USD", as :func:`approvals.presentation.answer_rows` writes one). Items that
    are the arguments themselves say nothing the arguments do not."""
    for item in context:
        if item.get("argument"):
            continue
        label, value = str(item.get("label", "")).strip(), str(item.get("value", "")).strip()
        if label.lower() in ("currency", "currency code") and _CURRENCY.fullmatch(value):
            return value
        written = _WRITTEN_MONEY.fullmatch(value)
        if written and presentation.is_money_key(label):
            return written["currency"]
    return None


def _with_currency(rows: list[dict[str, str]], args: Any, currency: str | None) -> list[dict[str, str]]:
    """``rows`` of ``args`` with their amounts written in ``currency`` when they name none."""
    if currency is None or not isinstance(args, dict):
        return rows
    out = []
    for row in rows:
        key = row.get("argument", "")
        value = args.get(key)
        named = _WRITTEN_MONEY.fullmatch(row["value"])  # "1,200.00 EUR": the arguments' own currency
        if presentation.is_money_key(key) and _is_number(value) and not named:
            row = {**row, "value": presentation.money_text(value, currency)}
        out.append(row)
    return out


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        return False
    try:
        return Decimal(str(value).strip()).is_finite()
    except InvalidOperation:
        return False


_STOPPED = re.compile(r"(?:the run was cancelled: )?cancelled by (?P<who>.+)", re.IGNORECASE)
_RUN_CANCELLED = re.compile(r"the run was cancelled(?:: (?P<why>.+))?", re.IGNORECASE | re.DOTALL)


def stopped_by(reason: str, *, request: ConfirmationRequest) -> str | None:
    """Who stopped the run, when ``reason`` (a withdrawn request's) says a person did: "cancelled
    by the user" is the run's own user, who asked for the call; "cancelled by oscar" names him."""
    stopped = _STOPPED.fullmatch((reason or "").strip().rstrip("."))
    if stopped is None:
        return None
    who = stopped["who"].strip()
    if who.lower() == "the user":
        return display_name(request.requested_by) if request.requested_by_id else None
    return who


def reason_for_people(reason: str, *, request: ConfirmationRequest) -> str:
    """A withdrawal's reason as one plain sentence: the services record "the run was cancelled:
    cancelled by the user", people read "alice stopped the run". Other reasons are unchanged."""
    text = (reason or "").strip()
    if _STOPPED.fullmatch(text.rstrip(".")):
        who = stopped_by(text, request=request)
        return f"{who} stopped the run." if who else "The person who started the run stopped it."
    cancelled = _RUN_CANCELLED.fullmatch(text.rstrip("."))
    if cancelled:
        why = (cancelled["why"] or "").strip()
        return f"The run was cancelled because {why}." if why else "The run was cancelled."
    return text


#: Event details shown under their own label, and how their values read.
_EVENT_LABELS = {
    "tool": "Tool",
    "approvers": "Could decide",
    "added_approvers": "Added approvers",
    "expires_at": "Deadline",
    "channel": "Channel",
    "via": "Through",
    "vote": "Vote",
    "wanted": "Wanted",
    "status": "Verdict",
    "tool_status": "Tool outcome",
    "approvals_required": "Approvals required",
    "any_rejection_rejects": "One rejection rejects",
    "escalation_after_seconds": "Escalation after",
    "timeout_seconds": "Timeout",
    "after_seconds": "After",
    "message_id": "Message ID",
    "attempt": "Attempt",
}
#: Details kept for the record but not worth a line (hashes, ids, the verdict's copy): in the JSON.
_EVENT_HIDDEN = frozenset(
    {
        "args_sha256",
        "proposed_args_sha256",
        "approved_args_sha256",
        "verdict",
        "channel_config_id",
        "from_channel_config_id",
        "approvals",
        "rejections",
        "required",
    }
)
_USER_LISTS = ("approvers", "added_approvers")
#: Details for whoever traces a request through the systems (a platform's message id, ids of
#: records): under "Technical details", closed, with the JSON.
_EVENT_TECHNICAL = frozenset({"message_id", "tool_call_id", "request_id", "run_id", "attempt", "maybe_sent"})


@dataclass(frozen=True)
class EventLine:
    """An event of a request's log as people read it: names, not user ids; moments with their
    zone; the tally in words. The exact details stay behind "Show JSON"."""

    event: ConfirmationEvent
    actor: str
    rows: list[tuple[str, str]]
    details: str
    #: ids and such (:data:`_EVENT_TECHNICAL`), shown with the JSON under "Technical details"
    technical: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def lines_of(cls, request: ConfirmationRequest, events: list[ConfirmationEvent]) -> list[EventLine]:
        """The lines of ``events`` (one query for the names of every person they mention)."""
        ids = {
            user_id
            for event in events
            for key in _USER_LISTS
            for user_id in (event.details or {}).get(key) or []
            if isinstance(user_id, int)
        }
        names = {user.pk: display_name(user) for user in User.objects.filter(pk__in=ids)}
        return [cls.of(event, request=request, names=names) for event in events]

    @classmethod
    def of(
        cls, event: ConfirmationEvent, *, request: ConfirmationRequest, names: dict[int, str]
    ) -> EventLine:
        # A click from a chat platform may carry only the platform's user id; sweeps carry none.
        actor = display_name(event.actor) if event.actor_id else event.actor_external_id or "system"
        details = event.details if isinstance(event.details, dict) else {}
        people = {key: value for key, value in details.items() if key not in _EVENT_TECHNICAL}
        if event.kind == ConfirmationEvent.Kind.CANCELLED and isinstance(details.get("reason"), str):
            # A withdrawal is recorded by the system on behalf of whoever stopped the run: when its
            # reason says who, that person did it, and the reason reads as one plain sentence.
            if not event.actor_id:
                actor = stopped_by(details["reason"], request=request) or actor
            people["reason"] = reason_for_people(details["reason"], request=request)
        technical = {key: value for key, value in details.items() if key in _EVENT_TECHNICAL}
        return cls(
            event=event,
            actor=actor,
            rows=_event_rows(people, request=request, names=names),
            details=pretty_arguments(event.details) if event.details else "",
            technical=_event_rows(technical, request=request, names=names),
        )


def _event_rows(
    details: dict[str, Any], *, request: ConfirmationRequest, names: dict[int, str]
) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    if {"approvals", "required"} <= details.keys():
        tally = selectors.Tally(
            approvals=int(details.get("approvals") or 0),
            rejections=int(details.get("rejections") or 0),
            required=int(details.get("required") or 1),
            eligible=0,
        )
        rows.append(("Tally", tally.count_text))
    for key, value in details.items():
        if key in _EVENT_HIDDEN or value in (None, "", []):
            continue
        if key == "any_rejection_rejects" and int(details.get("approvals_required") or 1) <= 1:
            continue  # with one approval to give, one rejection rejects anyway: nothing to say
        label = _EVENT_LABELS.get(key) or presentation.humanized_key(key)
        rows.append((label, _event_value(key, value, request=request, names=names)))
    return rows


def _event_value(key: str, value: Any, *, request: ConfirmationRequest, names: dict[int, str]) -> str:
    if key in _USER_LISTS and isinstance(value, list):
        return ", ".join(names.get(v, f"user {v}") if isinstance(v, int) else str(v) for v in value)
    if key == "tool" and value == request.tool_name:
        return request.tool_title or presentation.title_of(request.tool_name)
    if key in {"channel", "via"}:
        return _channel_text(value, request=request)
    if key in {"vote", "wanted", "status", "tool_status"} and isinstance(value, str):
        return value.capitalize()
    if key == "expires_at" and isinstance(value, str):
        moment = parse_datetime(value)
        return presentation.moment_text(moment, full=True) if moment else value
    if key in {"timeout_seconds", "after_seconds"} and isinstance(value, int | float):
        return duration_text(value)
    if key == "escalation_after_seconds" and isinstance(value, list):
        return ", ".join(duration_text(v) for v in value if isinstance(v, int | float))
    return presentation.value_text(value, key=key)


def _channel_text(value: Any, *, request: ConfirmationRequest) -> str:
    """``"web"`` → "Web inbox"; a channel configuration's id → its name when it is the request's."""
    if value == "web":
        return "Web inbox"
    if isinstance(value, int):
        config = request.channel_config if request.channel_config_id == value else None
        return str(getattr(config, "name", "") or f"channel #{value}")
    return str(value).capitalize()


def _page(request: HttpRequest, template: str, context: dict[str, Any], *, status: int = 200) -> HttpResponse:
    """Render ``template`` with what the layout needs (navigation, the server's clock for the
    countdowns, so a client with a wrong clock still counts down correctly)."""
    user = request.user
    layout = {
        "show_history": selectors.may_view_history(user=user),
        "user_label": display_name(user) if user.is_authenticated else "",
        "server_now": timezone.now(),
        # Pages that list moments say in which zone (the server's: every time shown is in it).
        "time_zone": timezone.get_current_timezone_name(),
    }
    return render(request, template, {**layout, **context}, status=status)


def _bad_request(request: HttpRequest, problems: dict[str, Any]) -> HttpResponse:
    return _page(request, "approvals/bad_request.html", {"problems": problems}, status=400)


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    reason = forms.CharField(required=False, max_length=MAX_REASON_LENGTH, strip=True)
    # Offered when the request's policy allows edits: the arguments to run instead, as JSON.
    arguments = forms.CharField(required=False, max_length=MAX_EDITED_ARGS_LENGTH, strip=True)
    # The hash of the arguments the page showed: approving arguments changed since is refused.
    args_sha256 = forms.CharField(required=False, max_length=64)

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


ISO_DATE = forms.DateInput(
    format="%Y-%m-%d",
    attrs={
        "placeholder": "yyyy-mm-dd",
        "pattern": r"\d{4}-\d{2}-\d{2}",
        "inputmode": "numeric",
        "autocomplete": "off",
        "title": "A date as yyyy-mm-dd, e.g. 2026-03-31",
    },
)


class HistoryFilterForm(forms.Form):
    """The history's filters. Organisations, agents and people offered (and accepted) are only
    those of the organisations the user audits: another organisation's id is a form error."""

    q = forms.CharField(required=False, max_length=200, strip=True, label="Search")
    status = forms.ChoiceField(choices=[("", "Any status"), *ConfirmationStatus.choices], required=False)
    organization = forms.ModelChoiceField(
        queryset=Organization.objects.none(),
        required=False,
        empty_label="Any organisation",
        label="Organisation",
    )
    agent = forms.ModelChoiceField(queryset=Agent.objects.none(), required=False, empty_label="Any agent")
    requester = forms.ModelChoiceField(queryset=User.objects.none(), required=False, empty_label="Anyone")
    approver = forms.ModelChoiceField(
        queryset=User.objects.none(), required=False, empty_label="Anyone", help_text="Could decide, or did."
    )
    decider = forms.ModelChoiceField(
        queryset=User.objects.none(), required=False, empty_label="Anyone", label="Decided by"
    )
    channel = forms.ChoiceField(choices=[("", "Any channel")], required=False)
    # ISO dates, typed as such: a browser's date picker shows the format of its locale
    # (mm/dd/yyyy in many), which is not what the pages and the CSV say.
    since = forms.DateField(required=False, label="From", input_formats=["%Y-%m-%d"], widget=ISO_DATE)
    until = forms.DateField(required=False, label="To", input_formats=["%Y-%m-%d"], widget=ISO_DATE)
    hooks_bypassed = forms.ChoiceField(
        choices=[("", "Hooks: any"), ("yes", "Hooks bypassed"), ("no", "Hooks ran")], required=False
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        audited = selectors.audited_organization_ids(user=user)
        people = selectors.history_people(user=user)
        self.fields["organization"].queryset = Organization.objects.filter(pk__in=audited).order_by("name")
        self.fields["agent"].queryset = Agent.objects.filter(organization_id__in=audited).order_by("name")
        self.fields["requester"].queryset = people
        self.fields["approver"].queryset = people
        self.fields["decider"].queryset = people
        for name in ("requester", "approver", "decider"):
            self.fields[name].label_from_instance = display_name
        self.fields["channel"].choices = [("", "Any channel")] + [
            (c, c) for c in selectors.history_channels(user=user)
        ]

    def filters(self) -> selectors.HistoryFilters:
        data = self.cleaned_data
        bypassed = {"yes": True, "no": False}.get(data["hooks_bypassed"])
        return selectors.HistoryFilters(
            status=data["status"] or None,
            organization_id=data["organization"].pk if data["organization"] else None,
            agent_id=data["agent"].pk if data["agent"] else None,
            requester_id=data["requester"].pk if data["requester"] else None,
            approver_id=data["approver"].pk if data["approver"] else None,
            decider_id=data["decider"].pk if data.get("decider") else None,
            channel=data["channel"] or None,
            since=data["since"],
            until=data["until"],
            hooks_bypassed=bypassed,
            query=data["q"],
        )


@signed_in
@require_GET
def inbox(request: HttpRequest) -> HttpResponse:
    """The pending requests the user may decide, soonest deadline first."""
    cards = [RequestCard.of(r) for r in selectors.inbox_for(user=request.user)]
    return _page(request, "approvals/inbox.html", {"cards": cards, "nav": "inbox"})


@signed_in
@require_GET
def inbox_live(request: HttpRequest) -> JsonResponse:
    """What a live inbox page needs after a push (``approvals.live``): the user's pending count,
    and with ``?cards=1`` their inbox's cards as HTML, in the inbox's order (the page adds the
    new ones and drops those that left). The same read as :func:`inbox`: nothing more is shown."""
    requests = list(selectors.inbox_for(user=request.user))
    answer: dict[str, Any] = {"pending": len(requests)}
    if request.GET.get("cards") == "1":
        answer["cards"] = [
            {
                "id": str(r.pk),
                "html": render_to_string("approvals/_inbox_card.html", {"card": RequestCard.of(r)}, request),
            }
            for r in requests
        ]
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
    return _page(
        request,
        "approvals/detail.html",
        {
            "card": RequestCard.of(confirmation),
            "events": events,
            "can_decide": can_decide,
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
        response = _page(
            request,
            "approvals/too_many_requests.html",
            {"message": refused.message, "wait": refused.wait},
            status=429,
        )
        response["Retry-After"] = str(refused.wait)
        return response
    form = DecisionForm(request.POST)
    if not form.is_valid():
        if set(form.errors) == {"arguments"} and selectors.request_get(
            request_id=request_id, user=request.user
        ):
            # A typo in the edited arguments: say so on the inbox, nothing was decided.
            messages.error(request, " ".join(form.errors["arguments"]))
            return redirect("approvals:inbox")
        return _bad_request(request, form.errors)
    approve = form.cleaned_data["decision"] == "approve"
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
    elif outcome.counted:  # a vote towards a quorum: the request still waits for others
        messages.success(request, outcome.message)
    elif outcome.refused:
        messages.error(request, outcome.message)
    else:  # someone else decided first, or the deadline passed
        messages.warning(request, outcome.message)
    return redirect("approvals:inbox")


def _forbidden(request: HttpRequest) -> HttpResponse:
    """403 for someone who may not read the record, with a way back to what they may use."""
    if selectors.may_use_inbox(user=request.user):
        back = ("Back to the inbox", reverse("approvals:inbox"))
    else:
        back = ("Back to your agents", reverse("portal:home"))
    return _page(request, "approvals/forbidden.html", {"back": back}, status=403)


_SCOPES = {
    frozenset({Role.AUDITOR}): "the organisations you audit",
    frozenset({Role.OPERATOR}): "the organisations you configure",
    frozenset({Role.ADMIN}): "the organisations you administer",
}


def record_scope(user: Any) -> str:
    """Whose record the history pages show, worded by the reader's role: an operator reads the
    organisations he configures, not ones he "audits"; mixed roles read "your organisations"."""
    if user.is_superuser:
        return "every organisation"
    roles = frozenset(
        Membership.objects.filter(user=user, role__in=selectors.AUDIT_ROLES).values_list("role", flat=True)
    )
    return _SCOPES.get(roles, "your organisations")


def _history_form(request: HttpRequest, *, page: str = "") -> HttpResponse | HistoryFilterForm:
    """The validated filters, or the page to answer instead (403 for who may not read the record;
    400 for bad filters: ``page``, the record's page shown again with the problems on their fields,
    else the plain bad-request page)."""
    if not selectors.may_view_history(user=request.user):
        return _forbidden(request)
    form = HistoryFilterForm(request.GET, user=request.user)
    if not form.is_valid():
        if page:
            context = {
                "form": form,
                "filtered": True,
                "query": "",
                "page": None,
                "rows": [],
                "scope": record_scope(request.user),
                "nav": "history",
            }
            return _page(request, page, context, status=400)
        return _bad_request(request, form.errors)
    return form


@dataclass(frozen=True)
class HistoryRow:
    """A request as a history line: names, not ids, and how long the decision took."""

    card: RequestCard
    approvers: str
    time_to_decision: str

    @classmethod
    def of(cls, request: ConfirmationRequest, *, votes: list[selectors.VoteLine]) -> HistoryRow:
        names = sorted(display_name(user) for user in request.approvers.all())
        waited = ""
        if request.responded_at is not None:
            waited = duration_text((request.responded_at - request.created_at).total_seconds())
        card = RequestCard.of(request, votes=votes)
        return cls(card=card, approvers=", ".join(names), time_to_decision=waited)


@signed_in
@require_GET
def history(request: HttpRequest) -> HttpResponse:
    """Every request of the organisations the user audits or administers, filtered, newest first."""
    form = _history_form(request, page="approvals/history.html")
    if isinstance(form, HttpResponse):
        return form
    requests = selectors.history_for(user=request.user, filters=form.filters()).prefetch_related("approvers")
    page = Paginator(requests, HISTORY_PAGE_SIZE).get_page(request.GET.get("page"))
    votes = selectors.votes_by_request(request_ids=[r.pk for r in page.object_list])
    query = request.GET.copy()
    query.pop("page", None)
    return _page(
        request,
        "approvals/history.html",
        {
            "form": form,
            "filtered": any(form.cleaned_data.get(name) for name in form.fields),
            "query": query.urlencode(),
            "page": page,
            "rows": [HistoryRow.of(r, votes=votes.get(r.pk, [])) for r in page.object_list],
            "scope": record_scope(request.user),
            "nav": "history",
        },
    )


@signed_in
@require_GET
def history_export(request: HttpRequest) -> HttpResponse:
    """The filtered history as CSV, streamed (see ``approvals.exports``)."""
    form = _history_form(request)
    if isinstance(form, HttpResponse):
        return form
    requests = selectors.history_for(user=request.user, filters=form.filters())
    response = StreamingHttpResponse(history_csv_lines(requests), content_type="text/csv; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="approvals-{stamp}.csv"'
    return response


class ToolCallFilterForm(HistoryFilterForm):
    """The tool-call record's filters: the history's, with execution statuses and "blocked"."""

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, user=user, **kwargs)
        del self.fields["approver"], self.fields["decider"], self.fields["channel"]
        self.fields["status"].choices = [("", "Any outcome")] + [
            (s, s.capitalize()) for s in selectors.TOOL_CALL_STATUSES
        ]
        self.fields["requester"].label = "Run by"

    def filters(self) -> selectors.HistoryFilters:
        self.cleaned_data.setdefault("approver", None)
        self.cleaned_data.setdefault("channel", "")
        return super().filters()


def _tool_call_form(request: HttpRequest) -> HttpResponse | ToolCallFilterForm:
    if not selectors.may_view_history(user=request.user):
        return _forbidden(request)
    form = ToolCallFilterForm(request.GET, user=request.user)
    if not form.is_valid():
        return _bad_request(request, form.errors)
    return form


@signed_in
@require_GET
def tool_calls(request: HttpRequest) -> HttpResponse:
    """Every tool call of the organisations the user audits: executions and blocked calls."""
    form = _tool_call_form(request)
    if isinstance(form, HttpResponse):
        return form
    rows = selectors.tool_calls_for(user=request.user, filters=form.filters())
    page = Paginator(rows, HISTORY_PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    lines = [
        {**row, "took": "" if row["took_ms"] is None else duration_text(row["took_ms"] / 1000)}
        for row in page
    ]
    return _page(
        request,
        "approvals/tool_calls.html",
        {
            "form": form,
            "filtered": any(form.cleaned_data.get(name) for name in form.fields),
            "query": query.urlencode(),
            "page": page,
            "lines": lines,
            "scope": record_scope(request.user),
            "nav": "history",
        },
    )


@signed_in
@require_GET
def tool_calls_export(request: HttpRequest) -> HttpResponse:
    """The filtered tool calls as CSV, streamed."""
    form = _tool_call_form(request)
    if isinstance(form, HttpResponse):
        return form
    rows = selectors.tool_calls_for(user=request.user, filters=form.filters())
    response = StreamingHttpResponse(tool_calls_csv_lines(rows), content_type="text/csv; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="tool-calls-{stamp}.csv"'
    return response


def login_locked_out(request: HttpRequest, *_details: Any) -> HttpResponse:
    """The answer to a sign-in refused by the lockout (django-axes' ``AXES_LOCKOUT_CALLABLE``, for
    both login pages): 429 with how long to wait. It echoes nothing that was posted."""
    cool_off = int(settings.AXES_COOLOFF_TIME.total_seconds())
    response = render(request, "registration/locked_out.html", {"minutes": cool_off // 60}, status=429)
    response["Retry-After"] = str(cool_off)
    return response
