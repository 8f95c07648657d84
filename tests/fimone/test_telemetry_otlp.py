"""OpenTelemetry end to end: spans exported over OTLP/HTTP to a receiver the test starts, a run
parked in this process and resumed in another one configured only by the standard environment;
the receiver's spans show one trace, the approval a child of the call that asked and the resumed
drive a child of the first."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from agents.models import Run, RunStatus
from agents.services import run_start
from approvals.models import ConfirmationRequest
from approvals.services import confirmation_decide
from fimone import telemetry
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool, set_policy
from tests.approvals.stage_kit import paying
from tests.fimone.test_settings import ROOT
from tests.system.kit import test_database_url as database_url

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    service: str
    attributes: dict[str, Any]


class Receiver:
    """An OTLP/HTTP receiver: what the exporters sent to ``/v1/traces`` and ``/v1/metrics``."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.metric_names: set[str] = set()
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/traces":
                    received.take_traces(ExportTraceServiceRequest.FromString(body))
                    answer = ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/metrics":
                    received.take_metrics(ExportMetricsServiceRequest.FromString(body))
                    answer = ExportMetricsServiceResponse().SerializeToString()
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def take_traces(self, request: ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    attributes = {a.key: _value(a.value) for a in span.attributes}
                    self.spans.append(
                        ReceivedSpan(
                            span.name,
                            span.trace_id.hex(),
                            span.span_id.hex(),
                            span.parent_span_id.hex(),
                            resource.get("service.name", ""),
                            attributes,
                        )
                    )

    def take_metrics(self, request: ExportMetricsServiceRequest) -> None:
        for resource_metrics in request.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                self.metric_names.update(metric.name for metric in scope_metrics.metrics)

    def named(self, name: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.name == name]


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiving = Receiver()
    thread = threading.Thread(target=receiving.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiving
    finally:
        receiving.server.shutdown()
        receiving.server.server_close()


RESUME = """
import django
django.setup()
from asgiref.sync import async_to_sync
from agents.engine.runner import run_resume
from fimone import telemetry
from tests.approvals.kit import pay_tool
tool = pay_tool()
tools = {{tool.name: tool}}
status = async_to_sync(run_resume)({run_id}, reason="approved", tools_factory=lambda agent: tools)
from django.test import AsyncClient
health = async_to_sync(AsyncClient().get)("/healthz")  # through Django's ASGI handler, as Daphne serves
telemetry.flush()
print(status, telemetry.ENABLED, health.status_code)
"""


def test_a_parked_run_resumed_in_another_process_stays_one_trace_at_a_real_receiver(
    personas, resumes, receiver
) -> None:
    set_policy(personas)
    telemetry.install(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces")),
        PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{receiver.url}/v1/metrics")),
    )
    try:
        run = run_start(agent=paying(personas, 100), user=personas.member, input="pay 100")
        assert Harness(pay_tool()).execute(run) == RunStatus.AWAITING_APPROVAL
        request = ConfirmationRequest.objects.get(run=run)
        assert confirmation_decide(request_id=request.pk, user=personas.approver, approve=True).accepted
        telemetry.flush()
    finally:
        telemetry.uninstall()

    # Only the standard variables: the other process turns telemetry on by itself.
    resumed = subprocess.run(
        [sys.executable, "-c", RESUME.format(run_id=run.pk)],
        cwd=ROOT,
        env={
            "PATH": "/usr/bin:/bin",
            "DJANGO_SETTINGS_MODULE": "fimone.settings",
            "DATABASE_URL": database_url(),
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_SERVICE_NAME": "fim-one-worker",
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.split() == ["completed", "True", "200"], resumed.stdout
    assert Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED

    first_drive, resumed_drive = sorted(
        receiver.named("fim.run"), key=lambda s: s.attributes["fim.run.resumed"]
    )
    [paying_call, asking] = sorted(receiver.named("fim.tool"), key=lambda s: s.attributes["fim.tool.outcome"])
    [approval] = receiver.named("fim.approval")
    assert (
        asking.attributes["fim.tool.outcome"] == "waiting"
        and paying_call.attributes["fim.tool.outcome"] == "succeeded"
    )
    assert {
        first_drive.trace_id,
        asking.trace_id,
        approval.trace_id,
        resumed_drive.trace_id,
        paying_call.trace_id,
    } == {first_drive.trace_id}, "one trace across the suspension and the two processes"
    assert asking.parent_span_id == first_drive.span_id
    assert approval.parent_span_id == asking.span_id
    assert resumed_drive.parent_span_id == first_drive.span_id
    assert paying_call.parent_span_id == resumed_drive.span_id
    assert approval.attributes["fim.approval.status"] == "approved"
    # Each process names itself as its environment says: the other one by OTEL_SERVICE_NAME.
    assert (first_drive.service, resumed_drive.service) == ("fim-one", "fim-one-worker")
    # The other process's own instrumentations were on too: its statements are spans of the trace.
    statements = [
        s
        for s in receiver.spans
        if s.attributes.get("db.system") == "postgresql" or "db.system.name" in s.attributes
    ]
    assert any(s.trace_id == first_drive.trace_id for s in statements)
    assert {
        "fim.tool.duration",
        "fim.approval.time_to_decision",
        "fim.hook.decisions",
    } <= receiver.metric_names
    # And its requests: Django's instrumentation under ASGI.
    assert ("GET healthz", "healthz") in {(s.name, s.attributes.get("http.route")) for s in receiver.spans}
