"""Replaying a proposed hook chain over 10,000 recorded calls (``console.chain_replay``), end to end.

An agent with the demo's payment tools gets ``--calls`` recorded calls (runs with their
``tool.proposed``, ``tool.started`` and ``tool.finished`` events and their executions, written in
bulk: what a busy agent leaves behind); then a replay of a chain of class hooks — ``confirm_when``
(big payments ask), ``deny_tools`` (deleting is frozen), ``set_arguments``, ``redact_result`` and
``result_truncate`` — runs as its task runs it: reading the calls in batches, trying each, saving
progress. Timed: the whole ``chain_replay_execute``, ``--rounds`` times, reported with its spread.

Target: 10,000 calls in under 60 s.

    DATABASE_URL=postgres://… python bench/replay.py [--calls 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from _django import bench_database


def record_calls(agent, user, n: int) -> None:
    """``n`` recorded calls of ``agent``: one run each, its events and its execution."""
    from agents.models import Conversation, Run, RunEvent, ToolExecution

    conversation = Conversation.objects.create(
        organization_id=agent.organization_id, agent=agent, user=user, title="bench"
    )
    runs = Run.objects.bulk_create(
        Run(conversation=conversation, agent=agent, user=user, input="pay", status="completed", hook_chain={})
        for _ in range(n)
    )
    events, executions = [], []
    for i, run in enumerate(runs):
        call_id = f"call-{i}"
        tool = "oa__purchase_pay" if i % 4 else "oa__purchase_list"
        args = {"purchase_id": f"PO-{i}", "amount": (i * 37) % 90_000} if i % 4 else {"status": "pending"}
        result = {"paid": args.get("purchase_id"), "card": "6222-0000-1111-2222", "note": "x" * (i % 300)}
        done = {"tool_call_id": call_id, "tool": tool, "status": "succeeded", "observation": str(result)}
        asked = {"tool_call_id": call_id, "tool": tool, "arguments": args}
        events += [
            RunEvent(run=run, seq=1, type="tool.proposed", payload=asked),
            RunEvent(run=run, seq=2, type="tool.started", payload=asked),
            RunEvent(run=run, seq=3, type="tool.finished", payload=done),
        ]
        executions.append(
            ToolExecution(
                run=run,
                tool_call_id=call_id,
                tool_name=tool,
                args=args,
                args_sha256="0" * 64,
                status="succeeded",
                result=result,
            )
        )
    RunEvent.objects.bulk_create(events, batch_size=2_000)
    ToolExecution.objects.bulk_create(executions, batch_size=2_000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()

    with bench_database(need_postgres=False):
        from django.contrib.auth import get_user_model

        from console.chain_replay import Window, chain_current, chain_replay_execute, chain_replay_start
        from tenancy.models import Membership, Organization, Role
        from tests.agents.run_kit import PAY_SCHEMA
        from tests.personas import make_action, make_agent, make_hook, make_http_connector

        org = Organization.objects.create(name="Bench")
        user = get_user_model().objects.create_user("bench")
        Membership.objects.create(organization=org, user=user, role=Role.OPERATOR)
        connector = make_http_connector(org, "http://127.0.0.1:9/")
        actions = [
            make_action(connector, "purchase_list", path="purchases", requires_confirmation=False),
            make_action(connector, "purchase_pay", method="POST", path="purchases/{purchase_id}/pay",
                        parameters_schema=PAY_SCHEMA, requires_confirmation=False),
        ]  # fmt: skip
        agent = make_agent(org, user, actions=actions)
        big = [{"field": "amount", "op": ">=", "value": 50_000}]
        make_hook(agent, "confirm_when", params={"tools": "oa__purchase_pay", "conditions": big})
        make_hook(agent, "deny_tools", params={"tools": "oa__purchase_delete"})
        make_hook(agent, "set_arguments", params={"tools": "oa__purchase_pay", "values": {"note": "bench"}})
        make_hook(agent, "redact_result", params={"patterns": [r"\d{4}-\d{4}-\d{4}-\d{4}"]})
        make_hook(agent, "result_truncate", params={"max_chars": 200})
        started = time.perf_counter()
        record_calls(agent, user, opts.calls)
        print(f"{opts.calls:,} recorded calls written in {time.perf_counter() - started:.1f} s", flush=True)

        chain = chain_current(agent=agent)
        times = []
        for _ in range(opts.rounds):
            replay = chain_replay_start(
                agent=agent, actor=user, chain=chain, label="bench", window=Window(last=opts.calls)
            )
            started = time.perf_counter()
            replay = chain_replay_execute(replay_id=replay.pk)
            times.append(time.perf_counter() - started)
            assert replay.status == "done" and replay.summary["tried"] == opts.calls, replay.summary
            print(
                f"replayed {replay.summary['tried']:,} calls in {times[-1]:.1f} s "
                f"({replay.summary['changed']:,} would change: {replay.summary['by_change']})",
                flush=True,
            )
    median = statistics.median(times)
    verdict = "met" if max(times) < 60 else "NOT met"
    print(
        f"{opts.calls:,} calls: median {median:.1f} s [{min(times):.1f}-{max(times):.1f}] over {opts.rounds} "
        f"rounds, {opts.calls / median:,.0f} calls/s (target < 60 s in every round): {verdict}"
    )


if __name__ == "__main__":
    main()
