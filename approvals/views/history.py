"""The auditor's record: every request of the organisations the reader audits, configures or
administers, and every tool call of their runs, filtered and paged. (Their CSV downloads are
:mod:`approvals.views.downloads`.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from agents.models import Agent
from approvals import presentation, selectors
from approvals.models import ConfirmationRequest, ConfirmationStatus
from approvals.selectors import display_name
from approvals.views.cards import RequestCard
from approvals.views.layout import bad_request, forbidden, render_page, signed_in
from fimone.humanize import duration_text
from tenancy.models import Membership, Organization, Role

User = get_user_model()
HISTORY_PAGE_SIZE = 25


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


def history_form(
    request: HttpRequest, *, page: str = "", form_class: type[HistoryFilterForm] | None = None
) -> HttpResponse | HistoryFilterForm:
    """The validated filters of a record page (``form_class``: the history's by default), or the
    page to answer instead (403 for who may not read the record; 400 for bad filters: ``page``, the
    record's page shown again with the problems on their fields, else the plain bad-request page)."""
    if not selectors.may_view_history(user=request.user):
        return forbidden(request)
    form = (form_class or HistoryFilterForm)(request.GET, user=request.user)
    if not form.is_valid():
        if page:
            context = {
                "form": form,
                "filtered": True,
                "query": "",
                "page": None,
                "rows": [],
                "lines": [],
                "scope": record_scope(request.user),
                "nav": "history",
            }
            return render_page(request, page, context, status=400)
        return bad_request(request, form.errors)
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
        if request.grant_id is not None:
            waited = "instant (standing approval)"
        elif request.responded_at is not None:
            waited = duration_text(max(0.0, (request.responded_at - request.created_at).total_seconds()))
        card = RequestCard.of(request, votes=votes)
        return cls(card=card, approvers=", ".join(names), time_to_decision=waited)


@signed_in
@require_GET
def history(request: HttpRequest) -> HttpResponse:
    """Every request of the organisations the user audits or administers, filtered, newest first."""
    form = history_form(request, page="approvals/history.html")
    if isinstance(form, HttpResponse):
        return form
    requests = selectors.history_for(user=request.user, filters=form.filters()).prefetch_related("approvers")
    page, context = _record_page(request, form, requests)
    votes = selectors.votes_by_request(request_ids=[r.pk for r in page.object_list])
    rows = [HistoryRow.of(r, votes=votes.get(r.pk, [])) for r in page.object_list]
    return render_page(request, "approvals/history.html", {**context, "rows": rows})


def _record_page(request: HttpRequest, form: HistoryFilterForm, records: Any) -> tuple[Page, dict[str, Any]]:
    """The page of ``records`` the ``page`` parameter asks for (``HISTORY_PAGE_SIZE`` a page; not
    a number: the first; past the end: the last), and the context every record page shows it
    in: the valid filters ``form``, whether any is set, the query its pager's links keep (the
    filters, without ``page``), and whose record it is. The caller adds the page's own lines."""
    page = Paginator(records, HISTORY_PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return page, {
        "form": form,
        "filtered": any(form.cleaned_data.get(name) for name in form.fields),
        "query": query.urlencode(),
        "page": page,
        "scope": record_scope(request.user),
        "nav": "history",
    }


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


def _blocked_because(detail: str) -> dict[str, str]:
    """A blocked call's record ("hook_name: why") as people read it: ``why``, and ``by`` the hook
    in words ("Confirmation gate"), none when the record names no hook."""
    name, said, why = detail.partition(": ")
    if not said:
        return {"why": detail, "by": ""}
    by = "" if name.strip() in ("", "null", "None") else presentation.humanized_key(name.strip())
    return {"why": why, "by": by}


@signed_in
@require_GET
def tool_calls(request: HttpRequest) -> HttpResponse:
    """Every tool call of the organisations the user audits: executions and blocked calls."""
    form = history_form(request, page="approvals/tool_calls.html", form_class=ToolCallFilterForm)
    if isinstance(form, HttpResponse):
        return form
    rows = selectors.tool_calls_for(user=request.user, filters=form.filters())
    page, context = _record_page(request, form, rows)
    lines = [
        {
            **row,
            "took": "" if row["took_ms"] is None else duration_text(row["took_ms"] / 1000),
            "title": presentation.title_of(row["tool"] or ""),
            **_blocked_because(row["detail"] or ""),
        }
        for row in page
    ]
    return render_page(request, "approvals/tool_calls.html", {**context, "lines": lines})
