"""Fixtures of the approval tests."""

from __future__ import annotations

import pytest

from tests.approvals.kit import Resumes


@pytest.fixture
def resumes(monkeypatch) -> Resumes:
    recorder = Resumes()
    monkeypatch.setattr("agents.executors.dispatch_resume", recorder)
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    return recorder
