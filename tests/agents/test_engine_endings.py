"""How a run ends when what it needs fails, the same for the ReAct and the DAG engine: failed, at
a named stage, with an error that says why."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from agents import events as ev
from agents.engine.runner import run_execute
from agents.llm.base import LLMError, LLMProvider, LLMResponse
from agents.models import Agent, Run, RunStatus
from agents.services import run_start
from agents.tools.toolbox import ToolboxError
from tests.agents.engine_kit import events_of
from tests.personas import Personas, make_agent

CRASH_LABELS = {Agent.Engine.REACT: "run", Agent.Engine.DAG: "DAG run"}


class FailingProvider(LLMProvider):
    """A model whose every call raises ``error``."""

    name = "failing"

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    async def complete(self, *, messages: Any, tools: Any, on_delta: Any = None) -> LLMResponse:
        self.calls += 1
        raise self.error


@pytest.fixture(params=[Agent.Engine.REACT, Agent.Engine.DAG])
def run(request: pytest.FixtureRequest, personas: Personas, resumes: Any) -> Run:
    """A queued run of an agent of each engine (the test drives it)."""
    agent = make_agent(personas.org, personas.operator, engine=request.param)
    return run_start(agent=agent, user=personas.member, input="report alpha")


def ending(run: Run, **engine_options: Any) -> tuple[str | None, str]:
    """Drive ``run``; its status and the stage its ``run_failed`` event names."""
    status = async_to_sync(run_execute)(run.pk, **engine_options)
    run.refresh_from_db()
    return status, events_of(run, ev.RUN_FAILED)[-1]["stage"]


def test_a_model_that_gives_no_answer_fails_the_run_at_stage_llm(run: Run) -> None:
    model = FailingProvider(LLMError("the model service is unreachable"))

    assert ending(run, provider_factory=lambda config: model) == (RunStatus.FAILED, "llm")
    assert run.error == "the model service is unreachable" and model.calls == 1


def test_an_engine_that_crashes_fails_the_run_as_an_internal_error_and_logs_it(
    run: Run, caplog: pytest.LogCaptureFixture
) -> None:
    model = FailingProvider(RuntimeError("boom"))

    with caplog.at_level(logging.ERROR):
        assert ending(run, provider_factory=lambda config: model) == (RunStatus.FAILED, "engine")

    assert run.error == "internal error: RuntimeError"
    assert f"{CRASH_LABELS[run.agent.engine]} {run.pk} crashed" in caplog.messages


def test_tools_that_cannot_be_built_fail_the_run_before_the_model_is_asked(run: Run) -> None:
    model = FailingProvider(AssertionError("the model must not be asked"))

    def no_tools(*, agent: Agent) -> dict[str, Any]:
        raise ToolboxError("connector 'oa' is archived")

    status_and_stage = ending(run, provider_factory=lambda config: model, tools_factory=no_tools)

    assert status_and_stage == (RunStatus.FAILED, "tools") and model.calls == 0
    assert run.error == "the agent's tools cannot be built: connector 'oa' is archived"


def test_an_agent_archived_after_its_run_was_queued_fails_the_run_at_stage_archived(run: Run) -> None:
    Agent.objects.filter(pk=run.agent_id).update(archived_at=timezone.now())

    assert ending(run) == (RunStatus.FAILED, "archived")
    assert run.error == "this agent is archived and cannot run"
