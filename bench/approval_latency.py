"""Time from an approval's commit to the approved tool's execution start.

(a) the run is waiting inline (woken through the Redis channel layer);
(b) the run was suspended and a Celery worker resumes it.
200 approvals each, on PostgreSQL + Redis. Targets: (a) p99 <= 50 ms, (b) p99 <= 100 ms.
The tool's start is the ``ToolExecution.started_at`` the engine writes just before calling it.

    DATABASE_URL=postgres://… REDIS_URL=redis://… python bench/approval_latency.py [--approvals 200]
"""

from __future__ import annotations

import argparse
import statistics
import time

from _django import bench_database, celery_worker, percentile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--approvals", type=int, default=200)
    opts = parser.parse_args()

    with bench_database(need_redis=True):
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.db import transaction

        from agents.models import Agent, Run, RunStatus, ToolExecution
        from agents.services import run_start
        from approvals.models import ApproverPolicy, ConfirmationRequest
        from approvals.services import confirmation_decide
        from fimone.celery import app
        from tenancy.models import Membership, Organization, Role

        User = get_user_model()
        user, approver = User.objects.create_user("requester"), User.objects.create_user("approver")
        org = Organization.objects.create(name="Bench")
        Membership.objects.create(organization=org, user=user)
        Membership.objects.create(organization=org, user=approver, role=Role.APPROVER)
        agent = Agent.objects.create(
            organization=org,
            owner=approver,
            name="bench",
            require_confirmation_for_all=True,
            builtin_tools=["calculator"],
            model_config_json={
                "provider": "scripted",
                "script": {
                    "turns": [
                        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}]},
                        {"content": "done"},
                    ]
                },
            },
        )
        policy = ApproverPolicy.objects.create(organization=org, inline_wait_seconds=30, timeout_seconds=600)

        def wait(predicate, timeout: float = 30.0, every: float = 0.002):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                found = predicate()
                if found:
                    return found
                time.sleep(every)
            raise SystemExit("timed out: the run did not get where expected")

        def approve(run: Run) -> float:
            """Approve the run's request; return the commit's wall-clock time."""
            request = wait(lambda: ConfirmationRequest.objects.filter(run=run).first())
            committed: list[float] = []
            with transaction.atomic():
                transaction.on_commit(lambda: committed.append(time.time()))
                assert confirmation_decide(request_id=request.pk, user=approver, approve=True).accepted
            return committed[0]

        def tool_start(run: Run) -> float:
            # The engine stamps the start itself; poll gently so this process (which also hosts
            # the inline-waiting engine in case a) does not compete with it for the interpreter.
            wait(lambda: Run.objects.filter(pk=run.pk, status=RunStatus.COMPLETED).exists(), every=0.05)
            return ToolExecution.objects.get(run=run).started_at.timestamp()

        results: dict[str, list[float]] = {}

        # (a) inline: runs execute in this process; the decision wakes the waiting gate.
        settings.RUN_EXECUTOR = "embedded"
        app.conf.task_always_eager = True
        latencies = []
        for _ in range(opts.approvals):
            run = run_start(agent=agent, user=user, input="go")
            wait(lambda run=run: ConfirmationRequest.objects.filter(run=run).exists())
            time.sleep(0.005)  # let the gate subscribe and start waiting
            decided = approve(run)
            latencies.append((tool_start(run) - decided) * 1000)
        results["(a) inline-waiting run"] = latencies

        # (b) suspended: a Celery worker runs and parks each run, then resumes it on the decision.
        policy.inline_wait_seconds = 0
        policy.save()
        settings.RUN_EXECUTOR = "celery"
        app.conf.task_always_eager = False
        latencies = []
        with celery_worker():
            for _ in range(opts.approvals):
                run = run_start(agent=agent, user=user, input="go")
                wait(
                    lambda run=run: Run.objects.filter(pk=run.pk, status=RunStatus.AWAITING_APPROVAL).exists()
                )
                decided = approve(run)
                latencies.append((tool_start(run) - decided) * 1000)
        results["(b) suspended run, Celery resume"] = latencies

        targets = {"(a) inline-waiting run": 50.0, "(b) suspended run, Celery resume": 100.0}
        print(f"{opts.approvals} approvals each; decision commit -> tool execution start")
        for label, values in results.items():
            p99 = percentile(values, 99)
            verdict = "OK" if p99 <= targets[label] else "OVER"
            print(
                f"{label:34} p50 {statistics.median(values):7.1f} ms   p99 {p99:7.1f} ms   "
                f"max {max(values):7.1f} ms   (target p99 <= {targets[label]:g} ms) {verdict}"
            )


if __name__ == "__main__":
    main()
