"""OpenTelemetry: a trace of every run, model call, tool call and approval, and their metrics.

Off by default. The standard environment turns it on: an OTLP endpoint
(``OTEL_EXPORTER_OTLP_ENDPOINT``, or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` /
``…_METRICS_ENDPOINT``), read by the SDK's OTLP/HTTP exporters with the rest of ``OTEL_*``
(headers, timeouts, ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``); ``OTEL_SDK_DISABLED=true``
keeps it off all the same. On, Django's requests, Celery's tasks, psycopg's statements and
httpx's calls are traced by their OpenTelemetry instrumentations, and the platform adds:

- ``fim.run``: one span per drive of a run (a run that parks and resumes elsewhere has one per
  drive, each resumed one a child of the first: its context travels in the run's checkpoint);
- ``fim.llm``: each model call; ``fim.tool``: each tool call (hooks, gate and tool);
- ``fim.approval``: each approval request from its opening to its verdict, a child of the tool
  call that asked, recorded by the run once it learns the verdict (the request keeps the tool
  call's context, so the parentage holds across processes);
- ``fim.hook``: each hook of a chain (its decision, whether it triggered, its time), a child of
  the tool call (or of the run, for SessionStart);
- metrics ``fim.tool.duration`` (ms, by tool and status), ``fim.approval.time_to_decision`` (s, by
  verdict) and ``fim.hook.decisions`` (a count by hook, point and decision).

Attributes name things (ids, tool names, statuses), never argument values, unless an operator opts
in (``TELEMETRY_TOOL_ARGUMENTS``: then a tool span carries its arguments, credentials redacted).
A module-level flag keeps the hot paths free of any work while it is off.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

ENABLED = False
"""Whether telemetry is on in this process. Read on hot paths: nothing else is done while off."""

_propagator = TraceContextTextMapPropagator()
_state: dict[str, Any] = {}
SCOPE = "fim-one"
ENDPOINT_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether the environment asks for telemetry: an OTLP endpoint, and the SDK not disabled."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def configure(environ: Mapping[str, str]) -> bool:
    """Turn telemetry on as the environment says (:func:`wanted`), exporting over OTLP/HTTP, and
    instrument Django, Celery, psycopg and httpx. Once per process; returns whether it is on."""
    if ENABLED or not wanted(environ):
        return ENABLED
    # The exporters are imported here: a process without telemetry never loads them.
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

    install(
        BatchSpanProcessor(OTLPSpanExporter()),
        PeriodicExportingMetricReader(OTLPMetricExporter()),
    )
    DjangoInstrumentor().instrument()
    CeleryInstrumentor().instrument()
    PsycopgInstrumentor().instrument(enable_commenter=False)
    HTTPXClientInstrumentor().instrument()
    return True


def install(processor: SpanProcessor, reader: MetricReader) -> None:
    """Turn telemetry on with these span processor and metric reader (``configure`` gives OTLP's;
    tests give in-memory ones). The providers are this module's own, not the global ones, so a
    test can install and remove them at will."""
    global ENABLED
    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES first; "fim-one" where they name no service.
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "fim-one"}))
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(processor)
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    meter = meter_provider.get_meter(SCOPE)
    _state.update(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        tracer=tracer_provider.get_tracer(SCOPE),
        tool_duration=meter.create_histogram(
            "fim.tool.duration", unit="ms", description="A tool call's time, from its start to its outcome"
        ),
        hook_decisions=meter.create_counter(
            "fim.hook.decisions", description="Hooks' decisions, by hook, point and decision"
        ),
        approval_wait=meter.create_histogram(
            "fim.approval.time_to_decision",
            unit="s",
            description="An approval request's time from its opening to its verdict",
        ),
    )
    # The instrumentations use the global providers: make ours global once, when first installed.
    if not _state.get("global_set"):
        trace.set_tracer_provider(tracer_provider)
        metrics.set_meter_provider(meter_provider)
        _state["global_set"] = True
    ENABLED = True


def uninstall() -> None:
    """Turn telemetry off again (tests), flushing what was recorded."""
    global ENABLED
    ENABLED = False
    for key in ("tracer_provider", "meter_provider"):
        provider = _state.pop(key, None)
        if provider is not None:
            provider.shutdown()


def flush() -> None:
    """Export what is buffered now (a process about to end, a test about to read)."""
    for key in ("tracer_provider", "meter_provider"):
        provider = _state.get(key)
        if provider is not None:
            provider.force_flush()


# --- spans ------------------------------------------------------------------------------------------


def traceparent() -> str:
    """The current span's W3C ``traceparent``, or ``""`` when off or outside any span."""
    if not ENABLED:
        return ""
    carrier: dict[str, str] = {}
    with contextlib.suppress(Exception):
        _propagator.inject(carrier)
    return carrier.get("traceparent", "")


