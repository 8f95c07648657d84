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
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.db import close_old_connections
from django.urls import reverse
from django_celery_beat.models import IntervalSchedule, PeriodicTask
from rest_framework.authtoken.models import Token

from agents.demo import demo_setup
from agents.engine.pipeline import UNKNOWN_OUTCOME
from agents.models import Agent, Run, RunEvent, RunStatus, ToolExecution
from approvals.models import ApproverPolicy, ConfirmationEvent, ConfirmationRequest, ConfirmationStatus
from channels_im.models import ImIdentity
from demo_payments.models import Purchase
from fimone.models import OutboxMessage
from tests.channels_im.feishu_fake import FakeFeishu, click_event, configure_channel, keys_of, signed_body
from tests.system.kit import Fleet, Process, fleet, free_port_run

User = get_user_model()
pytestmark = [pytest.mark.system, pytest.mark.postgres, pytest.mark.redis, pytest.mark.timeout(300)]

RUNS = 100  # half of them pay
PAYING = RUNS // 2
HELD_BACK = 2  # runs started just before each fault that needs a model call in flight
LEASE_SECONDS = 5  # how long a dead worker's run waits for another one
APPROVAL_TIMEOUT = 100  # seconds: the requests left alone expire while the test watches
MODEL_DELAY = 1.5  # seconds a model call takes: long enough to kill a worker inside one
PAYMENT_ANSWER_DELAY = 2.0  # seconds the payments service takes to answer a payment it made
APRIL = "ou_april0000000000000000000000001"
PAY = "oa__purchase_pay"
Kind = ConfirmationEvent.Kind
# Each paying run's fate: (verdict, channel). "expire": nobody answers.
PLANS = [
    ("approve", "feishu"),
    ("approve", "inbox"),
    ("reject", "feishu"),
    ("reject", "inbox"),
    ("expire", ""),
]


@dataclass
class Plan:
    purchase_id: str
    verdict: str
    channel: str
    late: bool  # decided after the whole topology was killed and restarted
    posted: bool = False
    held: bool = False  # kept for the fault that needs a payment in flight
    answer: str = ""  # what the server said to the decision


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
    tokens = {
        name: Token.objects.create(user=User.objects.get(username=name)).key for name in ("alice", "april")
    }
    return agent, tokens, plans, channel


# --- talking to the servers ---------------------------------------------------------------------


def post_anywhere(prod: Fleet, first: int, path: str, **kwargs: Any) -> httpx.Response | None:
    """POST to server ``first``, or to the other one if it is down (as a load balancer would).
    ``None``: no server answered."""
    for index in (first % 2, (first + 1) % 2):
        try:
            return httpx.post(prod.url(index, path), timeout=10, **kwargs)
        except httpx.TransportError:
            continue
    return None


def decide(
    prod: Fleet, request: ConfirmationRequest, plan: Plan, channel: Any, tokens: dict[str, str]
) -> bool:
    """Post the plan's verdict for ``request`` (a signed Feishu click, or the inbox decision API).
    ``True`` once a server took it (whatever it answered: a verdict is final)."""
    server = int(request.pk.int % 2)
    if plan.channel == "feishu":
        keys = keys_of(channel)
        event = click_event(
            keys,
            request_id=str(request.pk),
            decision=plan.verdict,
            open_id=APRIL,
            message_id=request.external_message_id,
            form_value={"reason": "not this month"} if plan.verdict == "reject" else None,
        )
        body, headers = signed_body(event, encrypt_key=keys.encrypt_key)
        path = reverse("im-callback", args=[channel.callback_key])
        answer = post_anywhere(
            prod, server, path, content=body, headers={**headers, "Content-Type": "application/json"}
        )
    else:
        answer = post_anywhere(
            prod,
            server,
            f"/api/approvals/{request.pk}/decision/",
            json={"decision": plan.verdict, "reason": "not this month"},
            headers={"Authorization": f"Token {tokens['april']}"},
        )
    if answer is None or answer.status_code >= 500:
        return False
    assert answer.status_code in (200, 409), f"{plan}: {answer.status_code} {answer.text}"
    plan.answer = f"{answer.status_code} {answer.text[:300]}"
    return True


# --- the drill ----------------------------------------------------------------------------------


