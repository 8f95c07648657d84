"""The approval queue's health (``/approvals/health/``) and its CSV, for whoever reads the record:
how long decisions take, what waits, what expires and who carries the load, with two charts
drawn on the server as SVG (no script, nothing fetched from elsewhere)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from approvals import selectors
from approvals.exports import safe_cell
from approvals.selectors.queue_health import QueueHealth, Timing, default_period, queue_health
from approvals.views.history import ISO_DATE, record_scope
from approvals.views.layout import bad_request, csv_download, forbidden, render_page, signed_in
from fimone.humanize import duration_text
from tenancy.models import Organization

MAX_DAYS = 366
"""The longest period one page reads."""

CHART_WIDTH = 300
"""Width of a chart's bars area, in SVG units (the chart scales to its box)."""


class QueueHealthForm(forms.Form):
    """The period and the organisation (one the reader audits; another's id is a form error)."""

    organization = forms.ModelChoiceField(
        queryset=Organization.objects.none(),
        required=False,
        empty_label="All",
        label="Organisation",
    )
    since = forms.DateField(required=False, label="From", input_formats=["%Y-%m-%d"], widget=ISO_DATE)
    until = forms.DateField(required=False, label="To", input_formats=["%Y-%m-%d"], widget=ISO_DATE)

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        audited = selectors.audited_organization_ids(user=user)
        self.fields["organization"].queryset = Organization.objects.filter(pk__in=audited).order_by("name")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        default_since, default_until = default_period()
        since, until = data.get("since") or default_since, data.get("until") or default_until
        if "since" in data and "until" in data:  # both parsed (or left empty)
            if until < since:
                self.add_error("until", "The end of the period is before its start.")
            elif (until - since).days >= MAX_DAYS:
                self.add_error("since", f"A period of at most {MAX_DAYS} days, please.")
        data["period"] = (since, until)
        return data


def _form(request: HttpRequest) -> HttpResponse | QueueHealthForm:
    if not selectors.may_view_history(user=request.user):
        return forbidden(request)
    form = QueueHealthForm(request.GET, user=request.user)
    if not form.is_valid():
        return bad_request(request, form.errors)
    return form


def _health(request: HttpRequest) -> HttpResponse | tuple[QueueHealthForm, QueueHealth]:
    """The filters and the queue's health they ask for, or the answer instead (403, 400)."""
    form = _form(request)
    if isinstance(form, HttpResponse):
        return form
    since, until = form.cleaned_data["period"]
    organization = form.cleaned_data.get("organization")
    health = queue_health(
        user=request.user, since=since, until=until, organization_id=organization.pk if organization else None
    )
    return form, health


def _bars(rows: list[tuple[str, list[float]]], *, unit: str, label_width: int) -> dict[str, Any]:
    """A horizontal bar chart: per row a label (in ``label_width`` units on the left) and one or
    more values, drawn side by side, scaled to the largest; every coordinate worked out here."""
    top = max((v for _label, values in rows for v in values), default=0.0) or 1.0
    bar, gap = 14, 10
    lines = []
    y = 0
    for label, values in rows:
        bars = []
        for i, value in enumerate(values):
            width = max(1.0, round(value / top * CHART_WIDTH, 1)) if value else 0.0
            bars.append(
                {
                    "x": label_width,
                    "y": y + i * bar,
                    "width": width,
                    "text_x": label_width + width + 6,
                    "text_y": y + i * bar + 10,
                    "value": duration_text(value) if unit == "seconds" else str(int(value)),
                    "series": i,
                }
            )
        lines.append({"label": label, "bars": bars, "text_y": y + bar * len(values) / 2 + 4})
        y += bar * max(1, len(values)) + gap
    return {"lines": lines, "height": max(y, 20), "width": label_width + CHART_WIDTH + 70}


def _timing_rows(timings: list[Timing]) -> list[tuple[str, list[float]]]:
    return [(t.label, [t.p50 or 0.0, t.p90 or 0.0]) for t in timings]


