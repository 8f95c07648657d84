"""FIM One's built-in hook names, so that FIM One agent configurations run here unchanged.

FIM One (github.com/fim-ai/fim-one) declares an agent's hooks in its ``model_config_json``:

- ``hooks.class_hooks``: names resolved by ``src/fim_one/web/hooks_bootstrap.py``
  (``_HOOK_FACTORIES``), whose only entry is ``feishu_gate`` (``FeishuGateHook``,
  ``src/fim_one/core/hooks/feishu_gate_hook.py``);
- ``hooks.builtin``: the built-ins of ``src/fim_one/core/agent/builtin_hooks.py``
  (``BUILTIN_HOOKS``, listed by its ``GET /api/hooks/builtin``): ``connector_call_logger``,
  ``result_truncator`` and ``rate_limiter``.

Each name is registered here as an alias (``alias_of``) of the hook of ours that does the same
thing, with FIM One's defaults, so a ``class_hooks`` list naming them builds and runs.
:data:`FIM_ONE_HOOKS` is the mapping the importer (:mod:`console.hook_import`) and the docs use:
an import writes our canonical names, not these aliases.

Contract: an alias accepts exactly its target's parameters (with FIM One's values as defaults) and
behaves as its target; ``feishu_gate`` adds nothing, because the approval gate it stands for is
attached to every agent here (as FIM One attaches ``feishu_gate`` to every agent).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agents.audit import AuditLog
from agents.rate_limit import ConnectorRateLimit
from hooks.builtin import TRUNCATE_DEFAULT_CHARS, ResultTruncate
from hooks.catalog import register_hook
from hooks.contract import HookContext, HookResult, PreToolUseHook

CONNECTOR_TOOLS = "*__*"
"""FIM One's ``tool_filter`` for its connector hooks: tools named ``<connector>__<action>``."""
FIM_ONE_RATE_CALLS = 10
"""FIM One's ``RATE_LIMIT_MAX_CALLS``."""
FIM_ONE_RATE_WINDOW = 60
"""FIM One's ``RATE_LIMIT_WINDOW_SECONDS``."""
FIM_ONE_TRUNCATE_CHARS = 8_000
"""FIM One's ``MAX_RESULT_LENGTH`` (the same as our default)."""


@dataclass(frozen=True)
class FimOneHook:
    """One FIM One built-in and what it becomes here.

    ``ours``: the catalog name an import declares (``None``: nothing to declare);
    ``params``: the parameters it gets; ``options``: FIM One parameters accepted by the import,
    with what each becomes (``"tools"``, ``"priority"``) or why it is dropped."""

    name: str
    declared_in: str
    does: str
    ours: str | None
    params: dict[str, Any] = field(default_factory=dict)
    here: str = ""
    options: dict[str, str] = field(default_factory=dict)


_TUNE = {"tool_filter": "tools", "priority": "priority"}

