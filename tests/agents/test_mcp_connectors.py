"""MCP servers as connectors: their tools listed into actions, called through the one tool-call
pipeline (hooks, the gate, the at-most-once record), against a server written with the official
SDK, run over stdio and over Streamable HTTP in a process of its own."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from agents import events as ev
from agents.mcp_connectors import ToolsDiff, connector_tools_refresh
from agents.models import Connector, ConnectorAction, Run, RunStatus, ToolExecution
from agents.services import run_start
from agents.tools.toolbox import tools_for_agent
from approvals.models import ConfirmationRequest
from approvals.services import confirmation_decide
from fimone.errors import ServiceError
from tests.agents.engine_kit import events_of
from tests.agents.mcp_kit import (
    ToolboxHarness,
    calls_of,
    http_connector,
    listed,
    mcp_connector,
    records_over_http,
    server_log,
    stdio_connector,
)
from tests.approvals.kit import set_policy
from tests.personas import make_agent, make_hook, scripted

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _driven_here(resumes) -> None:
    """Runs are driven by the tests (``ToolboxHarness``), resumes recorded: nothing in the background."""


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "records.jsonl"


@pytest.fixture(params=["stdio", "http"])
def records(request, personas, log) -> Connector:
    """The records server's connector, over each transport."""
    if request.param == "stdio":
        return stdio_connector(personas.org, log)
    url, _process = request.getfixturevalue("records_http")
    return http_connector(personas.org, url)


@pytest.fixture
def records_http(log):
    with records_over_http(log) as served:
        yield served


def once_the_call_started(log: Path, act) -> threading.Thread:
    """A thread that does ``act(entry)`` as soon as the records server logs the start of a call of
    ``slow`` (the entry carries the server's pid)."""

    def watch() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            started = [e for e in server_log(log) if e["tool"] == "slow" and e["event"] == "start"]
            if started:
                act(started[0])
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    return watcher


def agent_calling(personas, connector: Connector, *calls: tuple[str, dict], hooks=None, **fields):
    """An agent with every tool of ``connector`` whose model makes ``calls`` in turn, then answers
    with the last observation."""
    turns = [{"tool_calls": [{"name": name, "arguments": args}]} for name, args in calls]
    agent = make_agent(
        personas.org,
        personas.operator,
        model_config_json=scripted(*turns, {"content": "Result: {last}"}, hooks=hooks),
        **fields,
    )
    agent.actions.set(connector.actions.all())
    return agent


def start(personas, agent) -> Run:
    return run_start(agent=agent, user=personas.member, input="go")


# --- listing the server's tools ---------------------------------------------------------------------


def test_its_tools_are_listed_with_their_schemas_and_their_hints_kept_as_the_servers_claim(records) -> None:
    actions = listed(records, reviewed=False)

    assert set(actions) == {"lookup", "delete_record", "slow", "fail"}
    lookup = actions["lookup"]
    assert lookup.tool_name == "records__lookup" and lookup.description == "Read one record by its id."
    assert lookup.parameters_schema["required"] == ["record_id"]
    assert lookup.annotations == {"readOnlyHint": True}
    assert {(a.is_write, a.requires_confirmation) for a in actions.values()} == {(True, True)}, (
        "until an operator sets them, every tool writes and asks a person (test_mcp_annotations.py)"
    )
    assert all(action.enabled for action in actions.values()), "the first listing's tools are on"
    records.refresh_from_db()
    assert records.tools_listed_at is not None


def test_a_tool_that_appears_later_is_not_callable_until_an_operator_enables_it(personas, log) -> None:
    records = stdio_connector(personas.org, log)
    listed(records)
    ConnectorAction.objects.filter(connector=records, remote_name="slow").delete()  # unseen before

    diff = connector_tools_refresh(connector=records, actor=None)

    assert diff.added_disabled == ["records__slow"] and diff.added == []
    assert any("Off until you enable them" in line for line in diff.lines())
    agent = agent_calling(personas, records)
    assert "records__slow" not in tools_for_agent(agent)
    ConnectorAction.objects.filter(connector=records, remote_name="slow").update(enabled=True)
    assert "records__slow" in tools_for_agent(agent)


