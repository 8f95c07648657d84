"""Credentials never reach an error text: the masking rules, and the engine applying them to every
tool error and run failure whatever the tool or the model service said."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from agents import events as ev
from agents.engine.runner import run_execute
from agents.llm.base import LLMError
from agents.models import Run, RunEvent, RunStatus, ToolExecution
from agents.services import run_start
from agents.tools.base import Tool, ToolError, ToolSpec
from agents.tools.redaction import dsn_secrets, redact_credentials
from hooks import HookContext, HookResult, PreToolUseHook
from hooks.catalog import register_hook
from tests.agents.engine_kit import RecordingTool, events_of
from tests.personas import Personas, make_agent, scripted

SECRET = "hunter22"

SHAPES = {
    "a URL DSN": ("postgres://u:hunter22@db/shop", "postgres://u:***@db/shop"),
    "a URL DSN with a bad port": ("postgres://u:hunter22@host:bad/db", "postgres://u:***@host:bad/db"),
    "a quoted URL in a driver message": (
        'invalid dsn: "postgresql://u:hunter22@[::1/db" in URI',
        'invalid dsn: "postgresql://u:***@[::1/db" in URI',
    ),
    "an @ inside the password": ("mysql://root:hun@ter22@db/x", "mysql://root:***@db/x"),
    "an empty user": ("redis://:hunter22@cache:6379/0", "redis://:***@cache:6379/0"),
    "a token as the user of a web URL": (
        "GET https://hunter22@api.example/x",
        "GET https://***@api.example/x",
    ),
    "a key=value DSN": ("host=db password=hunter22 port=5432", "host=db password=*** port=5432"),
    "a quoted key=value password with spaces": (
        "host=db password = 'hun ter22' port=1",
        "host=db password=*** port=1",
    ),
    "an unclosed quote": ("password='hunter22 host=db", "password=***"),
    "a password in a query string": ("postgres://u@db/x?password=hunter22", "postgres://u@db/x?password=***"),
    "two URLs on one line": (
        "from http://a:hunter22@x/ to https://b:hunter22@y/",
        "from http://a:***@x/ to https://b:***@y/",
    ),
}


@pytest.mark.parametrize(("text", "masked"), SHAPES.values(), ids=SHAPES.keys())
def test_it_masks_the_password_of_every_credential_shape(text: str, masked: str) -> None:
    assert redact_credentials(text) == masked


@pytest.mark.parametrize(
    "text",
    [
        'PostgreSQL error: relation "nope" does not exist',
        "connect to postgres://reader@db/shop failed",  # a role name is not a secret
        "GET http://127.0.0.1:8080/api/ answered 500",
        "a mail from ops@example.test",
    ],
)
def test_it_leaves_texts_without_credentials_alone(text: str) -> None:
    assert redact_credentials(text) == text


def test_it_masks_the_literal_secrets_it_is_given_however_they_appear() -> None:
    dsn = "postgres://u:hun%20ter22@db/shop"
    text = f"boom: {dsn} / raw hun ter22 / encoded hun%20ter22"
    masked = redact_credentials(text, secrets=dsn_secrets(dsn))
    assert "ter22" not in masked
    assert masked == "boom: postgres://u:***@db/shop / raw *** / encoded ***"


def test_it_masks_a_dsn_no_pattern_recognises_when_told_it_is_secret() -> None:
    dsn = "postgres://u:hunter 22@db/shop"  # a space: not a URL any parser would read
    masked = redact_credentials(f"invalid: {dsn}", secrets=dsn_secrets(dsn))
    assert "hunter" not in masked


# --- the engine -------------------------------------------------------------------------------------


class LeakyTool(Tool):
    """A tool whose error quotes its upstream's credentials, as a careless driver would."""

    def __init__(self) -> None:
        self.spec = ToolSpec(name="leaky__lookup", description="lookup")

    async def run(self, args: dict[str, Any]) -> Any:
        raise ToolError(f"upstream postgres://svc:{SECRET}@db/x said no: password={SECRET} rejected")


