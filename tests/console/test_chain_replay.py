"""Replaying a proposed chain over an agent's recorded calls: the calls whose outcome would change,
counted per change and per hook, as CSV; nothing runs, nothing is opened, nothing is spent."""

from __future__ import annotations

import csv
import datetime as dt
import io
from types import SimpleNamespace
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from agents.models import Agent, ChainReplay, HookDeclaration, Run, ToolExecution
from agents.services import run_start
from approvals.models import ConfirmationRequest
from console.chain_replay import (
    Window,
    chain_as_of,
    chain_current,
    chain_from_file,
    chain_replay_execute,
    chain_replay_start,
)
from fimone.errors import ServiceError
from tests.admin_kit import logged_in, page_text
from tests.agents.engine_kit import Harness
from tests.console.hook_editor_kit import payments as payments
from tests.every_path_kit import pay_tool
from tests.personas import make_agent, make_hook, scripted

pytestmark = pytest.mark.django_db

BIG = {"tools": "oa__purchase_pay", "conditions": [{"field": "amount", "op": ">=", "value": 1000}]}


def pay(personas: Any, agent: Agent, amount: int, tool: Any) -> Run:
    """One recorded call: the agent pays PO-<amount> for ``amount``."""
    agent.model_config_json = scripted(
        {
            "tool_calls": [
                {"name": "oa__purchase_pay", "arguments": {"purchase_id": f"PO-{amount}", "amount": amount}}
            ]
        },
        {"content": "done"},
    )
    agent.save(update_fields=["model_config_json"])
    run = run_start(agent=agent, user=personas.member, input=f"pay {amount}", dispatch=False)
    Harness(tool).execute(run)
    return run


@pytest.fixture
def history(governed, payments) -> SimpleNamespace:
    """An agent with the demo's payment tools that paid 500, 5,000 and 20,000 with no hook; the
    tool it used (in process, under the action's name)."""
    agent = payments
    tool = pay_tool()
    runs = [pay(governed, agent, amount, tool) for amount in (500, 5000, 20000)]
    return SimpleNamespace(agent=agent, tool=tool, runs=runs, personas=governed)


def replayed(history: SimpleNamespace, chain: dict, window: Window | None = None) -> ChainReplay:
    replay = chain_replay_start(
        agent=history.agent,
        actor=history.personas.operator,
        chain=chain,
        label="test",
        window=window or Window(),
    )
    return chain_replay_execute(replay_id=replay.pk)


def changes(replay: ChainReplay) -> list[tuple[Any, ...]]:
    return sorted(
        (c["arguments"]["amount"], c["then"], c["now"], c["change"], c["by"]) for c in replay.changes
    )


def test_a_new_approval_threshold_shows_the_calls_that_would_have_asked_and_nothing_runs(history) -> None:
    make_hook(history.agent, "confirm_when", params=BIG)
    executions = ToolExecution.objects.count()

    replay = replayed(history, chain_current(agent=history.agent))

    assert replay.status == "done" and (replay.done, replay.total) == (3, 3)
    assert changes(replay) == [
        (5000, "allowed", "asked", "allowed → asked", "confirm_when"),
        (20000, "allowed", "asked", "allowed → asked", "confirm_when"),
    ]
    assert replay.summary["by_hook"] == {"confirm_when": 2} and replay.summary["tried"] == 3
    assert len(history.tool.calls) == 3, "no tool ran again"
    assert ToolExecution.objects.count() == executions and not ConfirmationRequest.objects.exists()


def test_each_change_says_why_in_its_details(history) -> None:
    make_hook(history.agent, "confirm_when", params=BIG)

    replay = replayed(history, chain_current(agent=history.agent))

    details = [c["detail"] for c in replay.changes]
    assert len(details) == 2 and all(
        d.startswith("a person would be asked because confirm_when") for d in details
    )


def test_a_call_a_standing_approval_answered_was_asked_then_so_the_same_chain_changes_nothing(
    history,
) -> None:
    """A grant answers for a person: its call records a verdict and no pending card. The gate asked
    then as it would now; nothing changed, and nobody is blamed."""
    from agents import events as ev
    from agents.models import RunEvent

    make_hook(history.agent, "confirm_when", params=BIG)
    for run in history.runs:  # answered by a standing approval, as the gate records it
        call = ToolExecution.objects.get(run=run)
        last = RunEvent.objects.filter(run=run).order_by("-seq").first()
        RunEvent.objects.create(
            run=run,
            seq=last.seq + 1,
            type=ev.APPROVAL_DECIDED,
            payload={"tool_call_id": call.tool_call_id, "status": "approved", "by": "april"},
        )

    replay = replayed(history, chain_current(agent=history.agent))

    # 500 is under the threshold: asked then (by the grant's record), allowed now.
    assert changes(replay) == [(500, "asked", "allowed", "asked → allowed", "")]
    assert replay.changes[0]["detail"].startswith("a person was asked then")


