"""The approval queue as Prometheus metrics, served at ``/metrics`` for a scraper holding
``METRICS_TOKEN`` (``Authorization: Bearer <token>``, compared in constant time) and for signed-in
superusers. Without ``METRICS_TOKEN`` only superusers read it; anyone else is answered 401 (no
token, or a wrong one) or 403 (signed in, not a superuser) before anything is read.

The metrics are read from the record at each scrape (a collector, not counters kept in memory),
so every server of a deployment answers the same and nothing is lost when one restarts. They cover
every organisation, labelled by its name:

* ``fimone_approval_requests{organization,status}``: requests ever opened, by their status now
  (a gauge: a pending request moves to a verdict);
* ``fimone_approval_time_to_decision_seconds{organization}``: a histogram of the time from opening
  to verdict of every decided (approved or rejected) request;
* ``fimone_approval_pending{organization,age}``: requests waiting now, by how long
  (:data:`~approvals.selectors.queue_health.AGE_BUCKETS`);
* ``fimone_approval_waiting_for_approver{organization,approver}``: pending requests each person
  was asked to decide and has not voted on.
"""

from __future__ import annotations

import datetime as dt
import hmac
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from approvals.models import ConfirmationRequest, ConfirmationStatus
from approvals.selectors.queue_health import DECIDED, pending_by_age, waiting_for_votes
from approvals.selectors.requests import display_name
from tenancy.models import Organization

User = get_user_model()

DECISION_BUCKETS = (10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 4 * 3600.0, 24 * 3600.0)
"""Upper bounds (seconds) of the time-to-decision histogram's buckets; ``+Inf`` is added."""


class ApprovalQueueCollector:
    """Reads the queue's figures from the database at each collection."""

    def collect(self) -> Iterator[Metric]:
        names = dict(Organization.objects.values_list("pk", "name"))
        yield self._requests(names)
        yield self._decisions(names)
        yield self._pending(names)
        yield self._waiting(names)

    def _requests(self, names: dict[int, str]) -> Metric:
        family = GaugeMetricFamily(
            "fimone_approval_requests",
            "Approval requests opened, by status now.",
            labels=["organization", "status"],
        )
        counts = ConfirmationRequest.objects.values_list("organization_id", "status").annotate(n=Count("pk"))
        for org, status, n in counts.order_by("organization_id", "status"):
            family.add_metric([names.get(org, str(org)), status], n)
        return family

    def _decisions(self, names: dict[int, str]) -> Metric:
        family = HistogramMetricFamily(
            "fimone_approval_time_to_decision_seconds",
            "Time from a request's opening to its verdict, of requests a person decided.",
            labels=["organization"],
        )
        waited = ExpressionWrapper(F("responded_at") - F("created_at"), output_field=DurationField())
        bounds = [(str(b), dt.timedelta(seconds=b)) for b in DECISION_BUCKETS]
        aggregates: dict[str, Any] = {
            f"le_{i}": Count("pk", filter=Q(waited__lte=limit)) for i, (_label, limit) in enumerate(bounds)
        }
        rows = (
            # A call a standing approval approved waited for nobody: it would only flatter the queue.
            ConfirmationRequest.objects.filter(
                status__in=DECIDED, responded_at__isnull=False, grant__isnull=True
            )
            .annotate(waited=waited)
            .values("organization_id")
            .annotate(total=Count("pk"), seconds=Sum("waited"), **aggregates)
            .order_by("organization_id")
        )
        for row in rows:
            buckets = [(label, row[f"le_{i}"]) for i, (label, _limit) in enumerate(bounds)]
            buckets.append(("+Inf", row["total"]))
            seconds = row["seconds"]
            total_seconds = seconds.total_seconds() if seconds is not None else 0.0
            family.add_metric([names.get(row["organization_id"], "")], buckets, sum_value=total_seconds)
        return family

    def _pending(self, names: dict[int, str]) -> Metric:
        family = GaugeMetricFamily(
            "fimone_approval_pending",
            "Requests waiting for a verdict now, by age.",
            labels=["organization", "age"],
        )
        now = timezone.now()
        created: dict[int, list[dt.datetime]] = defaultdict(list)
        pending = ConfirmationRequest.objects.filter(status=ConfirmationStatus.PENDING)
        for org, moment in pending.values_list("organization_id", "created_at"):
            created[org].append(moment)
        for org in sorted(names):
            for label, n in pending_by_age(created[org], now=now):
                family.add_metric([names[org], label], n)
        return family

    def _waiting(self, names: dict[int, str]) -> Metric:
        family = GaugeMetricFamily(
            "fimone_approval_waiting_for_approver",
            "Pending requests a person was asked to decide and has not voted on.",
            labels=["organization", "approver"],
        )
        waiting = waiting_for_votes(ConfirmationRequest.objects.filter(status=ConfirmationStatus.PENDING))
        people = {u.pk: u for u in User.objects.filter(pk__in={person for _org, person in waiting})}
        for (org, person), n in sorted(waiting.items()):
            family.add_metric([names.get(org, str(org)), display_name(people[person])], n)
        return family


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ApprovalQueueCollector())
    return registry


def _bearer(request: HttpRequest) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _refusal(request: HttpRequest) -> HttpResponse | None:
    """``None`` for a scraper with the token or a signed-in superuser; else 401 or 403."""
    expected = settings.METRICS_TOKEN
    token = _bearer(request)
    if token is not None:
        if expected and hmac.compare_digest(token.encode(), expected.encode()):
            return None
        return _plain(401, "invalid metrics token")
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return (
            None if user.is_superuser else _plain(403, "only superusers and the metrics token read /metrics")
        )
    return _plain(401, "a metrics token is needed: Authorization: Bearer <METRICS_TOKEN>")


def _plain(status: int, message: str) -> HttpResponse:
    response = HttpResponse(message + "\n", status=status, content_type="text/plain; charset=utf-8")
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="fimone-metrics"'
    return response


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The approval queue in Prometheus' text format (module docstring)."""
    refused = _refusal(request)
    if refused is not None:
        return refused
    return HttpResponse(generate_latest(_registry()), content_type=CONTENT_TYPE_LATEST)
