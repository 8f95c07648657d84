"""On PostgreSQL a gateway call is started in one transaction on the server's event loop
(``services.gateway_call_start_async``); elsewhere through the ORM in the database thread
(``services.gateway_call_start``). Both must start the same run, refuse the same callers with
the same words, and find the same unanswered call again."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.utils import timezone

from agents.checks import hook_chain_of
from agents.models import ConnectorAction, Conversation, ExecutionPath, Run, RunStatus
from agents.tools.toolbox import tools_for_agent
from fimone import adb, rates
from fimone.errors import ServiceError
from mcp_gateway import services
from mcp_gateway.models import GatewayCall
from tenancy.models import Membership, Role
from tests.agents.archiving_race import a_start_waits_on_a_lock, start_while_an_archiving_commits
from tests.mcp_gateway.kit import HOLD_SECONDS, HeldAfterLookup, make_gateway
from tests.personas import make_action, make_agent, make_hook, make_http_connector

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]  # the loop's own connection

OWNER = "web.1:1:start"


def on_loop(gateway: Any, user: Any, tool: str, arguments: dict[str, Any]) -> services.StartedOnLoop:
    async def start() -> services.StartedOnLoop:
        try:
            async with adb.connection() as connection:
                return await services.gateway_call_start_async(
                    connection,
                    gateway=gateway,
                    user=user,
                    tool_name=tool,
                    arguments=arguments,
                    claimed_by=OWNER,
                )
        finally:
            await adb.close()
            await rates.close_async()

    return async_to_sync(start)()


def in_thread(gateway: Any, user: Any, tool: str, arguments: dict[str, Any]) -> tuple[GatewayCall, bool]:
    return services.gateway_call_start(
        gateway=gateway, user=user, tool_name=tool, arguments=arguments, claimed_by=OWNER
    )


@pytest.fixture
def desk(personas):
    """An agent with tools of two kinds, its own hook and its organisation's enforced one."""
    connector = make_http_connector(personas.org, "https://erp.example.test", slug="erp")
    action = make_action(connector, "lookup", path="/records/{id}")
    agent = make_agent(personas.org, personas.operator, builtin_tools=["calculator"], actions=[action])
    make_hook(agent, "deny_tools", params={"tools": "erp__delete"})
    make_hook(personas.org, "deny_tools", params={"tools": "calculator_off"}, priority=5)
    return make_gateway(agent)


def test_the_loop_starts_the_run_the_thread_starts(personas, desk) -> None:
    thread_call, fresh = in_thread(desk, personas.member, "calculator", {"expression": "1+1"})
    loop = on_loop(desk, personas.member, "calculator", {"expression": "2+2"})
    assert fresh and loop.started is not None

    by_thread, by_loop = Run.objects.get(pk=thread_call.run_id), Run.objects.get(pk=loop.run_id)
    for field in (
        "agent_id",
        "user_id",
        "execution_path",
        "status",
        "lease_owner",
        "hook_chain",
        "parent_run_id",
    ):
        assert getattr(by_loop, field) == getattr(by_thread, field), field
    assert by_loop.execution_path == ExecutionPath.MCP and by_loop.status == RunStatus.RUNNING
    assert by_loop.hook_chain == hook_chain_of(desk.agent) and by_loop.hook_chain["declared"]
    # Both open with the tool as people read it, the arguments' values and where the call came from.
    assert by_thread.input == f"Calculator (1+1) — an MCP call through {desk.name}"
    assert by_loop.input == f"Calculator (2+2) — an MCP call through {desk.name}"
    assert by_loop.lease_expires_at > timezone.now() and by_loop.started_at and by_loop.heartbeat_at
    assert by_loop.created_at and not by_loop.finished_at

    # The second call of the client's session joins the first one's conversation, titled by it.
    assert by_loop.conversation_id == by_thread.conversation_id
    conversation = Conversation.objects.get(pk=by_loop.conversation_id)
    assert (conversation.organization_id, conversation.agent_id, conversation.user_id) == (
        desk.organization_id,
        desk.agent_id,
        personas.member.pk,
    )
    assert conversation.title == by_thread.input[:80]

    call = GatewayCall.objects.get(pk=loop.call_id)
    assert (call.gateway_id, call.user_id, call.run_id, call.tool_name) == (
        desk.pk,
        personas.member.pk,
        loop.run_id,
        "calculator",
    )
    assert call.arguments == {"expression": "2+2"} and call.args_sha256 != thread_call.args_sha256
    assert call.tool_call_id.startswith("mcp-") and call.delivered_at is None

    # What the drive is handed is what it would read: the saved run and the agent's tools.
    run = loop.started.run
    assert (run.pk, run.conversation_id, run.agent.organization.pk) == (
        by_loop.pk,
        by_loop.conversation_id,
        desk.organization_id,
    )
    assert list(loop.started.tools) == list(tools_for_agent(desk.agent)) == ["erp__lookup", "calculator"]
    assert loop.call is not None and loop.call.run_id == run.pk