def test_the_chain_of_a_past_moment_is_replayed_as_it_was(history) -> None:
    before = timezone.now()
    make_hook(history.agent, "confirm_when", params=BIG)

    replay = replayed(history, chain_as_of(agent=history.agent, when=before))

    assert replay.summary["changed"] == 0 and replay.changes == []


def test_a_chain_that_has_changed_since_is_replayed_as_it_was_then(history) -> None:
    threshold = make_hook(history.agent, "confirm_when", params=BIG)
    then = timezone.now()
    threshold.delete()  # the declaration is gone now; its history keeps it

    past = replayed(history, chain_as_of(agent=history.agent, when=then))
    now = replayed(history, chain_current(agent=history.agent))

    assert [c[0] for c in changes(past)] == [5000, 20000] and now.changes == []


def test_a_hooks_file_with_edits_not_saved_is_replayed_and_the_result_downloads_as_csv(history) -> None:
    text = "hooks:\n  - name: deny_tools\n    params: {tools: oa__purchase_pay, message: Frozen.}\n"
    make_hook(history.agent, "set_arguments", params={"tools": "oa__*", "values": {"note": "x"}})

    replay = replayed(
        history, chain_from_file(agent=history.agent, text=text, actor=history.personas.operator)
    )

    assert [c[1:4] for c in changes(replay)] == [("allowed", "blocked", "allowed → blocked")] * 3
    assert {c["by"] for c in replay.changes} == {"deny_tools"}
    assert HookDeclaration.objects.filter(agent=history.agent).count() == 1, "the file was not saved"
    response = logged_in(history.personas.operator).get(
        reverse("admin:agents_agent_replay_csv", args=[history.agent.pk, replay.pk])
    )
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert response["Content-Type"].startswith("text/csv") and len(rows) == 3
    assert rows[0]["change"] == "allowed → blocked" and '"purchase_id"' in rows[0]["arguments"]


def test_a_call_blocked_then_and_allowed_now_names_the_hook_that_blocked_it(governed, payments) -> None:
    agent = payments
    freeze = make_hook(agent, "deny_tools", params={"tools": "oa__purchase_pay"})
    tool = pay_tool()
    pay(governed, agent, 700, tool)
    freeze.delete()

    replay = replayed(SimpleNamespace(agent=agent, personas=governed), chain_current(agent=agent))

    assert tool.calls == []
    assert changes(replay) == [(700, "blocked by deny_tools", "allowed", "blocked → allowed", "deny_tools")]


def test_arguments_and_results_rewritten_differently_are_changes_too(history) -> None:
    make_hook(history.agent, "set_arguments", params={"tools": "oa__purchase_pay", "values": {"amount": 1}})

    rewritten = replayed(history, chain_current(agent=history.agent))
    HookDeclaration.objects.all().delete()
    make_hook(history.agent, "redact_result", params={"patterns": [r"\d{4}-\d{4}-\d{4}-\d{4}"]})
    redacted = replayed(history, chain_current(agent=history.agent))

    assert {c["change"] for c in rewritten.changes} == {"arguments rewritten differently"}
    assert len(rewritten.changes) == 3
    assert {(c["change"], c["by"]) for c in redacted.changes} == {
        ("result rewritten differently", "redact_result")
    }


def test_the_window_picks_the_calls(history) -> None:
    make_hook(history.agent, "confirm_when", params=BIG)
    chain = chain_current(agent=history.agent)

    last_one = replayed(history, chain, Window(last=1))
    tomorrow = replayed(history, chain, Window(since=timezone.now() + dt.timedelta(days=1)))
    other_tool = replayed(history, chain, Window(tool="oa__purchase_list"))

    assert [c["arguments"]["amount"] for c in last_one.changes] == [20000], "the newest call"
    assert (tomorrow.total, tomorrow.summary["tried"]) == (0, 0)
    assert other_tool.summary["tried"] == 0


def test_a_window_or_chain_that_cannot_be_replayed_is_refused(history) -> None:
    now = timezone.now()
    with pytest.raises(ServiceError, match="after its end"):
        replayed(history, chain_current(agent=history.agent), Window(since=now, until=now))
    with pytest.raises(ServiceError, match="would fail before any tool call"):
        replayed(history, {"v": 1, "error": "unknown hook 'nope'"})
    assert not ChainReplay.objects.exists()


# --- the admin pages ---------------------------------------------------------------------------------


@pytest.fixture
def runs_inline(monkeypatch):
    """The replay task, run where it is enqueued (a worker's job in production)."""
    monkeypatch.setattr(
        "console.admin.replays.chain_replay_task",
        SimpleNamespace(delay=lambda pk: chain_replay_execute(replay_id=pk)),
    )


