"""The ``budget`` hook (issue 26, item 6): the sum of a call's ``amount`` per user, agent or
organisation over a day, week or month, counted exactly across threads and processes, on Redis
or in the database; a call past the budget is blocked, or asked of a person; a call that was
blocked later, rejected or failed gives its amount back; a re-entered call counts once; an eval
measures and never counts."""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from agents.budget import period
from agents.models import RunStatus, ToolExecution
from agents.services import run_start
from agents.tools.base import ToolError
from approvals.models import ConfirmationRequest
from approvals.services import confirmation_decide
from fimone import budgets
from hooks import HookContext, HookRegistry
from hooks.catalog import build_hooks, hook_catalog
from tests.agents.engine_kit import Harness, RecordingTool
from tests.approvals.kit import PAY_SCHEMA, set_policy
from tests.approvals.stage_kit import paying
from tests.personas import make_hook

pytestmark = pytest.mark.django_db(transaction=True)


def budget(limit: float = 1000, **params: Any) -> HookRegistry:
    return HookRegistry(build_hooks([{"name": "budget", "params": {"limit": limit, **params}}]))


def unique_org() -> int:
    """Counters outlive a test in Redis: every test counts for an organisation of its own."""
    return random.randrange(10**9, 10**10)


# A payment tool whose amount is a number or a text (as many services take money).
TEXT_OR_NUMBER_SCHEMA = {
    "type": "object",
    "properties": {"purchase_id": {"type": "string"}, "amount": {"type": ["number", "string"]}},
    "required": ["purchase_id"],
}
MISSING: Any = object()


def call(
    org: int, amount: Any, *, user: int = 7, call_id: str | None = None, path: str = "api"
) -> HookContext:
    args = {"purchase_id": "PO-1"} if amount is MISSING else {"purchase_id": "PO-1", "amount": amount}
    return HookContext(
        tool_name="oa__purchase_pay",
        tool_args=args,
        tool_schema=TEXT_OR_NUMBER_SCHEMA,
        user_id=user,
        agent_id=3,
        metadata={
            "org_id": org,
            "run_id": 1,
            "tool_call_id": call_id or f"c{random.randrange(10**12)}",
            "execution_path": path,
        },
    )


@pytest.fixture(params=["database", pytest.param("redis", marks=pytest.mark.redis)])
def backend(request: pytest.FixtureRequest, settings: Any) -> str:
    if request.param == "database":
        settings.REDIS_URL = None
    return request.param


async def test_it_allows_calls_within_the_budget_and_blocks_the_one_past_it_saying_why(backend) -> None:
    registry, org = budget(1000), unique_org()

    first = await registry.run_pre_tool_use(call(org, 600))
    second = await registry.run_pre_tool_use(call(org, "400.00"))
    third = await registry.run_pre_tool_use(call(org, 0.01))

    assert first.allow and second.allow and not third.allow
    assert third.blocked_by == "budget"
    assert third.error == (
        "Budget exceeded: 0.01 would bring what this user spent this month to 1,000.01, over the "
        "budget of 1,000.00. The call was not executed."
    )


async def test_each_user_has_their_own_budget_and_a_per_organisation_one_is_shared(backend) -> None:
    org = unique_org()
    per_user, shared = budget(100), budget(100, per="organisation")

    assert (await per_user.run_pre_tool_use(call(org, 100, user=1))).allow
    assert (await per_user.run_pre_tool_use(call(org, 100, user=2))).allow
    assert (await shared.run_pre_tool_use(call(org, 100, user=1))).allow
    assert not (await shared.run_pre_tool_use(call(org, 1, user=2))).allow


async def test_a_re_entered_call_counts_once(backend) -> None:
    registry, org = budget(100), unique_org()

    for _ in range(3):
        assert (await registry.run_pre_tool_use(call(org, 60, call_id="same"))).allow

    assert not (await registry.run_pre_tool_use(call(org, 60))).allow