def test_a_tool_the_server_stops_listing_is_kept_but_no_longer_offered(personas, log) -> None:
    records = stdio_connector(personas.org, log)
    listed(records)
    gone = ConnectorAction.objects.create(
        connector=records, name="archive", remote_name="archive", parameters_schema={"type": "object"}
    )
    agent = agent_calling(personas, records)
    assert "records__archive" in tools_for_agent(agent)

    diff = connector_tools_refresh(connector=records, actor=None)

    gone.refresh_from_db()
    assert diff.removed == ["records__archive"] and gone.missing_since is not None
    assert "records__archive" not in tools_for_agent(agent)
    again = connector_tools_refresh(connector=records, actor=None)
    assert again.lines() == ["No change: 4 tool(s), as before."]


def test_an_operators_approval_setting_survives_a_refresh(personas, log) -> None:
    records = stdio_connector(personas.org, log)
    delete = listed(records)["delete_record"]
    ConnectorAction.objects.filter(pk=delete.pk).update(requires_confirmation=False)

    connector_tools_refresh(connector=records, actor=None)

    delete.refresh_from_db()
    assert delete.requires_confirmation is False


def test_a_server_newly_calling_a_tool_destructive_leaves_it_as_the_operator_set_it_and_says_so(
    personas, log
) -> None:
    records = stdio_connector(personas.org, log)
    listed(records)
    # Accepted when it said read-only, and set so by the operator; the server now says destructive.
    delete = ConnectorAction.objects.get(connector=records, remote_name="delete_record")
    ConnectorAction.objects.filter(pk=delete.pk).update(
        annotations={"readOnlyHint": True}, requires_confirmation=False, is_write=False
    )

    diff = connector_tools_refresh(connector=records, actor=None)

    delete.refresh_from_db()
    assert (delete.is_write, delete.requires_confirmation) == (False, False), "the operator decides"
    assert diff.changed == ["records__delete_record (the server now says: read-only → destructive)"]
    assert delete.listing_to_review == {"annotations": {"readOnlyHint": False, "destructiveHint": True}}


def test_a_server_that_cannot_be_reached_changes_nothing_and_says_why(personas, tmp_path) -> None:
    records = mcp_connector(personas.org, mcp_transport=Connector.Transport.STDIO, command=["/bin/false"])

    with pytest.raises(ServiceError) as refused:
        connector_tools_refresh(connector=records, actor=None)

    assert "could not reach the MCP server" in refused.value.message
    assert not records.actions.exists()


def test_a_tool_with_an_unreadable_name_gets_one_a_model_can_call() -> None:
    from agents.mcp_connectors import action_name_for

    assert action_name_for("get-sum", slug="everything", taken=set()) == "get-sum"
    weird = action_name_for("files/read.all", slug="fs", taken=set())
    assert weird.startswith("files_read_all_") and "__" not in weird
    long = action_name_for("x" * 100, slug="s" * 40, taken=set())
    assert len(f"{'s' * 40}__{long}") <= 64
    assert action_name_for("lookup", slug="r", taken={"lookup"}) != "lookup"


def test_a_diff_with_nothing_says_so() -> None:
    assert ToolsDiff(unchanged=3).lines() == ["No change: 3 tool(s), as before."]


# --- calls through the pipeline ---------------------------------------------------------------------


def test_a_read_only_tool_runs_and_the_model_reads_its_structured_content(personas, records, log) -> None:
    listed(records)
    agent = agent_calling(personas, records, ("records__lookup", {"record_id": "r-1"}))
    run = start(personas, agent)

    assert ToolboxHarness().execute(run) == RunStatus.COMPLETED

    [finished] = events_of(run, ev.TOOL_FINISHED)
    assert finished["status"] == "succeeded"
    assert json.loads(finished["observation"]) == {"id": "r-1", "title": "First record"}
    assert calls_of(log, "lookup") == [{"record_id": "r-1"}]


