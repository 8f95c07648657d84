"""Shared by the tests of data migrations: migrating the test database to given migrations and, as
an autouse fixture a test module imports, back to the latest of every app afterwards."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets: list[tuple[str, str]]) -> Any:
    """Migrate to ``targets``; the historical apps as they are there."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def migrate_to_the_latest() -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.fixture(autouse=True)
def schema_back_to_the_latest():
    """Later tests share the database: leave it at the latest migration of every app."""
    yield
    migrate_to_the_latest()