def _timing_lines(timings: list[Timing]) -> list[dict[str, Any]]:
    return [
        {"label": t.label, "count": t.count, "p50": duration_text(t.p50), "p90": duration_text(t.p90)}
        for t in timings
    ]


def _rate(rate: float | None) -> str:
    return "—" if rate is None else f"{rate * 100:.1f}%"


def _tables(health: QueueHealth) -> dict[str, Any]:
    """The page's tables, in words: durations as "1 min 35 s", rates as percentages."""
    return {
        "overall": _timing_lines([health.overall])[0],
        "by_agent": _timing_lines(health.by_agent),
        "by_tool": _timing_lines(health.by_tool),
        "by_approver": _timing_lines(health.by_approver),
        "by_stage": _timing_lines(health.by_stage),
        "expiry": [
            {"label": e.label, "settled": e.settled, "expired": e.expired, "rate": _rate(e.rate)}
            for e in [*health.expiry, health.expiry_overall]
        ],
        "expiry_overall": _rate(health.expiry_overall.rate),
        "approvers": [
            {
                "label": load.label,
                "waiting": load.waiting,
                "votes": load.votes,
                "p50": duration_text(load.p50),
                "p90": duration_text(load.p90),
            }
            for load in health.approvers
        ],
    }


@signed_in
@require_GET
def queue_health_page(request: HttpRequest) -> HttpResponse:
    """The queue's health over a period (the last 30 days by default)."""
    read = _health(request)
    if isinstance(read, HttpResponse):
        return read
    form, health = read
    return render_page(
        request,
        "approvals/queue_health.html",
        {
            "form": form,
            "health": health,
            "tables": _tables(health),
            "query": request.GET.urlencode(),
            "pending_chart": _bars(
                [(label, [float(n)]) for label, n in health.pending_by_age], unit="count", label_width=110
            ),
            "agent_chart": _bars(_timing_rows(health.by_agent), unit="seconds", label_width=150),
            "scope": record_scope(request.user),
            "nav": "history",
        },
    )


CSV_COLUMNS = (
    "section",
    "name",
    "decisions",
    "p50_seconds",
    "p90_seconds",
    "pending",
    "waiting_for_them",
    "votes",
    "settled",
    "expired",
    "expiry_rate",
)


def health_csv_lines(health: QueueHealth) -> Iterator[str]:
    """The page's tables as CSV lines: one row per group, empty cells where a column does not
    apply. Names are made spreadsheet-safe (a leading ``=`` and the like cannot run)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def line(**cells: Any) -> str:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(
            [
                safe_cell(cells.get(column, "")) if column == "name" else _plain(cells.get(column))
                for column in CSV_COLUMNS
            ]
        )
        return buffer.getvalue()

    yield ",".join(CSV_COLUMNS) + "\r\n"
    for section, timings in (
        ("time_to_decision", [health.overall]),
        ("time_to_decision_by_agent", health.by_agent),
        ("time_to_decision_by_tool", health.by_tool),
        ("time_to_decision_by_approver", health.by_approver),
        ("time_in_stage", health.by_stage),
    ):
        for t in timings:
            yield line(section=section, name=t.label, decisions=t.count, p50_seconds=t.p50, p90_seconds=t.p90)
    for label, count in health.pending_by_age:
        yield line(section="pending_by_age", name=label, pending=count)
    for e in [health.expiry_overall, *health.expiry]:
        yield line(section="expiry", name=e.label, settled=e.settled, expired=e.expired, expiry_rate=e.rate)
    for load in health.approvers:
        yield line(
            section="approver_load",
            name=load.label,
            waiting_for_them=load.waiting,
            votes=load.votes,
            p50_seconds=load.p50,
            p90_seconds=load.p90,
        )


def _plain(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value)


@signed_in
@require_GET
def queue_health_export(request: HttpRequest) -> HttpResponse:
    """The queue's health as CSV (the page's period and organisation)."""
    read = _health(request)
    if isinstance(read, HttpResponse):
        return read
    _form_read, health = read
    return csv_download(health_csv_lines(health), "approval-queue")