def test_a_destructive_tool_waits_for_a_person_and_runs_once_after_approval(
    personas, records, log, resumes
) -> None:
    set_policy(personas)
    listed(records)
    agent = agent_calling(personas, records, ("records__delete_record", {"record_id": "r-2"}))
    run = start(personas, agent)

    assert ToolboxHarness().execute(run) == RunStatus.AWAITING_APPROVAL
    assert calls_of(log, "delete_record") == []
    request = ConfirmationRequest.objects.get()
    assert request.tool_name == "records__delete_record"

    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    for run_id in resumes.run_ids:
        ToolboxHarness().resume(Run.objects.get(pk=run_id))
    # A second resume (a duplicate wake-up) finds the call done.
    ToolboxHarness().resume(Run.objects.get(pk=run.pk))

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and "deleted r-2" in run.output
    assert calls_of(log, "delete_record") == [{"record_id": "r-2"}]


def test_an_is_error_result_is_the_observation_and_the_call_failed(personas, records, log) -> None:
    listed(records)
    agent = agent_calling(personas, records, ("records__fail", {"reason": "books closed"}))
    run = start(personas, agent)

    ToolboxHarness().execute(run)

    [finished] = events_of(run, ev.TOOL_FINISHED)
    assert finished["status"] == "failed"
    assert finished["observation"].startswith("Tool error: records: fail:")
    assert "books closed" in finished["observation"]


