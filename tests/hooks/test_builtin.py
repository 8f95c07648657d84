"""The built-in hooks of the catalog that need no database: result_truncate, confirm_when, and what
the catalog tells about them (descriptions, parameter schemas, validation in the operator's words).
Also the contract's escalation to approval (``HookResult(require_confirmation=True)``) and the
observers of blocked calls, as the registry runs them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hooks import HookContext, HookRegistry, HookResult, PostToolUseHook, PreToolUseHook
from hooks.builtin import ConfirmWhen, ResultTruncate, TruncateResult
from hooks.catalog import (
    HookDeclarationError,
    build_hooks,
    catalog_entries,
    hook_catalog,
    hook_params_errors,
    hook_params_schema,
    registry_from_chain,
    resolve_chain,
)


def pay(**args: Any) -> HookContext:
    return HookContext(tool_name="oa__purchase_pay", tool_args=args, metadata={"run_id": 1})


def post(result: Any, tool: str = "oa__purchases_list") -> HookContext:
    return HookContext(tool_name=tool, tool_args={}, metadata={"run_id": 1}, tool_result=result)


# --- result_truncate ------------------------------------------------------------------------------


async def test_it_cuts_results_over_8000_characters_by_default_and_says_how_much_was_removed() -> None:
    registry = HookRegistry(build_hooks(["result_truncate"]))

    out = await registry.run_post_tool_use(post("x" * 10_000))

    kept, marker = out.result.split("\n", 1)
    assert kept == "x" * 8_000
    assert "2,000 of 10,000 characters removed" in marker and "full result is kept" in marker
    assert [e.message for e in out.side_effects] == ["truncated oa__purchases_list result by 2000 characters"]


async def test_it_leaves_a_result_of_exactly_max_chars_alone() -> None:
    registry = HookRegistry(build_hooks([{"name": "result_truncate", "params": {"max_chars": 100}}]))

    assert (await registry.run_post_tool_use(post("y" * 100))).result == "y" * 100
    assert (await registry.run_post_tool_use(post("y" * 101))).result.startswith("y" * 100 + "\n… [")


async def test_it_measures_a_structured_result_as_its_json_text() -> None:
    rows = {"rows": [{"name": "张三", "note": "n" * 50} for _ in range(10)]}
    text = json.dumps(rows, ensure_ascii=False)
    registry = HookRegistry(build_hooks([{"name": "result_truncate", "params": {"max_chars": 200}}]))

    out = await registry.run_post_tool_use(post(rows))

    assert out.result.startswith(text[:200]) and f"{len(text) - 200:,} of {len(text):,}" in out.result


async def test_the_old_name_truncate_result_still_works_with_the_new_default() -> None:
    [hook] = build_hooks([{"name": "truncate_result", "params": {}}])

    assert isinstance(hook, TruncateResult) and isinstance(hook, ResultTruncate)
    assert hook.max_chars == 8_000
    out = await HookRegistry([hook]).run_post_tool_use(post("z" * 9_000))
    assert out.result.startswith("z" * 8_000 + "\n… [truncated: 1,000 of 9,000")


def test_a_run_that_recorded_the_old_name_rebuilds_its_chain() -> None:
    chain = resolve_chain([{"name": "truncate_result", "params": {"max_chars": 500}}])

    registry = registry_from_chain(chain)

    [hook] = [h for h in registry.hooks if h.hook_name == "truncate_result"]
    assert hook.max_chars == 500


@pytest.mark.parametrize("max_chars", [99, 0, -5, "8000", 1.5, True, None])
def test_it_refuses_a_max_chars_that_is_not_a_whole_number_of_at_least_100(max_chars: Any) -> None:
    with pytest.raises(HookDeclarationError, match="max_chars"):
        build_hooks([{"name": "result_truncate", "params": {"max_chars": max_chars}}])


# --- confirm_when ---------------------------------------------------------------------------------

AT_LEAST_50K = {
    "tools": "oa__purchase_pay",
    "conditions": [{"field": "amount", "op": ">=", "value": 50000}],
}


# A payment tool whose amount is a number or a text, as many services take money.
TEXT_OR_NUMBER = {
    "type": "object",
    "properties": {
        "purchase_id": {"type": "string"},
        "amount": {"type": ["number", "string"]},
        "note": {"type": "string"},
        "payee": {"type": "object", "properties": {"country": {"type": "string"}}},
        "lines": {"type": "array", "items": {"type": "object", "properties": {"amount": {"type": "number"}}}},
        "currency": {"type": "string", "default": "EUR"},
    },
}


async def confirm_outcome(params: dict[str, Any], schema: Any = TEXT_OR_NUMBER, **args: Any) -> Any:
    [hook] = build_hooks([{"name": "confirm_when", "params": params}])
    ctx = pay(**args)
    ctx.tool_schema = schema
    out = await HookRegistry([hook]).run_pre_tool_use(ctx)
    assert out.allow, "confirm_when never blocks"
    return out


async def confirm(params: dict[str, Any], schema: Any = TEXT_OR_NUMBER, **args: Any) -> bool:
    return (await confirm_outcome(params, schema, **args)).requires_confirmation


@pytest.mark.parametrize(
    ("amount", "needed"),
    [
        (60_000, True),
        (50_000, True),
        (50_000.0, True),
        (49_999.99, False),
        (40_000, False),
        ("60000", True),  # the schema says the field may be a number, and the text spells one
        ("49999.99", False),
        ("-1", False),
        ("sixty thousand", True),  # cannot be compared: a person decides
        ("25,000.00", True),  # a service may read 25000: a person decides
        ("25000 USD", True),
        (" 6e4 ", True),
        ("1_000", True),
        ("NaN", True),
        ("Infinity", True),
        (True, True),  # a boolean is not a number
        ({"value": 1}, True),
    ],
)
async def test_it_asks_for_approval_when_the_amount_is_at_least_50000_or_cannot_tell(
    amount: Any, needed: bool
) -> None:
    assert await confirm(AT_LEAST_50K, purchase_id="PO-1", amount=amount) is needed


@pytest.mark.parametrize("amount", ["100", "49999.99", "0"])
async def test_a_text_is_not_a_number_where_the_schema_does_not_say_the_field_is_one(amount: str) -> None:
    text_only = {"type": "object", "properties": {"amount": {"type": "string"}}}
    below = {"conditions": [{"field": "amount", "op": "<", "value": 50000}], "tools": "oa__purchase_pay"}

    assert await confirm(below, text_only, amount=amount) is True
    assert await confirm(below, None, amount=amount) is True
    assert await confirm(below, TEXT_OR_NUMBER, amount=amount) is True
    assert await confirm(below, TEXT_OR_NUMBER, amount="50000") is False


async def test_doubt_names_the_value_and_says_a_person_decides() -> None:
    out = await confirm_outcome(AT_LEAST_50K, purchase_id="PO-1", amount="25,000.00")

    assert [effect.message for effect in out.side_effects] == [
        'asked for human approval: oa__purchase_pay: amount is "25,000.00", which is not a number; '
        "a person decides"
    ]


async def test_a_field_the_tool_does_not_have_does_not_meet_its_condition() -> None:
    without_amount = {"type": "object", "properties": {"purchase_id": {"type": "string"}}}

    assert await confirm(AT_LEAST_50K, without_amount, purchase_id="PO-1") is False
    assert await confirm(AT_LEAST_50K, None, purchase_id="PO-1") is False


async def test_a_declared_field_left_out_asks_a_person_unless_the_schema_gives_its_default() -> None:
    not_eur = {"tools": "oa__purchase_pay", "conditions": [{"field": "currency", "op": "!=", "value": "EUR"}]}

    assert await confirm(AT_LEAST_50K, purchase_id="PO-1") is True  # amount is declared, no default
    assert await confirm(not_eur, purchase_id="PO-1", amount=1) is False  # currency defaults to EUR
    assert await confirm(not_eur, purchase_id="PO-1", amount=1, currency="USD") is True


async def test_it_only_looks_at_the_tools_it_names() -> None:
    [hook] = build_hooks([{"name": "confirm_when", "params": AT_LEAST_50K}])
    ctx = HookContext(tool_name="oa__purchases_list", tool_args={"amount": 90_000})

    assert (await HookRegistry([hook]).run_pre_tool_use(ctx)).requires_confirmation is False


@pytest.mark.parametrize(
    ("op", "value", "actual", "met"),
    [
        (">", 100, 100, False),
        (">", 100, 101, True),
        ("<", 0, -1, True),
        ("<=", 0, 0, True),
        ("==", "EUR", "EUR", True),
        ("==", 5, 5.0, True),
        ("!=", "CNY", "USD", True),
        ("!=", "CNY", "CNY", False),
        ("in", ["US", "RU", "KP"], "KP", True),
        ("in", ["US", "RU"], "FR", False),
        ("regex", r"(?i)^offshore", "Offshore Holdings Ltd", True),
        ("regex", r"(?i)^offshore", "Acme GmbH", False),
    ],
)
async def test_each_operator_compares_as_documented(op: str, value: Any, actual: Any, met: bool) -> None:
    params = {"conditions": [{"field": "payee.country", "op": op, "value": value}]}

    assert await confirm(params, payee={"country": actual}) is met


async def test_all_needs_every_condition_and_any_needs_one() -> None:
    conditions = [
        {"field": "amount", "op": ">=", "value": 10_000},
        {"field": "currency", "op": "!=", "value": "CNY"},
    ]
    assert await confirm({"conditions": conditions}, amount=20_000, currency="CNY") is False
    assert await confirm({"conditions": conditions}, amount=20_000, currency="USD") is True
    assert await confirm({"conditions": conditions, "mode": "any"}, amount=1, currency="USD") is True
    assert await confirm({"conditions": conditions, "mode": "any"}, amount=1, currency="CNY") is False


async def test_a_field_path_reaches_into_lists() -> None:
    params = {"conditions": [{"field": "lines.1.amount", "op": ">", "value": 100}]}

    assert await confirm(params, lines=[{"amount": 1}, {"amount": 500}]) is True
    assert await confirm(params, lines=[{"amount": 1}]) is False


async def test_it_says_why_approval_is_needed_in_the_trace() -> None:
    [hook] = build_hooks([{"name": "confirm_when", "params": AT_LEAST_50K}])

    out = await HookRegistry([hook]).run_pre_tool_use(pay(amount=60_000))

    assert out.confirmation_requested_by == ["confirm_when"]
    [effect] = out.side_effects
    assert effect.hook == "confirm_when" and "amount >= 50000" in effect.message


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "'conditions' is a required property"),
        ({"conditions": []}, "conditions: [] should be non-empty"),
        ({"conditions": [{"field": "amount", "op": "~", "value": 1}]}, "conditions.0.op"),
        ({"conditions": [{"field": "amount", "op": ">=", "value": "lots"}]}, "must be a number"),
        ({"conditions": [{"field": "amount", "op": "in", "value": 5}]}, "must be a list"),
        ({"conditions": [{"field": "payee", "op": "regex", "value": "("}]}, "not a valid regular expression"),
        ({"conditions": [{"field": "amount", "op": ">", "value": 1}], "mode": "most"}, "mode"),
        ({"conditions": [{"field": "amount", "op": ">", "value": 1}], "colour": "red"}, "colour"),
    ],
)
def test_it_refuses_bad_conditions_naming_the_problem(params: dict[str, Any], message: str) -> None:
    with pytest.raises(HookDeclarationError, match="confirm_when") as caught:
        build_hooks([{"name": "confirm_when", "params": params}])

    assert message in str(caught.value)
    assert "__init__" not in str(caught.value)


# --- the contract: any hook may ask for approval; nobody can take it back ---------------------------


class AsksForApproval(PreToolUseHook):
    name = "asks"
    priority = 10

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(require_confirmation=True, confirmation_reason="because")


class TriesToLowerIt(PreToolUseHook):
    """A later hook that writes False into its context and the engine's metadata."""

    name = "lowers"
    priority = 20

    async def execute(self, ctx: HookContext) -> HookResult:
        ctx.requires_confirmation = False
        ctx.metadata["requires_confirmation"] = False
        ctx.metadata["require_confirmation_for_all"] = False
        return HookResult(require_confirmation=False)


