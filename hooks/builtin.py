"""Built-in hooks. Declarable ones are listed in the catalog by name; ``system`` hooks are attached
to every agent by the engine and cannot be declared or removed.

Every built-in states its parameters as a JSON schema (``params_schema``, exposed by
:func:`hooks.catalog.catalog_entries`); declarations are validated against it before the class is
built, and the constructor then checks what a schema cannot say (regular expressions compile, …).

Hooks that need the platform's data live in the apps that own it and register themselves in the
same catalog at start-up: ``read_only_guard``, ``audit_log`` and ``connector_rate_limit`` in
``agents``, the approval gate in ``approvals``.
"""

from __future__ import annotations

import fnmatch
import json
import re
from typing import Any, ClassVar

from hooks.catalog import register_hook
from hooks.conditions import CONFIRM_OPS, conditions_of, judge
from hooks.contract import HookContext, HookResult, PostToolUseHook, PreToolUseHook, SessionStartHook


def tool_patterns(value: Any, field: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not value or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{field} must be a non-empty list of tool-name patterns (e.g. 'oa__*')")
    return tuple(value)


def tool_matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


TOOL_PATTERNS_SCHEMA: dict[str, Any] = {
    "description": "Tool-name glob patterns (e.g. 'oa__*'); one pattern or a list.",
    "oneOf": [
        {"type": "string", "minLength": 1},
        {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
    ],
}


def _text(result: Any) -> str:
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)


@register_hook
class DenyTools(PreToolUseHook):
    """Blocks the tools whose names match ``tools`` (glob patterns) with ``message``."""

    name = "deny_tools"
    description = "Blocks the tools whose names match the patterns, with a message for the model."
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "tools": TOOL_PATTERNS_SCHEMA,
            "message": {"type": "string", "description": "What the model is told."},
        },
        "required": ["tools"],
        "additionalProperties": False,
    }
    priority = 10

    def __init__(self, *, tools: Any, message: str = "", **kw: Any) -> None:
        super().__init__(**kw)
        self.tools = tool_patterns(tools, "tools")
        self.message = message or "This tool is disabled by policy."

    def should_trigger(self, ctx: HookContext) -> bool:
        return tool_matches(ctx.tool_name, self.tools)

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(allow=False, error=self.message, side_effects=[f"denied {ctx.tool_name}"])


@register_hook
class SetArguments(PreToolUseHook):
    """Forces argument values on matching tools (e.g. a fixed ``currency`` or a capped ``limit``)."""

    name = "set_arguments"
    description = "Forces argument values on matching tools (a fixed currency, a capped limit)."
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "tools": TOOL_PATTERNS_SCHEMA,
            "values": {"type": "object", "minProperties": 1, "description": "Argument name → value."},
        },
        "required": ["tools", "values"],
        "additionalProperties": False,
    }
    priority = 20

    def __init__(self, *, tools: Any, values: dict[str, Any], **kw: Any) -> None:
        super().__init__(**kw)
        self.tools = tool_patterns(tools, "tools")
        if not isinstance(values, dict) or not values:
            raise ValueError("values must be a non-empty object of argument names to values")
        self.values = dict(values)

    def should_trigger(self, ctx: HookContext) -> bool:
        return tool_matches(ctx.tool_name, self.tools)

    async def execute(self, ctx: HookContext) -> HookResult:
        changed = sorted(k for k, v in self.values.items() if ctx.tool_args.get(k) != v)
        if not changed:
            return HookResult()
        return HookResult(
            modified_args={**ctx.tool_args, **self.values},
            side_effects=[f"set {', '.join(changed)} on {ctx.tool_name}"],
        )


@register_hook
class RedactResult(PostToolUseHook):
    """Replaces every match of ``patterns`` (regular expressions) in a tool's result."""

    name = "redact_result"
    description = "Replaces every match of the regular expressions in a tool's result."
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "patterns": {
                "description": "Regular expressions (Python syntax).",
                "oneOf": [
                    {"type": "string", "minLength": 1},
                    {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
                ],
            },
            "replacement": {"type": "string", "default": "[redacted]"},
            "tools": TOOL_PATTERNS_SCHEMA,
        },
        "required": ["patterns"],
        "additionalProperties": False,
    }
    priority = 10

    def __init__(
        self, *, patterns: Any, replacement: str = "[redacted]", tools: Any = "*", **kw: Any
    ) -> None:
        super().__init__(**kw)
        if isinstance(patterns, str):
            patterns = [patterns]
        if not isinstance(patterns, list) or not patterns:
            raise ValueError("patterns must be a non-empty list of regular expressions")
        try:
            self.regexes = tuple(re.compile(p) for p in patterns)
        except re.error as exc:
            raise ValueError(f"bad regular expression: {exc}") from None
        self.replacement = str(replacement)
        self.tools = tool_patterns(tools, "tools")

    def should_trigger(self, ctx: HookContext) -> bool:
        return tool_matches(ctx.tool_name, self.tools)

    async def execute(self, ctx: HookContext) -> HookResult:
        text = _text(ctx.tool_result)
        count = 0
        for regex in self.regexes:
            text, n = regex.subn(self.replacement, text)
            count += n
        if not count:
            return HookResult()
        return HookResult(
            modified_result=text, side_effects=[f"redacted {count} match(es) in {ctx.tool_name}"]
        )


TRUNCATE_DEFAULT_CHARS = 8_000


