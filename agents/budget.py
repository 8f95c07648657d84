"""The ``budget`` hook: what the calls of some tools may spend, summed from one numeric argument
(``amount``), per user, per agent or per organisation, over a day, a week or a month; a call that
would go past it is blocked, or asked of a person (``over: ask``). And the ``budget_refund`` system
hook: a call that failed gives its amount back.

Counted with :mod:`fimone.budgets` (Redis, or the database without it): each call reserves its
amount under ``<run>:<tool call>``, once, so a call re-entered after a suspension or a crash never
counts twice; a call blocked after its amount was reserved (by a later hook, by a person's
rejection, by an expiry) gives it back (:meth:`Budget.on_blocked`), and so does a call that ran and
failed (:class:`BudgetRefund`). A call whose outcome is unknown keeps its amount: it may have been
spent. An eval's call is measured against the budget but never counted (evals have no effects).
Periods are calendar periods in the server's time zone; a counter that cannot be reached fails
closed like any hook.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any, ClassVar, TypeVar

from django.conf import settings
from django.utils import timezone

from agents.engine.db import db
from agents.models import ExecutionPath
from fimone import budgets
from fimone.numbers import declares_number, field_schema, number_of
from hooks.builtin import TOOL_PATTERNS_SCHEMA, tool_matches, tool_patterns
from hooks.catalog import register_hook
from hooks.contract import Band, HookContext, HookResult, PostToolUseHook, PreToolUseHook

T = TypeVar("T")

WINDOWS = ("day", "week", "month")
SCOPES = ("user", "agent", "organisation")
_SCOPE_WORDS = {"user": "this user", "agent": "this agent", "organisation": "the organisation"}
_WINDOW_WORDS = {"day": "today", "week": "this week", "month": "this month"}


def period(window: str, now: dt.datetime) -> tuple[dt.date, dt.datetime]:
    """The calendar period of ``window`` holding ``now`` (server's time zone): its first day, and
    the moment the next one starts."""
    local = timezone.localtime(now)
    today = local.date()
    if window == "day":
        start, following = today, today + dt.timedelta(days=1)
    elif window == "week":
        start = today - dt.timedelta(days=today.weekday())
        following = start + dt.timedelta(days=7)
    else:
        start = today.replace(day=1)
        following = (start + dt.timedelta(days=32)).replace(day=1)
    zone = timezone.get_current_timezone()
    return start, dt.datetime.combine(following, dt.time.min, tzinfo=zone)


def call_of(ctx: HookContext) -> str | None:
    """The call's id for its reservation: the run and the tool call (stated by the engine)."""
    run_id, call_id = ctx.metadata.get("run_id"), ctx.metadata.get("tool_call_id")
    if run_id is None or call_id is None:
        return None
    return f"{run_id}:{call_id}"


async def _counted(fn: Callable[..., T], **kwargs: Any) -> T:
    """Run a counter's call off the event loop: on Redis, in a worker thread; in the database
    (no Redis), in the engine's database thread, whose connection Django manages."""
    if settings.REDIS_URL:
        return await asyncio.to_thread(fn, **kwargs)
    return await db(fn, **kwargs)


def _text(amount: Decimal) -> str:
    return f"{amount:,.2f}" if amount == amount.quantize(Decimal("0.01")) else f"{amount:,}"


@register_hook
class Budget(PreToolUseHook):
    """Keeps the sum of ``field`` over the calls of ``tools`` within ``limit`` per ``per`` and
    ``window``: "payments of at most 100,000 per user per month"."""

    name = "budget"
    description = (
        "A spending budget: the sum of an argument (amount) per user, agent or organisation per day, "
        "week or month."
    )
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "limit": {"type": "number", "exclusiveMinimum": 0, "description": "The budget, e.g. 100000."},
            "field": {
                "type": "string",
                "minLength": 1,
                "default": "amount",
                "description": "The argument summed.",
            },
            "per": {"enum": list(SCOPES), "default": "user", "description": "Whose budget."},
            "window": {"enum": list(WINDOWS), "default": "month", "description": "Its period."},
            "over": {
                "enum": ["block", "ask"],
                "default": "block",
                "description": "A call past the budget: blocked, or asked of a person "
                "(and counted if approved).",
            },
            "tools": TOOL_PATTERNS_SCHEMA,
        },
        "required": ["limit"],
        "additionalProperties": False,
    }
    observes_blocked_calls = True
    # Late among the declared hooks: it counts the amount as the other hooks left it.
    priority = 850

    def __init__(
        self,
        *,
        limit: Any,
        field: str = "amount",
        per: str = "user",
        window: str = "month",
        over: str = "block",
        tools: Any = "*",
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        try:
            self.limit_units = budgets.units(limit)
        except ValueError:
            raise ValueError("limit must be a positive number") from None
        if self.limit_units <= 0:
            raise ValueError("limit must be a positive number")
        if not isinstance(field, str) or not field:
            raise ValueError("field must name an argument")
        if per not in SCOPES:
            raise ValueError(f"per must be one of {', '.join(SCOPES)}")
        if window not in WINDOWS:
            raise ValueError(f"window must be one of {', '.join(WINDOWS)}")
        if over not in ("block", "ask"):
            raise ValueError("over must be 'block' or 'ask'")
        self.field, self.per, self.window, self.over = field, per, window, over
        self.tools = tool_patterns(tools, "tools")
        # The budget's identity: what it sums and over which tools, not its limit (raising the
        # limit keeps what was spent).
        ident = json.dumps([sorted(self.tools) if isinstance(self.tools, list) else self.tools, field])
        self._ident = hashlib.sha256(ident.encode()).hexdigest()[:16]

    def should_trigger(self, ctx: HookContext) -> bool:
        return tool_matches(ctx.tool_name, self.tools)

    def key(self, ctx: HookContext, now: dt.datetime) -> tuple[str, dt.datetime]:
        """The budget's counter for this call's period, and when the period ends."""
        who = {"user": ctx.user_id, "agent": ctx.agent_id, "organisation": ctx.metadata.get("org_id")}[
            self.per
        ]
        start, until = period(self.window, now)
        org = ctx.metadata.get("org_id")
        return f"{org}:{self.per}:{who}:{self.window}:{start.isoformat()}:{self._ident}", until

    def amount_of(self, ctx: HookContext) -> Decimal | str | None:
        """What the call spends: a number, ``None`` when the tool has no such argument (nothing
        to count), or why it cannot be counted, in words (docs/design.md §1.16: a value that is not a
        number — "25,000.00", "25000 USD" — or an argument the tool declares but the call leaves
        out without a default is never taken for nothing spent). Numbers follow
        :mod:`fimone.numbers`, with the tool's schema."""
        args = ctx.tool_args if isinstance(ctx.tool_args, dict) else {}
        node = field_schema(ctx.tool_schema, (self.field,)) if ctx.tool_schema else None
        if self.field in args:
            value = args[self.field]
        elif node is not None and "default" in node:
            value = node["default"]
        elif node is not None:
            return f"{self.field} is not given, and what the call spends then is not known"
        else:
            return None  # the tool has no such argument: this budget does not count it
        number = number_of(value, numeric_text=declares_number(node))
        if number is None or number < 0:
            shown = json.dumps(value, ensure_ascii=False, default=str)[:60]
            return f"{self.field} is {shown}, which is not a positive number"
        return number

    async def execute(self, ctx: HookContext) -> HookResult:
        spends = self.amount_of(ctx)
        if spends is None:
            return HookResult()
        if isinstance(spends, str):
            # Blocked whatever ``over`` says: an amount that cannot be counted cannot be counted
            # after a person approves it either.
            return HookResult(
                allow=False,
                error=f"Budget: {spends}, so it cannot be counted. The call was not executed.",
            )
        amount = budgets.units(spends)
        call = call_of(ctx)
        key, until = self.key(ctx, timezone.now())
        sandboxed = ctx.metadata.get("execution_path") == ExecutionPath.EVAL
        if call is None or sandboxed:
            # Measured, never counted (an eval, or a call the engine did not name).
            used = await _counted(budgets.used, key=key)
            over = budgets.units(used) + amount > self.limit_units
            counted = budgets.Reservation(budgets.OVER if over else budgets.RESERVED, used)
        else:
            counted = await _counted(
                budgets.reserve,
                key=key,
                call=call,
                amount=amount,
                limit=self.limit_units,
                until=until,
                count_over=self.over == "ask",
            )
        if counted.outcome in (budgets.ALREADY, budgets.RESERVED):
            return HookResult()
        limit = budgets.as_amount(self.limit_units)
        spent = (
            counted.used
            if counted.outcome == budgets.RESERVED_OVER
            else counted.used + budgets.as_amount(amount)
        )
        what = (
            f"{_text(budgets.as_amount(amount))} would bring what {_SCOPE_WORDS[self.per]} spent "
            f"{_WINDOW_WORDS[self.window]} to {_text(spent)}, over the budget of {_text(limit)}"
        )
        if self.over == "ask":
            return HookResult(require_confirmation=True, confirmation_reason=f"over budget: {what}")
        return HookResult(
            allow=False,
            error=f"Budget exceeded: {what}. The call was not executed.",
            side_effects=[f"budget: {what}"],
        )

    async def on_blocked(self, ctx: HookContext, *, blocked_by: str, error: str) -> None:
        """A call blocked after its amount was counted (a later hook, a person's rejection, an
        expiry) gives it back."""
        call = call_of(ctx)
        if call is not None:
            await _counted(budgets.release_call, call=call)


@register_hook
class BudgetRefund(PostToolUseHook):
    """A call that ran and failed gives back what budgets counted for it (an unknown outcome
    keeps it: it may have been spent). First among the result hooks, it reads the outcome as the
    engine stated it."""

    name = "budget_refund"
    system = True
    band = Band.GUARD
    priority = 1
    on_error = "allow"  # a refund that failed must not hide the tool's result

    def should_trigger(self, ctx: HookContext) -> bool:
        return ctx.metadata.get("tool_status") == "failed" and call_of(ctx) is not None

    async def execute(self, ctx: HookContext) -> HookResult:
        call = call_of(ctx)
        if call is not None and ctx.metadata.get("execution_path") != ExecutionPath.EVAL:
            await _counted(budgets.release_call, call=call)
        return HookResult()