class Sees(PreToolUseHook):
    name = "sees"
    priority = 30

    def __init__(self, seen: list, **kw: Any) -> None:
        super().__init__(**kw)
        self.seen = seen

    async def execute(self, ctx: HookContext) -> HookResult:
        self.seen.append(ctx.requires_confirmation)
        return HookResult()


async def test_a_hook_asking_for_approval_reaches_later_hooks_and_the_outcome() -> None:
    seen: list[bool] = []
    out = await HookRegistry([AsksForApproval(), Sees(seen)]).run_pre_tool_use(pay(amount=1))

    assert out.allow and out.requires_confirmation and seen == [True]


async def test_it_refuses_to_let_a_later_hook_lower_the_need_for_approval() -> None:
    seen: list[bool] = []
    registry = HookRegistry([AsksForApproval(), TriesToLowerIt(), Sees(seen)])

    out = await registry.run_pre_tool_use(pay(amount=1))

    assert seen == [True] and out.requires_confirmation is True


async def test_it_refuses_to_let_a_hook_lower_a_flagged_tools_need_for_approval() -> None:
    seen: list[bool] = []
    ctx = HookContext(tool_name="oa__purchase_pay", metadata={"requires_confirmation": True})

    out = await HookRegistry([TriesToLowerIt(), Sees(seen)]).run_pre_tool_use(ctx)

    assert seen == [True] and out.requires_confirmation is True