def recorded(run: Run) -> str:
    run.refresh_from_db()
    return json.dumps(
        {
            "output": run.output,
            "error": run.error,
            "checkpoint": run.checkpoint,
            "events": list(RunEvent.objects.filter(run=run).values_list("payload", flat=True)),
            "executions": list(ToolExecution.objects.filter(run=run).values("args", "result")),
        }
    )


def test_the_engine_masks_a_credential_in_any_tool_error(personas: Personas, monkeypatch: Any) -> None:
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    agent = make_agent(
        personas.org,
        personas.operator,
        model_config_json=scripted(
            {"tool_calls": [{"name": "leaky__lookup", "arguments": {}}]}, {"content": "Heard: {last}"}
        ),
    )
    run = run_start(agent=agent, user=personas.member, input="look it up")

    status = async_to_sync(run_execute)(run.pk, tools_factory=lambda agent: {"leaky__lookup": LeakyTool()})

    assert status == RunStatus.COMPLETED
    assert ToolExecution.objects.get(run=run).result == (
        "Tool error: upstream postgres://svc:***@db/x said no: password=*** rejected"
    )
    assert SECRET not in recorded(run)


def test_the_engine_masks_a_credential_in_a_run_failure(personas: Personas, monkeypatch: Any) -> None:
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    run = run_start(agent=make_agent(personas.org, personas.operator), user=personas.member, input="hi")

    def unreachable(config: dict[str, Any]) -> Any:
        raise LLMError(f"cannot reach https://bot:{SECRET}@llm.example/v1")

    assert async_to_sync(run_execute)(run.pk, provider_factory=unreachable) == RunStatus.FAILED

    run.refresh_from_db()
    assert run.error == "the agent's model is misconfigured: cannot reach https://bot:***@llm.example/v1"
    [failed] = events_of(run, ev.RUN_FAILED)
    assert failed["error"] == run.error
    assert SECRET not in recorded(run)


class CarelessPolicyHook(PreToolUseHook):
    """A hook whose refusal quotes a policy service's URL, credentials included."""

    name = "test_careless_policy"

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(allow=False, error=f"refused by https://policy:{SECRET}@policy.example/check")


class CrashingPolicyHook(PreToolUseHook):
    """A hook that crashes with its service's DSN in the exception text."""

    name = "test_crashing_policy"

    async def execute(self, ctx: HookContext) -> HookResult:
        raise RuntimeError(f"could not reach postgres://policy:{SECRET}@db/policies")


register_hook(CarelessPolicyHook)
register_hook(CrashingPolicyHook)


@pytest.mark.parametrize("hook", ["test_careless_policy", "test_crashing_policy"])
def test_the_engine_masks_a_credential_in_a_hooks_refusal_or_crash(
    personas: Personas, monkeypatch: Any, hook: str
) -> None:
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    agent = make_agent(
        personas.org,
        personas.operator,
        model_config_json=scripted(
            {"tool_calls": [{"name": "oa__lookup", "arguments": {}}]},
            {"content": "Heard: {last}"},
            hooks=[hook],
        ),
    )
    lookup = RecordingTool("oa__lookup")
    run = run_start(agent=agent, user=personas.member, input="look it up")

    assert async_to_sync(run_execute)(run.pk, tools_factory=lambda agent: {"oa__lookup": lookup}) == (
        RunStatus.COMPLETED
    )

    assert lookup.calls == []
    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert blocked["blocked_by"] == hook
    if hook == "test_careless_policy":
        assert blocked["error"] == "refused by https://policy:***@policy.example/check"
    else:
        [crash] = [e for e in events_of(run, ev.HOOK_SIDE_EFFECT) if e["failure"]]
        assert (
            crash["message"]
            == "hook test_crashing_policy raised RuntimeError: could not reach postgres://policy:***@db/policies"
        )
    assert SECRET not in recorded(run)
