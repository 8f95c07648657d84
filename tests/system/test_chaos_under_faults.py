"""The production topology under faults (Jepsen-style): two Daphne servers, two Celery workers, a
beat and the outbox relay, as real processes on PostgreSQL + Redis, carry concurrent runs of the
demo agent while processes are killed, paused and restarted under them; then the record is
checked.

Half of the runs ask to pay a purchase of the demo payments service (a gated call); their
approvals are decided by signed Feishu callbacks spread over both servers and in the inbox
(approved or rejected), or left to expire. While they go on: ``kill -9`` of a worker in the
middle of a payment, of a worker in the middle of a model call, a worker paused past its lease
(it wakes up after another took its run over), ``kill -9`` of one server, of the outbox relay
while verdicts arrive (their follow-ups wait for it), and then of every process at once while
approvals are pending; then everything restarts.

Afterwards: every run ended; every payment whose call succeeded was made, exactly once, and none
that was rejected or expired; every request has exactly one verdict; every run's event seqs run
1..n; a payment whose outcome was lost is reported "outcome unknown" and was never run again;
nothing is left pending, in the outbox neither. The tally is printed.
"""

from __future__ import annotations

import collections
import json
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django_celery_beat.models import IntervalSchedule, PeriodicTask
from rest_framework.authtoken.models import Token

from agents.demo import demo_setup
from agents.engine.pipeline import UNKNOWN_OUTCOME
from agents.models import Agent, Run, RunEvent, RunStatus, ToolExecution
from approvals.models import ApproverPolicy, ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from channels_im.models import ImIdentity
from demo_payments.models import Purchase
from fimone.models import OutboxMessage
from tests.channels_im.feishu_fake import FakeFeishu, configure_channel
from tests.system.chaos_kit import APRIL, LEASE_SECONDS, PAY, Drill, Plan
from tests.system.kit import fleet, free_port_run

User = get_user_model()
pytestmark = [pytest.mark.system, pytest.mark.postgres, pytest.mark.redis, pytest.mark.timeout(300)]

RUNS = 100  # half of them pay
PAYING = RUNS // 2
HELD_BACK = 2  # runs started just before each fault that needs a model call in flight
APPROVAL_TIMEOUT = 100  # seconds: the requests left alone expire while the test watches
MODEL_DELAY = 1.5  # seconds a model call takes: long enough to kill a worker inside one
PAYMENT_ANSWER_DELAY = 2.0  # seconds the payments service takes to answer a payment it made
Kind = ConfirmationEvent.Kind
# Each paying run's fate: (verdict, channel). "expire": nobody answers.
PLANS = [
    ("approve", "feishu"),
    ("approve", "inbox"),
    ("reject", "feishu"),
    ("reject", "inbox"),
    ("expire", ""),
]


# --- the world ----------------------------------------------------------------------------------


def chaos_script() -> dict[str, Any]:
    """The demo agent's scripted model for the drill: "pay PO-Cnnn" pays that purchase (one rule
    per purchase, the model being a script); anything else lists the purchases. Model calls are
    slow (``MODEL_DELAY``) where a worker is to be killed or paused inside one."""
    rules: list[dict[str, Any]] = [
        {
            "match": rf"^pay {purchase.id}$",
            "turns": [
                {
                    "content": f"Paying {purchase.id}.",
                    "tool_calls": [
                        {
                            "name": PAY,
                            "arguments": {"purchase_id": purchase.id, "amount": float(purchase.amount)},
                        }
                    ],
                },
                {"content": "Payment result: {last}", "delay": MODEL_DELAY},
            ],
        }
        for purchase in Purchase.objects.filter(id__startswith="PO-C")
    ]
    rules.append(
        {
            "turns": [
                {
                    "tool_calls": [{"name": "oa__purchase_list", "arguments": {"status": "paid"}}],
                    "delay": MODEL_DELAY,
                },
                {"content": "Here are the paid purchases: {last}", "delay": MODEL_DELAY},
            ]
        }
    )
    return {"rules": rules}


