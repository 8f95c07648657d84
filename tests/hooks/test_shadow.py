"""A hook in shadow mode runs, and what it would have done is noted; the call goes on as if the
hook were absent: it never blocks, rewrites, asks or fails a call (hooks.shadow)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from hooks import (
    HookContext,
    HookRegistry,
    HookResult,
    PostToolUseHook,
    PreToolUseHook,
    SessionStartHook,
    SideEffect,
    SuspendRun,
)
from hooks.catalog import registry_from_chain, resolve_chain
from hooks.shadow import ShadowHook
from tests.hooks.registry_kit import Blocker, Raises, Recorder, Sleeps, ctx


def shadow(hook: Any, declaration: int | None = 7, source: str = "organisation") -> ShadowHook:
    return ShadowHook(hook, declaration=declaration, source=source)


def shadow_notes(outcome: Any) -> list[tuple[str, str | None]]:
    return [(e.message, (e.shadow or {}).get("decision")) for e in outcome.side_effects if e.shadow]


class Asks(PreToolUseHook):
    name = "confirm_big"

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(require_confirmation=True, confirmation_reason="amount over 1000")


class Mutates(PreToolUseHook):
    """Changes the arguments it was given in place, and says nothing."""

    name = "meddler"

    async def execute(self, ctx: HookContext) -> HookResult:
        ctx.tool_args["amount"] = 1
        ctx.metadata["org_id"] = 999
        return HookResult()


class Suspends(PreToolUseHook):
    name = "waits"

    async def execute(self, ctx: HookContext) -> HookResult:
        raise SuspendRun("waiting for a person")


class Redacts(PostToolUseHook):
    name = "redact_result"

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(modified_result="[redacted]")


class Briefs(SessionStartHook):
    name = "briefing"

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(additional_context="Payments are frozen this week.")


class Forges(PreToolUseHook):
    """A declared hook that tries to pass a note off as another hook's shadow decision."""

    name = "forger"

    async def execute(self, ctx: HookContext) -> HookResult:
        fake = SideEffect("amount_limit", "shadow: would have blocked", shadow={"decision": "block"})
        return HookResult(side_effects=[fake])  # type: ignore[list-item]


async def test_a_shadow_block_lets_the_call_through_and_notes_the_block() -> None:
    log: list = []
    registry = HookRegistry([shadow(Blocker()), Recorder("after", log)])

    out = await registry.run_pre_tool_use(ctx(amount=5000))

    assert out.allow and out.tool_args == {"amount": 5000} and out.blocked_by is None
    assert log == [("after", {"amount": 5000})], "the hooks after it ran as if it were absent"
    assert shadow_notes(out) == [
        ("shadow: would have blocked the call: Payments over 1000 need a second signature.", "block")
    ]
    [note] = [e for e in out.side_effects if e.shadow]
    assert note.hook == "amount_limit" and not note.failure
    assert note.shadow == {"decision": "block", "declaration": 7, "source": "organisation"}


async def test_a_shadow_rewrite_changes_nothing_the_next_hook_or_the_tool_sees() -> None:
    log: list = []
    registry = HookRegistry([shadow(Recorder("cap", [], rewrite={"amount": 1000})), Recorder("next", log)])

    out = await registry.run_pre_tool_use(ctx(amount=5000, currency="EUR"))

    assert out.tool_args == {"amount": 5000, "currency": "EUR"}
    assert log == [("next", {"amount": 5000, "currency": "EUR"})]
    assert shadow_notes(out) == [("shadow: would have rewritten: the arguments (amount)", "rewrite")]


async def test_a_shadow_hook_that_mutates_its_context_in_place_touches_a_copy() -> None:
    call = ctx(amount=5000)

    out = await HookRegistry([shadow(Mutates())]).run_pre_tool_use(call)

    assert out.tool_args == {"amount": 5000} and call.tool_args == {"amount": 5000}
    assert call.metadata == {"run_id": 7}
    assert shadow_notes(out) == [], "in place is not a rewrite the registry would take"