async def test_the_callers_context_keeps_its_own_value() -> None:
    ctx = pay(amount=1)

    await HookRegistry([AsksForApproval()]).run_pre_tool_use(ctx)

    assert ctx.requires_confirmation is False


async def test_asking_for_approval_does_not_unblock_a_blocked_call() -> None:
    class Blocks(PreToolUseHook):
        name = "blocks"
        priority = 50

        async def execute(self, ctx: HookContext) -> HookResult:
            return HookResult(allow=False, error="no")

    out = await HookRegistry([AsksForApproval(), Blocks()]).run_pre_tool_use(pay(amount=1))

    assert not out.allow and out.blocked_by == "blocks" and out.error == "no"


# --- observers of blocked calls -------------------------------------------------------------------


class Observer(PostToolUseHook):
    name = "observer"
    observes_blocked_calls = True

    def __init__(self, seen: list, *, fail: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.seen, self.fail = seen, fail

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult()

    async def on_blocked(self, ctx: HookContext, *, blocked_by: str, error: str) -> None:
        if self.fail:
            raise RuntimeError("audit store down")
        self.seen.append((ctx.tool_name, dict(ctx.tool_args), blocked_by, error))


class Rewrites(PreToolUseHook):
    name = "rewrites"
    priority = 1

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(modified_args={**ctx.tool_args, "currency": "CNY"})


class Denies(PreToolUseHook):
    name = "denies"
    priority = 2

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(allow=False, error="Denied by policy.")


class Crashes(PreToolUseHook):
    name = "crashes"
    priority = 2

    async def execute(self, ctx: HookContext) -> HookResult:
        raise RuntimeError("boom")


async def test_observers_hear_of_a_block_with_the_arguments_as_they_were_then() -> None:
    seen: list = []

    out = await HookRegistry([Rewrites(), Denies(), Observer(seen)]).run_pre_tool_use(pay(amount=5))

    assert not out.allow
    assert seen == [("oa__purchase_pay", {"amount": 5, "currency": "CNY"}, "denies", "Denied by policy.")]


async def test_observers_hear_of_a_hook_that_failed_closed() -> None:
    seen: list = []

    await HookRegistry([Crashes(), Observer(seen)]).run_pre_tool_use(pay(amount=5))

    [(_, _, blocked_by, error)] = seen
    assert blocked_by == "crashes" and "could not complete" in error


async def test_observers_hear_nothing_of_allowed_calls() -> None:
    seen: list = []

    out = await HookRegistry([Rewrites(), Observer(seen)]).run_pre_tool_use(pay(amount=5))

    assert out.allow and seen == []


async def test_a_failing_observer_is_reported_and_the_call_stays_blocked() -> None:
    out = await HookRegistry([Denies(), Observer([], fail=True)]).run_pre_tool_use(pay(amount=5))

    assert not out.allow and out.error == "Denied by policy." and out.blocked_by == "denies"
    assert any(e.failure and "audit store down" in e.message for e in out.side_effects)


# --- the catalog describes every built-in ---------------------------------------------------------

BUILT_INS = (
    "audit_log",
    "confirm_when",
    "connector_rate_limit",
    "deny_tools",
    "read_only_guard",
    "redact_result",
    "result_truncate",
    "set_arguments",
    "static_context",
    "truncate_result",
)


def test_the_catalog_describes_every_built_in_with_a_valid_schema() -> None:
    entries = {entry["name"]: entry for entry in catalog_entries()}

    for name in BUILT_INS:
        entry = entries[name]
        assert entry["description"], name
        assert entry["params_schema"]["type"] == "object", name
        assert entry["point"] in ("PreToolUse", "PostToolUse", "SessionStart"), name
    assert entries["read_only_guard"]["system"] is True
    assert entries["truncate_result"]["alias_of"] == "result_truncate"
    assert hook_params_schema("confirm_when")["required"] == ["conditions"]


def test_every_declarable_built_in_refuses_unknown_parameters() -> None:
    catalog = hook_catalog()
    for name in BUILT_INS:
        if catalog[name].system:
            continue
        assert hook_params_errors(catalog[name], {"surprise": 1}), name


def test_the_tunables_are_not_parameters_of_the_schema() -> None:
    assert hook_params_errors(ConfirmWhen, {**AT_LEAST_50K, "priority": 5, "on_error": "allow"}) == []


def test_it_refuses_a_declaration_that_breaks_the_schema_in_the_operators_words() -> None:
    with pytest.raises(HookDeclarationError) as caught:
        build_hooks([{"name": "connector_rate_limit", "params": {"calls": 0}}])

    assert (
        str(caught.value) == "hook 'connector_rate_limit': bad params: calls: 0 is less than the minimum of 1"
    )