def test_a_call_past_the_timeout_is_cancelled_on_the_server_and_its_outcome_unknown(
    personas, records, log
) -> None:
    listed(records)
    Connector.objects.filter(pk=records.pk).update(timeout_seconds=0.5)
    agent = agent_calling(personas, records, ("records__slow", {"seconds": 5}))
    run = start(personas, agent)

    ToolboxHarness().execute(run)

    [finished] = events_of(run, ev.TOOL_FINISHED)
    assert finished["status"] == ToolExecution.Status.UNKNOWN
    assert "did not answer within 0.5s" in finished["observation"]
    assert "It was not run again" in finished["observation"]
    deadline = time.monotonic() + 10
    while "cancelled" not in [e["event"] for e in server_log(log)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [e["event"] for e in server_log(log) if e["tool"] == "slow"] == ["start", "cancelled"]


def test_a_server_killed_mid_call_is_outcome_unknown_and_never_called_again(personas, records, log) -> None:
    listed(records)
    agent = agent_calling(personas, records, ("records__slow", {"seconds": 30}))
    run = start(personas, agent)

    killer = once_the_call_started(log, lambda started: os.kill(started["pid"], signal.SIGKILL))
    ToolboxHarness().execute(run)
    killer.join()

    execution = ToolExecution.objects.get(run=run)
    assert execution.status == ToolExecution.Status.UNKNOWN
    [finished] = events_of(run, ev.TOOL_FINISHED)
    assert finished["observation"].startswith("Outcome unknown: ")
    assert "records: slow" in finished["observation"] and "It was not run again" in finished["observation"]
    assert len(calls_of(log, "slow")) == 1
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, "the model was told, and answered"


# --- hooks ------------------------------------------------------------------------------------------


BOTH = ["records__lookup", "records__delete_record"]


@pytest.mark.parametrize(
    ("matcher", "blocked"),
    [
        ("mcp__records__delete_record", ["records__delete_record"]),
        ("records__delete_*", ["records__delete_record"]),
        ("re:mcp__records__.*", BOTH),
        ("mcp__records__*", BOTH),
        ("re:mcp__ledger__.*", []),
    ],
)
def test_a_hook_matches_an_mcp_tool_by_its_name_or_claude_codes_spelling(
    personas, log, matcher, blocked
) -> None:
    records = stdio_connector(personas.org, log)
    listed(records)
    ConnectorAction.objects.filter(connector=records).update(requires_confirmation=False)
    make_hook(
        personas.org,
        "deny_tools",
        params={"tools": ["*"], "message": "Records are frozen."},
        matcher=matcher,
    )
    agent = agent_calling(
        personas,
        records,
        ("records__lookup", {"record_id": "r-1"}),
        ("records__delete_record", {"record_id": "r-1"}),
    )
    run = start(personas, agent)

    ToolboxHarness().execute(run)

    refused = events_of(run, ev.TOOL_BLOCKED)
    assert [b["tool"] for b in refused] == blocked
    assert all(b["error"] == "Records are frozen." for b in refused)
    ran = {"lookup", "delete_record"} - {name.removeprefix("records__") for name in blocked}
    assert {e["tool"] for e in server_log(log) if e["event"] == "start"} == ran


def test_a_claude_spelling_matcher_never_matches_a_tool_that_is_not_mcp() -> None:
    from hooks import HookContext
    from hooks.kinds.base import Matcher

    matcher = Matcher("re:mcp__.*")
    assert matcher.matches(HookContext(tool_name="oa__pay", metadata={"mcp_tool_name": "mcp__oa__pay"}))
    assert not matcher.matches(HookContext(tool_name="oa__pay"))
    assert not Matcher("mcp__oa__pay").matches(HookContext(tool_name="oa__pay"))


def test_a_read_only_organisation_blocks_the_servers_writing_tools_not_its_reads(personas, log) -> None:
    records = stdio_connector(personas.org, log)
    listed(records)
    ConnectorAction.objects.filter(connector=records).update(requires_confirmation=False)
    personas.org.read_only = True
    personas.org.save(update_fields=["read_only"])
    agent = agent_calling(
        personas,
        records,
        ("records__lookup", {"record_id": "r-1"}),
        ("records__delete_record", {"record_id": "r-1"}),
    )
    run = start(personas, agent)

    ToolboxHarness().execute(run)

    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert blocked["tool"] == "records__delete_record" and blocked["blocked_by"] == "read_only_guard"
    assert calls_of(log, "delete_record") == [] and len(calls_of(log, "lookup")) == 1


# --- evals, secrets, egress -------------------------------------------------------------------------


def test_an_eval_answers_mcp_tools_with_a_dry_run_and_calls_only_reads_live(personas, log) -> None:
    from agents.tools.mcp_tools import McpTool
    from agents.tools.sandbox import DryRunTool, live_tool_problems, sandbox_spec, sandboxed_tools

    records = stdio_connector(personas.org, log)
    listed(records)
    tools = tools_for_agent(agent_calling(personas, records))

    sandboxed = sandboxed_tools(tools, sandbox_spec(live_tools=["records__lookup"]))

    assert isinstance(sandboxed["records__lookup"], McpTool)
    assert isinstance(sandboxed["records__delete_record"], DryRunTool)
    assert live_tool_problems(tools, ["records__delete_record"]) == [
        "records__delete_record does not only read: an eval can never call it live"
    ]


def test_an_http_servers_headers_are_bound_to_its_origin(personas) -> None:
    records = http_connector(
        personas.org, "https://mcp.example.test/mcp", secrets={"headers": {"Authorization": "Bearer s3cret"}}
    )

    records.base_url = "https://mcp.example.test/v2/mcp"  # same origin: kept
    records.save()
    assert Connector.objects.get(pk=records.pk).secrets == {"headers": {"Authorization": "Bearer s3cret"}}

    records = Connector.objects.get(pk=records.pk)
    records.base_url = "https://elsewhere.example.test/mcp"
    records.save()
    assert Connector.objects.get(pk=records.pk).secrets is None


def test_a_stdio_servers_environment_is_bound_to_its_command(personas, log) -> None:
    records = stdio_connector(personas.org, log)

    records.command = ["/bin/cat"]
    records.save()

    assert Connector.objects.get(pk=records.pk).secrets is None


def test_a_secret_header_never_reaches_the_observation(personas, settings) -> None:
    settings.EGRESS_ALLOW = []
    records = http_connector(
        personas.org, "http://127.0.0.1:9/mcp", secrets={"headers": {"Authorization": "Bearer s3cret"}}
    )
    records.slug = "s3cret"  # a secret that shows up in the text is masked wherever it appears
    records.save()
    ConnectorAction.objects.create(
        connector=records,
        name="lookup",
        remote_name="lookup",
        parameters_schema={"type": "object"},
        requires_confirmation=False,
    )
    agent = agent_calling(personas, records, ("s3cret__lookup", {}))
    run = start(personas, agent)

    ToolboxHarness().execute(run)

    [finished] = events_of(run, ev.TOOL_FINISHED)
    assert "could not reach the MCP server" in finished["observation"]
    assert "s3cret" not in json.dumps(finished).replace("s3cret__lookup", "")


def test_a_server_at_a_private_address_is_refused_before_anything_is_sent(personas, settings) -> None:
    settings.EGRESS_ALLOW = []
    records = http_connector(personas.org, "http://127.0.0.1:9/mcp")

    with pytest.raises(ServiceError) as refused:
        connector_tools_refresh(connector=records, actor=None)

    assert "loopback" in refused.value.message and "nothing was sent" in refused.value.message


def test_only_a_code_hooks_holder_may_set_a_stdio_servers_command(governed, log) -> None:
    from agents.mcp_connectors import mcp_connector_save
    from tests.console.admin_forms import grant

    connector = Connector(
        organization=governed.org,
        slug="records",
        name="Records",
        kind=Connector.Kind.MCP,
        mcp_transport=Connector.Transport.STDIO,
        command=["/bin/cat"],
    )
    with pytest.raises(ServiceError) as refused:
        mcp_connector_save(connector=connector, actor=governed.operator)
    assert refused.value.code == "forbidden"

    grant(governed.operator, "manage_code_hooks")
    governed.operator = type(governed.operator).objects.get(pk=governed.operator.pk)  # fresh perm cache
    assert mcp_connector_save(connector=connector, actor=governed.operator).pk is not None
    with pytest.raises(ServiceError):
        mcp_connector_save(connector=connector, actor=governed.stranger)


# --- sessions kept on long-lived loops --------------------------------------------------------------


def test_a_long_lived_loop_keeps_one_session_and_reopens_it_when_the_server_went_away(
    personas, log, monkeypatch
) -> None:
    import asyncio

    from agents.tools import mcp_tools
    from agents.tools.toolbox import action_tool

    records = stdio_connector(personas.org, log)
    lookup = listed(records)["lookup"]
    tool = action_tool(lookup, records)
    monkeypatch.setattr(mcp_tools, "PING_AFTER_SECONDS", 0.0)  # every later call checks first

    async def three_calls() -> list:
        mcp_tools.keep_sessions_on(asyncio.get_running_loop())
        first = await tool.run({"record_id": "r-1"})
        second = await tool.run({"record_id": "r-2"})
        os.kill(server_log(log)[-1]["pid"], signal.SIGKILL)  # the server dies while idle
        await asyncio.sleep(0.2)
        third = await tool.run({"record_id": "r-1"})  # pinged, found gone, opened anew
        return [first, second, third]

    answers = asyncio.run(three_calls())

    assert [a["id"] for a in answers] == ["r-1", "r-2", "r-1"]
    pids = [entry["pid"] for entry in server_log(log)]
    assert pids[0] == pids[1] != pids[2], "one process for the first two calls, a new one after it died"


def test_cancelling_the_run_stops_the_call_on_the_server_and_its_outcome_is_unknown(personas, log) -> None:
    from agents.services import run_cancel

    records = stdio_connector(personas.org, log)
    listed(records)
    agent = agent_calling(personas, records, ("records__slow", {"seconds": 30}))
    run = start(personas, agent)

    canceller = once_the_call_started(
        log, lambda _started: run_cancel(run=Run.objects.get(pk=run.pk), user=personas.member)
    )
    started = time.monotonic()
    assert ToolboxHarness().execute(run) == RunStatus.CANCELLED
    canceller.join()

    assert time.monotonic() - started < 15, "the run did not wait for the 30 s call"
    assert ToolExecution.objects.get(run=run).status == ToolExecution.Status.UNKNOWN
    deadline = time.monotonic() + 10
    while "cancelled" not in [e["event"] for e in server_log(log)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [e["event"] for e in server_log(log) if e["tool"] == "slow"] == ["start", "cancelled"]