async def test_a_call_blocked_after_it_was_counted_gives_its_amount_back(backend) -> None:
    org = unique_org()
    later = hook_catalog()["deny_tools"](tools=["oa__purchase_pay"], priority=890)  # after the budget
    chain = HookRegistry([*build_hooks([{"name": "budget", "params": {"limit": 100}}]), later])

    blocked = await chain.run_pre_tool_use(call(org, 100))

    assert not blocked.allow and blocked.blocked_by == "deny_tools"
    assert (await budget(100).run_pre_tool_use(call(org, 100))).allow, "the amount came back"


async def test_over_the_budget_with_ask_a_person_decides(backend) -> None:
    registry, org = budget(100, over="ask"), unique_org()

    within = await registry.run_pre_tool_use(call(org, 100))
    over = await registry.run_pre_tool_use(call(org, 50))
    said = await build_hooks([{"name": "budget", "params": {"limit": 100, "over": "ask"}}])[0].execute(
        call(org, 25)
    )

    assert within.allow and not within.requires_confirmation
    assert over.allow and over.requires_confirmation and over.confirmation_requested_by == ["budget"]
    assert said.confirmation_reason == (
        "over budget: 25.00 would bring what this user spent this month to 175.00, over the budget of 100.00"
    ), "an asked call counts (it is spent once approved)"


async def test_an_eval_measures_the_budget_and_never_counts(backend) -> None:
    registry, org = budget(100), unique_org()

    for _ in range(3):
        assert (await registry.run_pre_tool_use(call(org, 100, path="eval"))).allow
    assert not (await registry.run_pre_tool_use(call(org, 101, path="eval"))).allow
    assert (await registry.run_pre_tool_use(call(org, 100))).allow, "nothing was counted by the eval"


@pytest.mark.parametrize(
    "amount", [True, "lots", -5, float("nan"), None, "25,000.00", "25000 USD", " 50", "5e1", "1_000"]
)
async def test_an_amount_that_is_not_a_positive_number_is_refused(backend, amount) -> None:
    out = await budget(100).run_pre_tool_use(call(unique_org(), amount, path="api"))

    assert not out.allow and "which is not a positive number, so it cannot be counted" in out.error


async def test_an_amount_that_cannot_be_counted_is_refused_even_where_the_budget_asks(backend) -> None:
    out = await budget(100, over="ask").run_pre_tool_use(call(unique_org(), "25,000.00"))

    assert not out.allow and not out.requires_confirmation
    assert out.error.startswith('Budget: amount is "25,000.00", which is not a positive number')


async def test_a_declared_amount_left_out_is_refused_and_one_the_tool_lacks_is_not_counted(backend) -> None:
    org = unique_org()
    left_out = await budget(100).run_pre_tool_use(call(org, MISSING))
    other_tool = HookContext(
        tool_name="oa__purchases_list",
        tool_args={},
        tool_schema={"type": "object", "properties": {"status": {"type": "string"}}},
        user_id=7,
        metadata={"org_id": org, "run_id": 1, "tool_call_id": "c1", "execution_path": "api"},
    )

    assert not left_out.allow and "amount is not given" in left_out.error
    assert (await budget(100).run_pre_tool_use(other_tool)).allow


async def test_a_text_counts_only_where_the_tools_schema_says_the_field_is_a_number(backend) -> None:
    org = unique_org()
    unknown_schema = call(org, "400.00")
    unknown_schema.tool_schema = None

    assert (await budget(1000).run_pre_tool_use(call(org, "400.00"))).allow
    assert not (await budget(1000).run_pre_tool_use(unknown_schema)).allow


def test_exactly_the_budget_of_concurrent_calls_from_threads_passes(backend) -> None:
    """Threads with event loops of their own, as runs in embedded mode and Celery workers have:
    50 calls of 1.10 against a budget of 11.00 — exactly ten pass."""
    registry, org = budget(11), unique_org()
    start = threading.Barrier(5)

    def worker() -> list[bool]:
        start.wait()

        async def ten() -> list[bool]:
            return [(await registry.run_pre_tool_use(call(org, "1.10"))).allow for _ in range(10)]

        return asyncio.run(ten())

    with ThreadPoolExecutor(5) as pool:
        results = [flag for chunk in pool.map(lambda _: worker(), range(5)) for flag in chunk]

    assert len(results) == 50 and sum(results) == 10


