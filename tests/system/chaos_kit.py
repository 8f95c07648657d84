"""The chaos drill's machinery (tests/system/test_chaos_under_faults.py): each paying run's plan,
posting to whichever server is up, and the :class:`Drill` that runs the faults while it decides
the approvals as they come."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from django.db import close_old_connections
from django.urls import reverse

from agents.models import Agent, Run, RunEvent, RunStatus, ToolExecution
from approvals.models import ConfirmationRequest, ConfirmationStatus
from fimone.models import OutboxMessage
from tests.channels_im.feishu_fake import click_event, keys_of, signed_body
from tests.system.kit import Fleet, Process

LEASE_SECONDS = 5  # how long a dead worker's run waits for another one
APRIL = "ou_april0000000000000000000000001"
PAY = "oa__purchase_pay"


@dataclass
class Plan:
    purchase_id: str
    verdict: str
    channel: str
    late: bool  # decided after the whole topology was killed and restarted
    posted: bool = False
    held: bool = False  # kept for the fault that needs a payment in flight
    answer: str = ""  # what the server said to the decision


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
