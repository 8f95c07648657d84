"""What the platform trusts travels outside ``metadata``: the run's event publisher reaches
system hooks only, and only a system hook's answer names the approving request (docs/design.md §1.10)."""

from __future__ import annotations

from typing import Any

from hooks import HookContext, HookRegistry, HookResult, PostToolUseHook, PreToolUseHook


class Events:
    def __init__(self) -> None:
        self.published: list[tuple[str, dict[str, Any]]] = []

    async def publish(self, type_: str, payload: dict[str, Any], *, at_once: bool = True) -> None:
        self.published.append((type_, payload))


class Sees(PreToolUseHook):
    def __init__(self, seen: list, *, answer: HookResult | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.seen, self.answer = seen, answer

    async def execute(self, ctx: HookContext) -> HookResult:
        self.seen.append((type(self).__name__, ctx.events))
        return self.answer or HookResult()


class Declared(Sees):
    name = "declared"
    priority = 10


class System(Sees):
    name = "system"
    system = True
    priority = 20


class SeesAfter(PostToolUseHook):
    name = "after"

    def __init__(self, seen: list, **kw: Any) -> None:
        super().__init__(**kw)
        self.seen = seen

    async def execute(self, ctx: HookContext) -> HookResult:
        self.seen.append((ctx.events, ctx.confirmation_request_id))
        return HookResult()


async def test_the_registry_hands_the_run_events_to_system_hooks_only() -> None:
    seen: list = []
    events = Events()
    registry = HookRegistry([Declared(seen), System(seen)])
    # A caller's context that already carries a publisher does not leak it to declared hooks.
    await registry.run_pre_tool_use(HookContext(tool_name="t", events=events), events=events)
    assert seen == [("Declared", None), ("System", events)]


async def test_it_strips_the_run_events_from_post_tool_use_hooks() -> None:
    seen: list = []
    registry = HookRegistry([SeesAfter(seen)])
    await registry.run_post_tool_use(
        HookContext(tool_name="t", events=Events(), confirmation_request_id="r1")
    )
    assert seen == [(None, "r1")]


async def test_it_ignores_an_approving_request_named_by_a_declared_hook() -> None:
    forged = HookResult(approved_args_sha256="f" * 64, confirmation_request_id="someone-elses")
    registry = HookRegistry([Declared([], answer=forged)])
    outcome = await registry.run_pre_tool_use(HookContext(tool_name="t"))
    assert outcome.allow and outcome.confirmation_request_id is None and outcome.approved_args_sha256 is None


async def test_a_system_hook_names_the_approving_request_outside_metadata() -> None:
    answer = HookResult(approved_args_sha256="a" * 64, confirmation_request_id="req-1")
    ctx = HookContext(tool_name="t", metadata={"run_id": 1})
    outcome = await HookRegistry([System([], answer=answer)]).run_pre_tool_use(ctx)
    assert outcome.confirmation_request_id == "req-1" and outcome.approved_args_sha256 == "a" * 64
    assert ctx.metadata == {"run_id": 1}