def _context_of(parent: str) -> otel_context.Context | None:
    return _propagator.extract({"traceparent": parent}) if parent else None


@contextlib.contextmanager
def span(
    name: str, *, attributes: Mapping[str, Any] | None = None, parent: str = "", link_current: bool = False
) -> Iterator[Span | None]:
    """A span around the block, current within it (``None`` when off; one that records nothing
    if the telemetry failed to start it). ``parent``: a stored ``traceparent`` to continue (else
    the current context); ``link_current``: link the context it replaces (a Celery task's span,
    when a resumed run continues its first drive's trace). Telemetry never changes what the block
    does: a fault of its own (an exporter that raised) is swallowed, the block's own exceptions
    pass through unchanged."""
    if not ENABLED:
        yield None
        return
    started: Span | None = None
    try:
        links = []
        if parent and link_current:
            current = trace.get_current_span().get_span_context()
            if current.is_valid:
                links.append(Link(current))
        started = _state["tracer"].start_span(
            name, context=_context_of(parent), attributes=dict(attributes or {}), links=links
        )
        token = otel_context.attach(trace.set_span_in_context(started))
    except Exception:  # no telemetry rather than a failed run: a span that records nothing
        started = None
    if started is None:
        yield trace.INVALID_SPAN
        return
    try:
        yield started
    except BaseException as exc:
        with contextlib.suppress(Exception):
            started.record_exception(exc)
            started.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        raise
    finally:
        with contextlib.suppress(Exception):
            otel_context.detach(token)
        with contextlib.suppress(Exception):
            started.end()


def record_span(
    name: str,
    *,
    parent: str,
    start: dt.datetime,
    end: dt.datetime,
    attributes: Mapping[str, Any],
    error: bool = False,
) -> None:
    """A span that happened between ``start`` and ``end`` (in another process, across a
    suspension), recorded now as a child of ``parent`` (a stored ``traceparent``)."""
    if not ENABLED:
        return
    with contextlib.suppress(Exception):  # telemetry never fails what records it
        recorded = _state["tracer"].start_span(
            name,
            context=_context_of(parent),
            kind=SpanKind.INTERNAL,
            attributes=dict(attributes),
            start_time=_ns(start),
        )
        if error:
            recorded.set_status(Status(StatusCode.ERROR))
        recorded.end(end_time=max(_ns(end), _ns(start)))


def _ns(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


# --- metrics ----------------------------------------------------------------------------------------


def tool_finished(*, tool: str, status: str, duration_ms: float) -> None:
    if ENABLED:
        with contextlib.suppress(Exception):
            _state["tool_duration"].record(duration_ms, {"fim.tool": tool, "fim.tool.status": status})


def approval_decided(*, status: str, seconds: float) -> None:
    if ENABLED:
        with contextlib.suppress(Exception):
            _state["approval_wait"].record(max(seconds, 0.0), {"fim.approval.status": status})


def hook_decided(
    *, hook: str, point: str, started: float, ended: float, decision: str, triggered: bool = True
) -> None:
    """One hook's part of a chain, as a span of the current context (the tool call, or the run
    for SessionStart) from ``started`` to ``ended`` (Unix seconds), and as a count of decisions.
    ``decision``: ``skipped`` (it did not trigger), ``allow``, ``rewrite``, ``ask``, ``block``,
    ``suspend``, ``failed`` (the chain stopped) or ``failed_open`` (its ``on_error`` let it go on);
    for a hook in shadow mode that would have changed something, ``shadow_<what>`` (``shadow_block``,
    ``shadow_rewrite``, …: ``hooks.shadow``), the call having gone on."""
    if not ENABLED:
        return
    attributes = {"fim.hook": hook, "fim.hook.point": point, "fim.hook.decision": decision}
    with contextlib.suppress(Exception):  # telemetry never fails what records it
        recorded = _state["tracer"].start_span(
            "fim.hook",
            attributes={**attributes, "fim.hook.triggered": triggered},
            start_time=int(started * 1_000_000_000),
        )
        if decision in ("failed", "failed_open"):
            recorded.set_status(Status(StatusCode.ERROR))
        recorded.end(end_time=int(max(ended, started) * 1_000_000_000))
    with contextlib.suppress(Exception):
        _state["hook_decisions"].add(1, attributes)