def test_an_operator_replays_a_file_from_the_agent_page_and_reads_the_changes(
    history, runs_inline, django_capture_on_commit_callbacks
) -> None:
    client = logged_in(history.personas.operator)
    page = page_text(client.get(reverse("admin:agents_agent_change", args=[history.agent.pk])))
    assert reverse("admin:agents_agent_replay", args=[history.agent.pk]) in page

    text = (
        "hooks:\n  - name: confirm_when\n    params: {tools: oa__purchase_pay, "
        "conditions: [{field: amount, op: '>=', value: 10000}]}\n"
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("admin:agents_agent_replay", args=[history.agent.pk]),
            {"source": "file", "hooks_file": text, "last": "100", "tool": "oa__purchase_pay"},
        )

    replay = ChainReplay.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse(
        "admin:agents_agent_replay_result", args=[history.agent.pk, replay.pk]
    )
    result = page_text(client.get(response["Location"]))
    assert "1 of 3 calls would change" in result
    assert "allowed → asked" in result and "confirm_when" in result and "Download CSV" in result
    # Each changed call's tool by its title, as people read it, not its internal name.
    assert (
        '<td data-label="Tool">Purchase pay</td>' in result and "<code>oa__purchase_pay</code>" not in result
    )


def test_a_bad_hooks_file_or_window_is_told_on_the_form(history) -> None:
    client = logged_in(history.personas.operator)
    url = reverse("admin:agents_agent_replay", args=[history.agent.pk])

    bad_file = page_text(
        client.post(url, {"source": "file", "hooks_file": "hooks:\n  - name: nope\n", "last": "10"})
    )
    bad_window = page_text(
        client.post(url, {"source": "current", "last": "10", "since": "2026-12-05", "until": "2026-12-01"})
    )

    assert "hooks file:2" in bad_file and "unknown hook" in bad_file
    assert "The window ends before it starts." in bad_window
    assert not ChainReplay.objects.exists()


def test_only_the_agents_operators_may_replay(history) -> None:
    p = history.personas
    url = reverse("admin:agents_agent_replay", args=[history.agent.pk])
    replay = replayed(history, chain_current(agent=history.agent))
    result = reverse("admin:agents_agent_replay_result", args=[history.agent.pk, replay.pk])

    assert logged_in(p.auditor).get(url).status_code == 403
    assert logged_in(p.other_operator).get(url).status_code == 404
    assert logged_in(p.other_operator).get(result).status_code == 404
    other = make_agent(p.org, p.operator, name="Other")
    elsewhere = reverse("admin:agents_agent_replay_result", args=[other.pk, replay.pk])
    assert logged_in(p.operator).get(elsewhere).status_code == 404, "a replay is read on its own agent"


def test_a_replay_in_progress_shows_how_far_it_got_and_reloads_itself(history) -> None:
    replay = chain_replay_start(
        agent=history.agent,
        actor=history.personas.operator,
        chain=chain_current(agent=history.agent),
        label="the current chain",
        window=Window(),
    )
    ChainReplay.objects.filter(pk=replay.pk).update(status="running", total=4000, done=1000)
    url = reverse("admin:agents_agent_replay_result", args=[history.agent.pk, replay.pk])

    text = page_text(logged_in(history.personas.operator).get(url))

    assert "Running: 1000 of 4000 calls tried." in text and '<progress max="100" value="25">' in text
    assert '<meta http-equiv="refresh" content="2">' in text


def test_a_replay_delivered_twice_is_done_once(history) -> None:
    make_hook(history.agent, "confirm_when", params=BIG)
    replay = replayed(history, chain_current(agent=history.agent))

    again = chain_replay_execute(replay_id=replay.pk)

    assert (again.status, again.done, again.summary["changed"]) == ("done", 3, 2)


def test_the_hooks_file_starts_as_the_agents_hooks_now(history) -> None:
    make_hook(history.agent, "confirm_when", params=BIG)

    url = reverse("admin:agents_agent_replay", args=[history.agent.pk])
    text = page_text(logged_in(history.personas.operator).get(url))

    assert "- name: confirm_when" in text and "oa__purchase_pay" in text


def test_a_replay_shows_a_past_amount_no_condition_can_compare_as_asking_a_person(governed, payments) -> None:
    """Doubt goes to a person (docs/design.md §1.16): a payment recorded with "25,000.00" as its amount
    would now wait for a person under "from 1,000", not slip through."""
    text_or_number = {
        "type": "object",
        "properties": {"purchase_id": {"type": "string"}, "amount": {"type": ["number", "string"]}},
        "required": ["purchase_id", "amount"],
    }
    payments.actions.filter(name="purchase_pay").update(parameters_schema=text_or_number)
    tool = pay_tool(parameters=text_or_number)
    for amount in ("25,000.00", "500"):
        payments.model_config_json = scripted(
            {
                "tool_calls": [
                    {"name": "oa__purchase_pay", "arguments": {"purchase_id": "PO-9", "amount": amount}}
                ]
            },
            {"content": "done"},
        )
        payments.save(update_fields=["model_config_json"])
        Harness(tool).execute(run_start(agent=payments, user=governed.member, input="pay", dispatch=False))
    make_hook(payments, "confirm_when", params=BIG)

    replay = replayed(SimpleNamespace(agent=payments, personas=governed), chain_current(agent=payments))

    assert replay.status == "done" and replay.summary["tried"] == 2
    assert changes(replay) == [("25,000.00", "allowed", "asked", "allowed → asked", "confirm_when")]
