"""Telemetry recorded in memory for a test (the ``recorded`` fixture of tests/conftest.py)."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class Recorded:
    """What telemetry recorded while the fixture was on."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if name is None or s.name == name]

    def metric_points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]