def test_a_call_never_answered_is_found_again_whichever_path_started_it(personas, desk) -> None:
    first, _ = in_thread(desk, personas.member, "calculator", {"expression": "6*7"})
    again = on_loop(desk, personas.member, "calculator", {"expression": "6*7"})
    assert (again.call_id, again.run_id, again.started) == (first.pk, first.run_id, None)

    services.gateway_call_delivered(call_id=first.pk)
    new = on_loop(desk, personas.member, "calculator", {"expression": "6*7"})
    assert new.started is not None and new.call_id != first.pk
    found, fresh = in_thread(desk, personas.member, "calculator", {"expression": "6*7"})
    assert (found.pk, fresh) == (new.call_id, False)
    assert Run.objects.count() == 2


def test_both_paths_open_the_run_with_the_tool_as_people_read_it(personas, desk) -> None:
    ConnectorAction.objects.filter(name="lookup").update(display_name="Look up a record")
    by_thread, _ = in_thread(desk, personas.member, "erp__lookup", {"id": "r-7", "full": True})
    by_loop = on_loop(desk, personas.member, "erp__lookup", {"id": "r-8", "full": True})
    unknown = on_loop(desk, personas.member, "erp__drop", {})

    opened = [Run.objects.get(pk=pk) for pk in (by_thread.run_id, by_loop.run_id, unknown.run_id)]
    assert [run.input for run in opened] == [
        f"Look up a record (r-7, true) — an MCP call through {desk.name}",
        f"Look up a record (r-8, true) — an MCP call through {desk.name}",
        f"erp__drop — an MCP call through {desk.name}",  # the name the client used: the run refuses it
    ]
    # One client session, one conversation, titled by its first call.
    assert {run.conversation_id for run in opened} == {by_thread.run.conversation_id}
    assert opened[0].conversation.title == opened[0].input[:80]


def refusal(start, *args) -> tuple[str, str]:
    with pytest.raises(ServiceError) as refused:
        start(*args)
    return refused.value.code, refused.value.message


def test_the_loop_refuses_whom_the_thread_refuses_and_writes_nothing(personas, desk) -> None:
    """Between the caller's check and the start, the agent may be archived or the person's
    membership changed: the start checks again, under the agent's lock, on both paths."""
    args = ("calculator", {"expression": "1"})
    cases: dict[str, Any] = {}

    Membership.objects.filter(user=personas.member).update(role=Role.AUDITOR)
    cases["auditor"] = [refusal(start, desk, personas.member, *args) for start in (in_thread, on_loop)]
    Membership.objects.filter(user=personas.member).delete()
    cases["removed"] = [refusal(start, desk, personas.member, *args) for start in (in_thread, on_loop)]
    desk.agent.archived_at = timezone.now()
    desk.agent.save(update_fields=["archived_at"])
    cases["archived"] = [refusal(start, desk, personas.operator, *args) for start in (in_thread, on_loop)]

    for case, (thread, loop) in cases.items():
        assert loop == thread, case
    assert cases["auditor"][0][0] == "forbidden" and cases["removed"][0] == ("not_found", "not found")
    assert cases["archived"][0][0] == "conflict"
    assert not Run.objects.exists() and not Conversation.objects.exists() and not GatewayCall.objects.exists()


