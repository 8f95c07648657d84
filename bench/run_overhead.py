"""The platform's overhead per tool call: events, checkpoints, tool executions and hooks.

A scripted run makes 50 tool calls, one per turn, to an in-process no-op tool, on PostgreSQL.
The time the scripted model and the tool themselves take is measured and subtracted; what is left
is the platform's cost. Target: <= 1.5 ms per tool call on a quiet host. It also prints where that
goes: the step writes awaited on the event loop (``agents.engine.loop_writes``: each call's start,
durable, and its outcome), the engine's other database calls in the database thread, and the rest
(hooks, events, JSON, the scripted model's bookkeeping). Runs are driven as deployed: on the loop
that lives as long as the process (``agents.executors``, as a Celery worker and the server drive
them), so their step writes take the loop's pooled connections instead of opening one per run.

    DATABASE_URL=postgres://… python bench/run_overhead.py [--calls 50] [--runs 5]

With REDIS_URL set too, events are also streamed through the Redis channel layer, as in production.
"""

from __future__ import annotations

import argparse
import statistics
import time

from _django import bench_database

from fimone.gc_tuning import tune_for_server  # the collector alone: no settings read at import


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    opts = parser.parse_args()

    with bench_database():
        from django.contrib.auth import get_user_model

        import agents.engine.runner as runner
        from agents import executors
        from agents.llm.factory import provider_for
        from agents.models import Agent, RunEvent, RunStatus, ToolExecution
        from agents.services import run_start
        from agents.tools.base import Tool, ToolSpec
        from tenancy.models import Membership, Organization

        timed = {"model": 0.0, "tool": 0.0}

        class NoOp(Tool):
            spec = ToolSpec(name="noop", description="does nothing")

            async def run(self, args: dict) -> str:
                started = time.perf_counter()
                timed["tool"] += time.perf_counter() - started
                return "ok"

        def provider(config: dict):
            real = provider_for(config)

            class Timed(type(real)):
                async def complete(self, **kwargs):
                    started = time.perf_counter()
                    try:
                        return await real.complete(**kwargs)
                    finally:
                        timed["model"] += time.perf_counter() - started

            timed_provider = Timed.__new__(Timed)
            timed_provider.__dict__.update(real.__dict__)
            return timed_provider

        from asgiref.sync import sync_to_async

        import agents.engine.db as engine_db
        import agents.services as services

        in_thread = {"seconds": 0.0}

        def timed_call(fn, kwargs):
            started = time.perf_counter()
            try:
                return engine_db._fresh_call(fn, kwargs)
            finally:
                in_thread["seconds"] += time.perf_counter() - started

        # Every engine call to the database goes through this one callable (agents.engine.db).
        engine_db._call = sync_to_async(timed_call, thread_sensitive=True)

        from agents.engine import loop_writes

        on_loop = {"seconds": 0.0}
        write_on_loop = loop_writes.LoopWriter.run

        async def timed_write(self, sql, params):
            started = time.perf_counter()
            try:
                return await write_on_loop(self, sql, params)
            finally:
                on_loop["seconds"] += time.perf_counter() - started

        loop_writes.LoopWriter.run = timed_write

        services.dispatch_execute = lambda run_id: None  # the benchmark drives the run itself
        user = get_user_model().objects.create_user("bench")
        org = Organization.objects.create(name="Bench")
        Membership.objects.create(organization=org, user=user)
        turns = [{"tool_calls": [{"name": "noop", "arguments": {}}]}] * opts.calls + [{"content": "done"}]
        agent = Agent.objects.create(
            organization=org,
            owner=user,
            name="bench",
            max_iterations=opts.calls + 5,
            model_config_json={"provider": "scripted", "script": {"turns": turns}},
        )
        # As a worker process tunes its collector before it drives runs (fimone/celery.py): what
        # set-up built is frozen, young collections come every GC_THRESHOLD allocations.
        from django.conf import settings

        tune_for_server(settings.GC_THRESHOLD)
        per_call: list[float] = []
        db_per_call: list[float] = []
        loop_per_call: list[float] = []
        for _ in range(opts.runs + 1):  # the first run warms caches and is not counted
            timed["model"] = timed["tool"] = in_thread["seconds"] = on_loop["seconds"] = 0.0
            run = run_start(agent=agent, user=user, input="go")
            started = time.perf_counter()
            # Driven as deployed: on a loop that lives as long as the process (a Celery worker's
            # or the server's, agents.executors), whose connections outlive one run.
            status = executors.embedded.submit(
                lambda run_id=run.pk: runner.run_execute(
                    run_id, provider_factory=provider, tools_factory=lambda agent: {"noop": NoOp()}
                )
            ).result()
            total = time.perf_counter() - started
            assert status == RunStatus.COMPLETED, status
            assert ToolExecution.objects.filter(run=run).count() == opts.calls
            per_call.append((total - timed["model"] - timed["tool"]) / opts.calls)
            db_per_call.append(in_thread["seconds"] / opts.calls)
            loop_per_call.append(on_loop["seconds"] / opts.calls)
        per_call, db_per_call, loop_per_call = per_call[1:], db_per_call[1:], loop_per_call[1:]
        events = RunEvent.objects.filter(run=run).count()
        median = statistics.median(per_call) * 1000
        layer = settings.CHANNEL_LAYERS["default"]["BACKEND"].rsplit(".", 1)[-1]
        print(
            f"{opts.runs} runs x {opts.calls} tool calls on PostgreSQL ({events} events per run, "
            f"streamed through {layer})"
        )
        print(
            f"platform overhead per tool call: median {median:.2f} ms, "
            f"min {min(per_call) * 1000:.2f} ms, max {max(per_call) * 1000:.2f} ms (target <= 1.5 ms) "
            f"{'OK' if median <= 1.5 else 'OVER'}"
        )
        print(
            f"of which, per tool call (medians): step writes awaited on the loop "
            f"{statistics.median(loop_per_call) * 1000:.2f} ms, other database calls in the "
            f"database thread {statistics.median(db_per_call) * 1000:.2f} ms"
        )


if __name__ == "__main__":
    main()