class Drill:
    """Runs the faults while deciding approvals as they come (``tick``), polling with deadlines."""

    def __init__(self, prod: Fleet, plans: dict[str, Plan], channel: Any, tokens: dict[str, str]) -> None:
        self.prod = prod
        self.plans = plans
        self.channel = channel
        self.tokens = tokens
        self.late = False
        self.late_budget: int | None = None  # how many late decisions may go out (None: all)
        self.run_plans: dict[int, Plan] = {}
        self.faults: list[str] = []
        self.cut_off: ToolExecution | None = None  # the payment whose worker was killed mid-call
        self.waited_for_relay = 0  # follow-ups that were in the outbox while the relay was dead
        self.began = time.monotonic()

    def start_runs(self, agent: Agent, inputs: list[str]) -> list[int]:
        """Start a run per input at once, spread over both servers; their ids."""

        def start(numbered: tuple[int, str]) -> tuple[str, int]:
            number, text = numbered
            answer = post_anywhere(
                self.prod,
                number,
                f"/api/agents/{agent.pk}/runs/",
                json={"input": text},
                headers={"Authorization": f"Token {self.tokens['alice']}"},
            )
            assert answer is not None and answer.status_code == 201, answer and answer.text
            return text, answer.json()["id"]

        with ThreadPoolExecutor(8) as pool:
            started = list(pool.map(start, enumerate(inputs)))
        for text, run_id in started:
            if text.startswith("pay "):
                self.run_plans[run_id] = self.plans[text.removeprefix("pay ")]
        return [run_id for _, run_id in started]

    def fault(self, what: str) -> None:
        self.faults.append(f"{time.monotonic() - self.began:5.1f} s: {what}")

    def tick(self) -> None:
        """Decide every pending request whose turn has come (late ones once ``late`` is set)."""
        close_old_connections()
        pending = ConfirmationRequest.objects.filter(
            run_id__in=list(self.run_plans), status=ConfirmationStatus.PENDING
        )
        for request in pending:
            plan = self.run_plans[request.run_id]
            if plan.posted or plan.held or plan.verdict == "expire" or (plan.late and not self.late):
                continue
            if plan.late and self.late_budget is not None and self.late_budget <= 0:
                continue
            if plan.channel == "feishu" and not request.external_message_id:
                continue  # the card is not in the chat yet: nothing to click
            plan.posted = decide(self.prod, request, plan, self.channel, self.tokens)
            if plan.posted and plan.late and self.late_budget is not None:
                self.late_budget -= 1

    def until(self, what: str, check: Callable[[], Any], timeout: float, *, deciding: bool = True) -> Any:
        """Poll ``check`` until it returns something true, deciding approvals meanwhile unless
        ``deciding`` is false (a hunt for a short window must not be slowed by them)."""
        deadline = time.monotonic() + timeout
        while True:
            if deciding:
                self.tick()
            else:
                close_old_connections()
            found = check()
            if found:
                return found
            if time.monotonic() > deadline:
                unsettled = list(
                    Run.objects.exclude(
                        status__in=[RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED]
                    )
                    .values_list("pk", "status", "lease_owner")
                    .order_by("pk")
                )
                pending = ConfirmationRequest.objects.filter(status=ConfirmationStatus.PENDING).count()
                pytest.fail(
                    f"gave up waiting for {what} after {timeout:.0f} s; runs not ended: {unsettled}; "
                    f"{pending} approvals pending; faults so far: {self.faults}\n{self.prod.log()}"
                )
            time.sleep(0.05)

    def holder(self, run: Run) -> Process | None:
        """The worker process whose pool drives ``run`` now (its lease names the pid)."""
        if run.status != RunStatus.RUNNING or not run.lease_owner:
            return None
        worker = self.prod.holding(int(run.lease_owner.split(":")[1]))
        return worker if worker is not None and worker.name.startswith("worker.") else None

    def payment_in_flight(self, run_id: int) -> tuple[ToolExecution, Process] | None:
        execution = ToolExecution.objects.filter(
            run_id=run_id, tool_name=PAY, status=ToolExecution.Status.STARTED
        ).first()
        if execution is None:
            return None
        worker = self.holder(Run.objects.get(pk=run_id))
        return (execution, worker) if worker is not None else None

    def payment_done(self, run_id: int) -> str | None:
        done = ToolExecution.objects.filter(run_id=run_id, tool_name=PAY).exclude(
            status=ToolExecution.Status.STARTED
        )
        return "done" if done.exists() else None

    def model_call_in_flight(self) -> tuple[Run, Process] | None:
        """A run held by a live worker with no tool running: it waits for its (slow) model."""
        busy = set(
            ToolExecution.objects.filter(status=ToolExecution.Status.STARTED).values_list("run_id", flat=True)
        )
        for run in Run.objects.filter(status=RunStatus.RUNNING).exclude(pk__in=busy):
            last = RunEvent.objects.filter(run=run).order_by("-seq").values_list("type", flat=True).first()
            worker = self.holder(run)
            if worker is not None and last in ("run.started", "run.resumed", "tool.finished"):
                return run, worker
        return None

    def kill_worker_mid_payment(self) -> None:
        """``kill -9`` a worker while a payment it started waits for its answer; restart it.
        The approvals held back for this are given one by one until one is caught in flight."""
        for run_id, plan in self.run_plans.items():
            if not plan.held:
                continue
            request = self.until(
                f"the card of {plan.purchase_id}",
                lambda run_id=run_id: (
                    ConfirmationRequest.objects.filter(run_id=run_id).exclude(external_message_id="").first()
                ),
                60,
            )
            plan.held = False
            # Posted beside the hunt: a busy server may answer the click after the payment began.
            with ThreadPoolExecutor(1) as pool:
                posting = pool.submit(decide, self.prod, request, plan, self.channel, self.tokens)
                found = self.until(
                    f"the payment of {plan.purchase_id}",
                    lambda run_id=run_id: self.payment_in_flight(run_id) or self.payment_done(run_id),
                    60,
                    deciding=False,
                )
                if found == "done":  # the window closed before it was seen: try the next one
                    plan.posted = posting.result()
                    continue
                execution, worker = found
                worker.kill()
                plan.posted = posting.result()
            execution.refresh_from_db()
            worker.start()
            if execution.status == ToolExecution.Status.STARTED:
                self.cut_off = execution
                self.fault(f"kill -9 {worker.name} during payment {plan.purchase_id}")
                for other in self.run_plans.values():
                    other.held = False  # the other approvals go out as they come
                return
        pytest.fail("never caught a worker in the middle of a payment")

    def kill_worker_mid_model_call(self) -> None:
        run, worker = self.until("a model call in flight", self.model_call_in_flight, 60, deciding=False)
        worker.kill()
        worker.start()
        self.fault(f"kill -9 {worker.name} during a model call of run {run.pk}")

    def pause_worker_past_its_lease(self) -> None:
        """SIGSTOP a worker inside a model call until another worker took its run over, then let
        it go on: it must notice it lost the lease and write nothing more."""
        run, worker = self.until("a model call to pause", self.model_call_in_flight, 60, deciding=False)
        owner = run.lease_owner
        worker.signal(signal.SIGSTOP)
        try:
            self.until(
                f"run {run.pk} to be taken over from the paused {worker.name}",
                lambda: Run.objects.filter(pk=run.pk).exclude(lease_owner=owner).exists(),
                LEASE_SECONDS * 24,  # its resume queues behind the other runs (30 s seen) for a free worker
            )
        finally:
            worker.signal(signal.SIGCONT)
        self.fault(f"SIGSTOP {worker.name} past its lease during run {run.pk}, then SIGCONT")
        # Awake again, its model call answers and its next write is refused: it stops there.
        noticed = f"run {run.pk}: lease lost to another worker; stopping here"
        self.until(
            f"the paused {worker.name} to notice it lost run {run.pk}",
            lambda: noticed in worker.log_path.read_text(errors="replace"),
            LEASE_SECONDS * 4,
        )

    def kill_a_server(self) -> None:
        web = self.prod.webs[0]
        web.kill()
        self.fault(f"kill -9 {web.name}")
        back_at = time.monotonic() + 3
        self.until("a few decisions while a server is down", lambda: time.monotonic() >= back_at, 10)
        web.start()
        self.prod.wait_ready()

    def kill_the_relay(self) -> None:
        """``kill -9`` the outbox relay while clicks arrive: the verdicts' follow-ups wait in the
        outbox (their runs stay parked) until a relay is back."""
        relay = self.prod.relay
        relay.kill()
        self.fault(f"kill -9 {relay.name}")

        def clicked() -> bool:  # a late Feishu verdict now, so that one waits
            for request in ConfirmationRequest.objects.filter(
                run_id__in=list(self.run_plans), status=ConfirmationStatus.PENDING
            ).exclude(external_message_id=""):
                plan = self.run_plans[request.run_id]
                if plan.late and plan.channel == "feishu" and plan.verdict != "expire" and not plan.posted:
                    plan.posted = decide(self.prod, request, plan, self.channel, self.tokens)
                    return plan.posted
            return False

        self.until("a late card click", clicked, 30, deciding=False)
        self.until("its follow-up waiting for the relay", OutboxMessage.objects.exists, 10, deciding=False)
        self.waited_for_relay = OutboxMessage.objects.count()
        self.fault(f"{self.waited_for_relay} verdict follow-ups wait in the outbox")

    def kill_everything(self) -> None:
        pending = ConfirmationRequest.objects.filter(status=ConfirmationStatus.PENDING).count()
        self.prod.kill_all()
        self.fault(f"kill -9 of all {len(self.prod.processes)} processes with {pending} approvals pending")
        self.prod.start_all()


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