@register_hook
class ResultTruncate(PostToolUseHook):
    """Cuts observations longer than ``max_chars`` so that one tool cannot flood the model's
    context. The cut is marked with how many characters were removed. Only the observation is
    cut: the tool's full result stays in its ``ToolExecution`` (recorded before this hook's
    output), and hooks that run before this one (an audit log) see all of it. A non-text result
    is measured and cut as its JSON text."""

    name = "result_truncate"
    description = "Cuts long tool results to max_chars (default 8,000) with a marker of what was removed."
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "max_chars": {
                "type": "integer",
                "minimum": 100,
                "default": TRUNCATE_DEFAULT_CHARS,
                "description": "Longest observation kept, in characters.",
            },
            "tools": TOOL_PATTERNS_SCHEMA,
        },
        "additionalProperties": False,
    }
    priority = 90

    def __init__(self, *, max_chars: int = TRUNCATE_DEFAULT_CHARS, tools: Any = "*", **kw: Any) -> None:
        super().__init__(**kw)
        if not isinstance(max_chars, int) or isinstance(max_chars, bool) or max_chars < 100:
            raise ValueError("max_chars must be a whole number of at least 100")
        self.max_chars = max_chars
        self.tools = tool_patterns(tools, "tools")

    def should_trigger(self, ctx: HookContext) -> bool:
        return tool_matches(ctx.tool_name, self.tools)

    async def execute(self, ctx: HookContext) -> HookResult:
        text = _text(ctx.tool_result)
        if len(text) <= self.max_chars:
            return HookResult()
        cut = len(text) - self.max_chars
        return HookResult(
            modified_result=(
                f"{text[: self.max_chars]}\n… [truncated: {cut:,} of {len(text):,} characters removed; "
                "the full result is kept in the run's record]"
            ),
            side_effects=[f"truncated {ctx.tool_name} result by {cut} characters"],
        )


@register_hook
class TruncateResult(ResultTruncate):
    """The former name of ``result_truncate``, kept so that existing declarations (and runs that
    recorded it in their chain) go on working; same parameters, same default."""

    name = "truncate_result"
    alias_of: ClassVar[str] = "result_truncate"
    description = "Former name of result_truncate (same behaviour)."


# --- confirm_when ---------------------------------------------------------------------------------


@register_hook
class ConfirmWhen(PreToolUseHook):
    """Asks for a human's approval of a call whose arguments meet conditions, although its tool is
    not flagged ``requires_confirmation``: "payments of 50,000 or more need approval" is
    ``{"tools": "oa__purchase_pay", "conditions": [{"field": "amount", "op": ">=", "value": 50000}]}``.

    ``conditions`` are on argument fields (a dotted path into nested objects, digits index lists)
    with ``>``, ``>=``, ``<``, ``<=`` (numbers), ``==``, ``!=``, ``in`` (a list) and ``regex``
    (searched in the text); ``mode`` combines them: ``all`` (default) or ``any``. Conditions are
    judged by :mod:`hooks.conditions` against the tool's schema: a field the tool does not have
    does not meet its condition; one that cannot decide ("25,000.00" where a number is compared, a
    declared field left out) is doubt, and doubt asks a person too (docs/design.md §1.16). When met or in
    doubt, the hook answers ``HookResult(require_confirmation=True)`` and the approval gate asks a
    human; it never blocks. It runs late (priority 900) so that it sees the arguments as other
    hooks rewrote them.
    """

    name = "confirm_when"
    description = "Requires human approval when the call's arguments meet conditions (e.g. amount >= 50000)."
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "tools": TOOL_PATTERNS_SCHEMA,
            "mode": {"enum": ["all", "any"], "default": "all", "description": "How conditions combine."},
            "conditions": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "field": {"type": "string", "minLength": 1, "description": "e.g. amount, payee.iban"},
                        "op": {"enum": list(CONFIRM_OPS)},
                        "value": {},
                    },
                    "required": ["field", "op", "value"],
                    "additionalProperties": False,
                },
            },
            "reason": {"type": "string", "description": "Why approval is needed, for the trace."},
        },
        "required": ["conditions"],
        "additionalProperties": False,
    }
    priority = 900

    def __init__(
        self, *, conditions: Any, tools: Any = "*", mode: str = "all", reason: str = "", **kw: Any
    ) -> None:
        super().__init__(**kw)
        self.tools = tool_patterns(tools, "tools")
        if mode not in ("all", "any"):
            raise ValueError("mode must be 'all' or 'any'")
        if not isinstance(conditions, list) or not conditions:
            raise ValueError("conditions must be a non-empty list of {field, op, value}")
        self.conditions = conditions_of(conditions)
        self.mode = mode
        self.reason = str(reason or "")

    def should_trigger(self, ctx: HookContext) -> bool:
        return tool_matches(ctx.tool_name, self.tools)

    async def execute(self, ctx: HookContext) -> HookResult:
        judged = judge(self.conditions, ctx.tool_args, schema=ctx.tool_schema, any_=self.mode == "any")
        if judged.unmet:
            return HookResult()
        if judged.doubt:
            reason = f"{ctx.tool_name}: {judged.why}; a person decides"
            return HookResult(require_confirmation=True, confirmation_reason=reason)
        joined = f" {self.mode} ".join(c.describe() for c in self.conditions)
        reason = self.reason or f"{ctx.tool_name} arguments meet {joined}"
        return HookResult(require_confirmation=True, confirmation_reason=reason)


@register_hook
class StaticContext(SessionStartHook):
    """Adds a fixed piece of text to the system prompt of every run (house rules, glossary)."""

    name = "static_context"
    description = "Adds a fixed text to the system prompt of every run (house rules, glossary)."
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"text": {"type": "string", "minLength": 1}},
        "required": ["text"],
        "additionalProperties": False,
    }

    def __init__(self, *, text: str, **kw: Any) -> None:
        super().__init__(**kw)
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text must be a non-empty string")
        self.text = text.strip()

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(additional_context=self.text)