async def test_a_shadow_ask_never_reaches_the_gate() -> None:
    out = await HookRegistry([shadow(Asks())]).run_pre_tool_use(ctx(amount=5000))

    assert out.allow and out.requires_confirmation is False and out.confirmation_requested_by == []
    assert shadow_notes(out) == [
        ("shadow: would have asked a person to approve the call: amount over 1000", "ask")
    ]


async def test_a_shadow_suspension_is_noted_as_an_ask_and_the_call_goes_on() -> None:
    out = await HookRegistry([shadow(Suspends())]).run_pre_tool_use(ctx(amount=5000))

    assert out.allow and out.suspension is None
    assert shadow_notes(out) == [
        ("shadow: would have asked a person to approve the call: waiting for a person", "ask")
    ]


@pytest.mark.parametrize(
    ("on_error", "decision", "words"),
    [("block", "fail_closed", "would have failed closed (blocked the call)"),
     ("allow", "fail_open", "would have failed, letting the call through")],
)  # fmt: skip
async def test_a_failing_shadow_hook_never_blocks(on_error, decision, words) -> None:
    out = await HookRegistry([shadow(Raises(on_error=on_error))]).run_pre_tool_use(ctx(amount=5))

    assert out.allow and out.blocked_by is None
    assert shadow_notes(out) == [(f"shadow: {words}: raised RuntimeError: database unavailable", decision)]


async def test_a_shadow_hook_past_its_timeout_is_cut_off_on_time_and_never_blocks() -> None:
    started = time.perf_counter()

    out = await HookRegistry([shadow(Sleeps())]).run_pre_tool_use(ctx(amount=5))

    assert time.perf_counter() - started < 2.0, "held to the hook's own timeout, not its 5 s"
    assert out.allow
    assert shadow_notes(out) == [
        ("shadow: would have failed closed (blocked the call): timed out after 0.05 s", "fail_closed")
    ]


async def test_a_shadow_hook_that_does_not_apply_says_nothing() -> None:
    class OnlyRefunds(Blocker):
        def should_trigger(self, ctx: HookContext) -> bool:
            return ctx.tool_name == "oa__refund"

    out = await HookRegistry([shadow(OnlyRefunds())]).run_pre_tool_use(ctx(amount=5000))

    assert out.allow and out.side_effects == []


async def test_a_shadow_result_rewrite_leaves_the_observation_whole() -> None:
    post = HookContext(tool_name="oa__card", tool_result="6222-1111-2222-3333", metadata={})

    out = await HookRegistry([shadow(Redacts())]).run_post_tool_use(post)

    assert out.result == "6222-1111-2222-3333" and out.failed_hooks == []
    assert shadow_notes(out) == [("shadow: would have rewritten: the result the model reads", "rewrite")]


async def test_a_shadow_session_hook_adds_no_context() -> None:
    out = await HookRegistry([shadow(Briefs())]).run_session_start(HookContext())

    assert out.ok and out.additional_context == []
    assert shadow_notes(out) == [("shadow: would have added context to the run: 30 characters", "context")]


async def test_no_hook_can_forge_a_shadow_note() -> None:
    out = await HookRegistry([Forges()]).run_pre_tool_use(ctx(amount=5))

    [note] = out.side_effects
    assert note.hook == "forger" and note.shadow is None


def test_a_recorded_chain_runs_shadow_items_in_shadow_and_leaves_off_items_out() -> None:
    deny = {"kind": "class", "name": "deny_tools", "params": {"tools": ["oa__*"]}}
    chain = resolve_chain(
        None,
        enforced=[{**deny, "mode": "shadow", "id": 41}, {**deny, "mode": "off", "id": 42}],
        declared=[{"kind": "class", "name": "result_truncate", "params": {"max_chars": 500}, "id": 43}],
    )

    assert [(i["name"], i.get("mode"), i.get("declaration")) for i in chain["declared"]] == [
        ("result_truncate", None, None),
        ("deny_tools", "shadow", 41),
    ]
    hooks = {h.hook_name: h for h in registry_from_chain(chain).hooks}
    assert isinstance(hooks["deny_tools"], ShadowHook) and hooks["deny_tools"].declaration == 41
    assert not isinstance(hooks["result_truncate"], ShadowHook)
    assert hooks["deny_tools"].on_error == "allow"