def set_the_stage(
    web_ports: list[int], fake: FakeFeishu
) -> tuple[Agent, dict[str, str], dict[str, Plan], Any]:
    """The demo organisation, its purchases and agent (its connector on the second server), a
    Feishu approval channel where April is ``APRIL``, a short approval timeout, and a beat sweep
    every second. Returns the agent, API tokens and the plans by purchase id."""
    demo = demo_setup(base_url=f"http://127.0.0.1:{web_ports[1]}")
    agent = Agent.objects.get(pk=demo["agent"]["id"])
    plans: dict[str, Plan] = {}
    for index in range(PAYING):
        purchase_id = f"PO-C{index:03d}"
        Purchase.objects.create(id=purchase_id, vendor=f"Vendor {index}", amount=Decimal(100 + index))
        verdict, channel = PLANS[index % len(PLANS)]
        late = (index // len(PLANS)) % 2 == 1
        held = verdict == "approve" and not late
        plans[purchase_id] = Plan(purchase_id, verdict, channel, late=late, held=held)
    agent.model_config_json = {"provider": "scripted", "script": chaos_script()}
    agent.save()
    org = agent.organization
    april = User.objects.get(username="april")
    ImIdentity.objects.create(organization=org, user=april, provider="feishu", external_id=APRIL)
    channel = configure_channel(org, fake=fake)
    ApproverPolicy.objects.update_or_create(
        organization=org,
        agent=None,
        defaults={"inline_wait_seconds": 0, "timeout_seconds": APPROVAL_TIMEOUT},
    )
    every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.update_or_create(
        name="Approval sweep (expiry, lost wake-ups, orphaned runs)",
        defaults={
            "task": "approvals.tasks.confirmations_sweep_task",
            "interval": every_second,
            "enabled": True,
        },
    )
    # The demo gives alice a token already (its MCP gateway's): use the one each person has.
    tokens = {
        name: Token.objects.get_or_create(user=User.objects.get(username=name))[0].key
        for name in ("alice", "april")
    }
    return agent, tokens, plans, channel


# --- the test -----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)  # the processes read what the test commits
def test_runs_survive_killed_and_paused_processes_with_every_payment_made_at_most_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = free_port_run(2)
    web_ports = [base, base + 1]
    with FakeFeishu() as fake:
        agent, tokens, plans, channel = set_the_stage(web_ports, fake)
        env = {
            "RUN_LEASE_SECONDS": str(LEASE_SECONDS),
            "CELERY_CONCURRENCY": "4",
            "DEMO_PAYMENTS_ANSWER_DELAY_SECONDS": str(PAYMENT_ANSWER_DELAY),
            "RUN_START_RATE": "1000/min",
            "DECISION_RATE": "1000/min",
        }
        with fleet(web=2, workers=2, ports=web_ports, env=env) as prod:
            drill = Drill(prod, plans, channel, tokens)
            inputs = [f"pay {purchase_id}" for purchase_id in plans] + [
                "what was paid?" for _ in range(RUNS - PAYING - 2 * HELD_BACK)
            ]
            run_ids = drill.start_runs(agent, inputs)

            drill.kill_worker_mid_payment()
            # Runs started now are in their (slow) model calls when the worker dies or pauses.
            run_ids += drill.start_runs(agent, ["what was paid?"] * HELD_BACK)
            drill.kill_worker_mid_model_call()
            run_ids += drill.start_runs(agent, ["what was paid?"] * HELD_BACK)
            drill.pause_worker_past_its_lease()
            drill.kill_a_server()
            # Every paying run has asked (or ended): the late decisions start, and the whole
            # topology dies under them while approvals are pending.
            drill.until(
                "every paying run to ask for its approval",
                lambda: (
                    ConfirmationRequest.objects.filter(run_id__in=list(drill.run_plans)).count() == PAYING
                ),
                90,
            )
            drill.late, drill.late_budget = True, 3
            drill.fault("the late decisions start")
            drill.kill_the_relay()  # restarted with everything else, below
            drill.until("a late decision", lambda: any(p.posted for p in plans.values() if p.late), 30)
            drill.kill_everything()
            drill.late_budget = None  # the other late decisions arrive once the topology is back

            def settled() -> bool:
                return (
                    not Run.objects.filter(pk__in=run_ids)
                    .exclude(status__in=[RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED])
                    .exists()
                    and not ConfirmationRequest.objects.filter(status=ConfirmationStatus.PENDING).exists()
                    and not OutboxMessage.objects.exists()
                )

            drill.until("every run to end and every approval to be settled", settled, APPROVAL_TIMEOUT + 90)
            drill.fault("every run ended, nothing pending")
            log = prod.log()

    report = check_the_record(run_ids, drill, log)
    with capsys.disabled():  # in every run's output, CI's included, not only with -s
        print("\nchaos tally:", json.dumps(report, indent=1))


def _as_json(text: str) -> str:
    try:
        return json.dumps(json.loads(text), sort_keys=True)
    except ValueError:
        return text


def check_the_record(run_ids: list[int], drill: Drill, log: str) -> dict[str, Any]:
    """The invariants, checked on what the database recorded. Returns the tally."""
    runs = {run.pk: run for run in Run.objects.filter(pk__in=run_ids)}
    failed = {pk: run.error for pk, run in runs.items() if run.status != RunStatus.COMPLETED}
    assert not failed, f"runs that did not complete: {failed}\n{log}"

    # Every run's events are numbered 1..n, without a gap or a duplicate.
    for run_id in run_ids:
        seqs = list(RunEvent.objects.filter(run_id=run_id).order_by("seq").values_list("seq", flat=True))
        assert seqs == list(range(1, len(seqs) + 1)), f"run {run_id}: seqs {seqs}"

    # No tool call started twice. A call whose outcome was recorded but not yet read by the model
    # when its worker stopped is replayed from the record: the same outcome again, never a new run.
    events = collections.defaultdict(list)
    for run_id, type_, payload in RunEvent.objects.filter(
        run_id__in=run_ids, type__in=["tool.started", "tool.finished"]
    ).values_list("run_id", "type", "payload"):
        events[(run_id, payload["tool_call_id"])].append((type_, payload))
    replayed = 0
    for (run_id, call_id), seen in events.items():
        kinds = [kind for kind, _ in seen]
        assert kinds.count("tool.started") == 1 and kinds.count("tool.finished") >= 1, (
            f"run {run_id} call {call_id}: {kinds}"
        )
        # Compared as JSON: the stored result comes back from PostgreSQL's jsonb with its keys
        # in another order, so a replayed observation may list them differently.
        outcomes = {(p["status"], _as_json(p["observation"])) for kind, p in seen if kind == "tool.finished"}
        assert len(outcomes) == 1, f"run {run_id} call {call_id} has different outcomes: {outcomes}"
        assert "already_paid" not in str(outcomes), f"run {run_id} call {call_id} paid again: {outcomes}"
        replayed += kinds.count("tool.finished") - 1

    tally: collections.Counter[str] = collections.Counter()
    for run_id, plan in drill.run_plans.items():
        [request] = ConfirmationRequest.objects.filter(run_id=run_id)
        verdicts = request.events.filter(kind__in=[Kind.DECIDED, Kind.EXPIRED, Kind.CANCELLED]).count()
        assert verdicts == 1, f"{plan}: {verdicts} verdicts"
        purchase = Purchase.objects.get(pk=plan.purchase_id)
        executions = list(ToolExecution.objects.filter(run_id=run_id, tool_name=PAY))
        if request.status == ConfirmationStatus.APPROVED:
            [execution] = executions
            if execution.status == ToolExecution.Status.SUCCEEDED:
                assert purchase.status == Purchase.Status.PAID
                assert execution.result["paid_reference"] == purchase.paid_reference
            else:
                # The payment's outcome was lost (or its answer): it may have been made, once.
                assert execution.status in (ToolExecution.Status.UNKNOWN, ToolExecution.Status.FAILED)
                if execution.status == ToolExecution.Status.UNKNOWN:
                    told = {
                        p["observation"]
                        for kind, p in events[(run_id, execution.tool_call_id)]
                        if kind == "tool.finished"
                    }
                    assert told == {UNKNOWN_OUTCOME}, told
            tally[f"approved, payment {execution.status}, purchase {purchase.status}"] += 1
        else:
            assert request.status in (ConfirmationStatus.REJECTED, ConfirmationStatus.EXPIRED), request.status
            assert executions == [] and purchase.status == Purchase.Status.PENDING, plan
            tally[f"{request.status}"] += 1
        if plan.verdict == "expire":
            assert request.status == ConfirmationStatus.EXPIRED, plan
        elif request.status == ConfirmationStatus.EXPIRED:
            print(
                "planned", plan, "but expired; events:", list(request.events.values_list("kind", "details"))
            )
    # The payment cut off by the kill: whether it was made is not known, so it must be reported
    # "outcome unknown" — never run again, whether the second run would pay or fail.
    assert drill.cut_off is not None
    drill.cut_off.refresh_from_db()
    assert drill.cut_off.status == ToolExecution.Status.UNKNOWN, (
        f"the payment cut off mid-call ended {drill.cut_off.status}: it was run again"
    )
    left_started = list(
        ToolExecution.objects.filter(run_id__in=run_ids, status=ToolExecution.Status.STARTED).values_list(
            "run_id", "tool_call_id"
        )
    )
    assert not left_started, f"tool calls left 'started' with no outcome reported: {left_started}"
    unknown = ToolExecution.objects.filter(run_id__in=run_ids, status=ToolExecution.Status.UNKNOWN).count()
    return {
        "runs": len(run_ids),
        "paying runs": len(drill.run_plans),
        "faults": drill.faults,
        "payments by outcome": dict(sorted(tally.items())),
        "tool calls reported outcome unknown": unknown,
        "recorded outcomes replayed after a worker stopped": replayed,
        "verdict follow-ups that waited in the outbox for the relay": drill.waited_for_relay,
        "purchases paid": Purchase.objects.filter(id__startswith="PO-C", status=Purchase.Status.PAID).count(),
    }