FIM_ONE_HOOKS: dict[str, FimOneHook] = {
    hook.name: hook
    for hook in (
        FimOneHook(
            name="feishu_gate",
            declared_in="hooks.class_hooks",
            does=(
                "PreToolUse: a tool flagged requires_confirmation (or every tool, with the agent's "
                "require_confirmation_for_all) waits for a person's Approve / Reject, on a Feishu "
                "card or inline in the portal; attached to every agent"
            ),
            ours=None,
            here=(
                "the approval gate (confirmation_gate), attached to every agent here: nothing to "
                "declare; the agent's require_confirmation_for_all is imported with it"
            ),
            options={
                "timeout_seconds": "the approval timeout is the approver policy's here (admin)",
                "poll_interval_seconds": "not needed: a verdict wakes the waiting run at once",
                "callback_base_url": "not needed: cards link to this platform's own inbox",
            },
        ),
        FimOneHook(
            name="connector_call_logger",
            declared_in="hooks.builtin",
            does="PostToolUse: logs every connector tool call (tools named <connector>__<action>)",
            ours="audit_log",
            params={"tools": CONNECTOR_TOOLS},
            here=(
                "audit_log on connector tools: an append-only, hash-chained call log row per call, "
                "blocked calls included"
            ),
            options=_TUNE,
        ),
        FimOneHook(
            name="result_truncator",
            declared_in="hooks.builtin",
            does=f"PostToolUse: cuts tool results longer than {FIM_ONE_TRUNCATE_CHARS:,} characters",
            ours="result_truncate",
            params={"max_chars": FIM_ONE_TRUNCATE_CHARS},
            here=f"result_truncate with max_chars {FIM_ONE_TRUNCATE_CHARS:,}",
            options=_TUNE,
        ),
        FimOneHook(
            name="rate_limiter",
            declared_in="hooks.builtin",
            does=(
                f"PreToolUse: at most {FIM_ONE_RATE_CALLS} calls per {FIM_ONE_RATE_WINDOW} s to each "
                "connector tool, counted in the process"
            ),
            ours="connector_rate_limit",
            params={
                "calls": FIM_ONE_RATE_CALLS,
                "window_seconds": FIM_ONE_RATE_WINDOW,
                "tools": CONNECTOR_TOOLS,
            },
            here=(
                f"connector_rate_limit, {FIM_ONE_RATE_CALLS} calls per {FIM_ONE_RATE_WINDOW} s, counted "
                "per connector and per user across every process"
            ),
            options=_TUNE,
        ),
    )
}
"""FIM One's built-in hook names, by name (where found: the module docstring)."""


def _optional(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with nothing required (an alias has FIM One's values as defaults)."""
    schema = copy.deepcopy(schema)
    schema.pop("required", None)
    return schema


@register_hook
class FeishuGate(PreToolUseHook):
    """FIM One's ``feishu_gate``. Its work is the approval gate's, which every agent here carries:
    declaring it adds nothing, so it never triggers."""

    name = "feishu_gate"
    alias_of: ClassVar[str] = "confirmation_gate"
    description = (
        "FIM One's approval gate. Every agent here has the approval gate (confirmation_gate) "
        "already: declaring this adds nothing."
    )
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }

    def should_trigger(self, ctx: HookContext) -> bool:
        return False

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult()


@register_hook
class ConnectorCallLogger(AuditLog):
    """FIM One's ``connector_call_logger``: ``audit_log`` on connector tools by default."""

    name = "connector_call_logger"
    alias_of: ClassVar[str] = "audit_log"
    description = "FIM One's name for audit_log on connector tools (*__*)."
    params_schema: ClassVar[dict[str, Any]] = _optional(AuditLog.params_schema)

    def __init__(self, *, tools: Any = CONNECTOR_TOOLS, **kw: Any) -> None:
        super().__init__(tools=tools, **kw)


@register_hook
class ResultTruncator(ResultTruncate):
    """FIM One's ``result_truncator``: ``result_truncate`` (FIM One's limit is our default)."""

    name = "result_truncator"
    alias_of: ClassVar[str] = "result_truncate"
    description = f"FIM One's name for result_truncate (max_chars {TRUNCATE_DEFAULT_CHARS:,})."


@register_hook
class RateLimiter(ConnectorRateLimit):
    """FIM One's ``rate_limiter``: ``connector_rate_limit`` with FIM One's limit by default."""

    name = "rate_limiter"
    alias_of: ClassVar[str] = "connector_rate_limit"
    description = (
        f"FIM One's name for connector_rate_limit ({FIM_ONE_RATE_CALLS} calls per "
        f"{FIM_ONE_RATE_WINDOW} s on connector tools)."
    )
    params_schema: ClassVar[dict[str, Any]] = _optional(ConnectorRateLimit.params_schema)

    def __init__(
        self,
        *,
        calls: int = FIM_ONE_RATE_CALLS,
        window_seconds: int = FIM_ONE_RATE_WINDOW,
        tools: Any = CONNECTOR_TOOLS,
        **kw: Any,
    ) -> None:
        super().__init__(calls=calls, window_seconds=window_seconds, tools=tools, **kw)