def test_both_paths_take_from_the_same_run_start_budget(personas, desk, settings) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"run_start": "2/min"}}
    in_thread(desk, personas.member, "calculator", {"expression": "1"})
    on_loop(desk, personas.member, "calculator", {"expression": "2"})

    thread = refusal(in_thread, desk, personas.member, "calculator", {"expression": "3"})
    loop = refusal(on_loop, desk, personas.member, "calculator", {"expression": "3"})

    assert thread[0] == loop[0] == "throttled"
    assert (
        thread[1].startswith("Too many runs started: the limit is 2 per minute.")
        and "Nothing was started" in loop[1]
    )
    assert Run.objects.count() == 2
    # A call found again is no new run: it takes nothing from the budget.
    assert on_loop(desk, personas.member, "calculator", {"expression": "2"}).started is None


def test_a_start_on_the_loop_waiting_on_an_archiving_organisation_sees_it_archived(personas, desk) -> None:
    outcome = start_while_an_archiving_commits(
        organization=personas.org,
        admin=personas.admin,
        start=lambda: on_loop(desk, personas.member, "calculator", {"expression": "1"}),
        waits_on_lock=a_start_waits_on_a_lock,
    )

    assert outcome == {"refused": "conflict"}
    assert not Run.objects.exists() and not GatewayCall.objects.exists()


@pytest.mark.parametrize(
    ("first", "second"),
    [(in_thread, in_thread), (on_loop, on_loop), (in_thread, on_loop), (on_loop, in_thread)],
    ids=["thread-thread", "loop-loop", "thread-loop", "loop-thread"],
)
def test_two_identical_calls_at_the_same_moment_start_one_run(
    personas, desk, monkeypatch, first, second
) -> None:
    """The first start is held after its retry lookup, before it writes the call: the second,
    by whichever path, must not start a run of its own but find the first's call once it commits."""
    held = HeldAfterLookup(monkeypatch, services)
    started: dict[str, Any] = {}

    def begin(name: str, start: Any) -> None:
        try:
            started[name] = start(desk, personas.member, "calculator", {"expression": "6*7"})
        finally:
            connection.close()  # each thread had its own connection

    threads = {"first": threading.Thread(target=begin, args=("first", first))}
    threads["first"].start()
    assert held.first_arrived.wait(HOLD_SECONDS)
    threads["second"] = threading.Thread(target=begin, args=("second", second))
    threads["second"].start()
    held.let_go(a_start_waits_on_a_lock)
    for thread in threads.values():
        thread.join(HOLD_SECONDS)

    assert started.keys() == {"first", "second"}, "a start did not end"
    calls = [_call_and_run(started[name]) for name in ("first", "second")]
    assert Run.objects.count() == 1 and GatewayCall.objects.count() == 1, "one call, one run"
    assert calls[0][:2] == calls[1][:2], "the second is answered from the first's call and run"
    assert [fresh for *_, fresh in calls] == [True, False]


def _call_and_run(start: Any) -> tuple[int, int, bool]:
    """A start's call, run and whether it was new, whichever path it took."""
    if isinstance(start, services.StartedOnLoop):
        return start.call_id, start.run_id, start.started is not None
    call, fresh = start
    return call.pk, call.run_id, fresh


def test_the_loop_joins_a_session_as_the_thread_does(personas, desk) -> None:
    first = on_loop(desk, personas.member, "calculator", {"expression": "1+1"})
    Run.objects.filter(pk=first.run_id).update(status=RunStatus.AWAITING_APPROVAL)
    joined = on_loop(desk, personas.member, "calculator", {"expression": "2+2"})  # the first still waits
    session = Run.objects.get(pk=first.run_id).conversation_id
    assert Run.objects.get(pk=joined.run_id).conversation_id == session
    assert joined.started is not None and joined.started.run.conversation.pk == session

    # Quiet for well past the idle time: a new conversation; so after the person archived it.
    GatewayCall.objects.filter(pk__in=[first.call_id, joined.call_id]).update(
        created_at=timezone.now() - services.SESSION_IDLE * 3
    )
    later = on_loop(desk, personas.member, "calculator", {"expression": "3+3"})
    fresh = Run.objects.get(pk=later.run_id).conversation_id
    assert fresh != session
    Run.objects.filter(conversation_id=fresh).update(status=RunStatus.COMPLETED)
    Conversation.objects.filter(pk=fresh).update(archived_at=timezone.now())
    after_archiving = on_loop(desk, personas.member, "calculator", {"expression": "4+4"})
    assert Run.objects.get(pk=after_archiving.run_id).conversation_id not in {session, fresh}
