"""Telemetry recorded in memory for a test: the ``recorded`` fixture (a plugin of tests/conftest.py;
fimone.telemetry needs no Django, so this loads before Django is set up)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fimone import telemetry


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


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    """OpenTelemetry on for the test, recorded in memory (fimone/telemetry.py)."""
    record = Recorded()
    telemetry.install(SimpleSpanProcessor(record.exporter), record.reader)
    try:
        yield record
    finally:
        telemetry.uninstall()