@pytest.mark.redis
async def test_exactly_the_budget_of_concurrent_calls_on_one_loop_passes() -> None:
    registry, org = budget(1000), unique_org()

    outcomes = await asyncio.gather(*(registry.run_pre_tool_use(call(org, 100)) for _ in range(50)))

    assert sum(out.allow for out in outcomes) == 10


def test_periods_are_calendar_days_weeks_and_months() -> None:
    moment = dt.datetime(2026, 12, 31, 15, 0, tzinfo=dt.UTC)
    with timezone.override("UTC"):
        assert period("day", moment) == (dt.date(2026, 12, 31), dt.datetime(2027, 1, 1, tzinfo=dt.UTC))
        assert period("week", moment)[0] == dt.date(2026, 12, 28)
        assert period("month", moment) == (dt.date(2026, 12, 1), dt.datetime(2027, 1, 1, tzinfo=dt.UTC))


async def test_a_counter_that_cannot_be_reached_blocks_the_call(settings) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:9/0"

    out = await budget(100).run_pre_tool_use(call(unique_org(), 1))

    assert not out.allow and out.blocked_by == "budget"


def test_units_are_exact() -> None:
    assert budgets.units("0.1") + budgets.units("0.2") == budgets.units("0.3")
    assert budgets.as_amount(budgets.units("1234.56")) == Decimal("1234.56")


# --- through runs: a rejection and a failure give the amount back ------------------------------------


def test_a_rejected_call_gives_its_amount_back_and_an_approved_one_keeps_it(
    backend, personas, resumes
) -> None:
    set_policy(personas)
    make_hook(personas.org, "budget", params={"limit": 1000, "per": "organisation"})
    tool = RecordingTool(
        "oa__purchase_pay", result={"status": "paid"}, parameters=PAY_SCHEMA, requires_confirmation=True
    )
    harness = Harness(tool)
    agent = paying(personas, 800)

    first = run_start(agent=agent, user=personas.member, input="pay")
    assert harness.execute(first) == RunStatus.AWAITING_APPROVAL
    request = ConfirmationRequest.objects.get(run=first)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=False, reason="no")
    assert harness.resume(first) == RunStatus.COMPLETED

    second = run_start(agent=agent, user=personas.member, input="pay")
    assert harness.execute(second) == RunStatus.AWAITING_APPROVAL, "the rejected 800 came back"
    confirmation_decide(
        request_id=ConfirmationRequest.objects.get(run=second).pk, user=personas.approver, approve=True
    )
    assert harness.resume(second) == RunStatus.COMPLETED and len(tool.calls) == 1

    third = run_start(agent=agent, user=personas.member, input="pay")
    assert harness.execute(third) == RunStatus.COMPLETED
    assert "Budget exceeded" in str(list(third.events.values_list("payload", flat=True)))


def test_a_failed_call_gives_its_amount_back(backend, personas, resumes, fresh_budgets) -> None:
    make_hook(personas.org, "budget", params={"limit": 1000, "per": "organisation"})

    def down(args: dict) -> Any:
        raise ToolError("the bank is down")

    failing = RecordingTool("oa__purchase_pay", parameters=PAY_SCHEMA, result=down)
    harness = Harness(failing)
    agent = paying(personas, 800)

    for _ in range(2):
        run = run_start(agent=agent, user=personas.member, input="pay")
        assert harness.execute(run) == RunStatus.COMPLETED

    assert ToolExecution.objects.filter(status="failed").count() == 2, (
        "the second 800 fitted: the first came back"
    )


def test_the_database_forgets_ended_periods_when_a_new_one_starts(settings) -> None:
    settings.REDIS_URL = None
    past = timezone.now() - dt.timedelta(days=40)
    budgets.reserve(key="old", call="a", amount=5, limit=10, until=past)

    budgets.reserve(key="new", call="b", amount=5, limit=10, until=timezone.now() + dt.timedelta(days=1))

    assert budgets.used(key="old") == 0 and budgets.used(key="new") == Decimal("0.000005")
