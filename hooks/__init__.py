"""Public API of the hook contract (docs/design.md §3)."""

from hooks.contract import (
    Hook,
    HookContext,
    HookPoint,
    HookResult,
    OnError,
    PostToolUseHook,
    PreToolUseHook,
    RunEvents,
    SessionStartHook,
    SuspendRun,
)
from hooks.outcomes import (
    BadHookResult,
    HookTimeout,
    PostToolUseOutcome,
    PreToolUseOutcome,
    SessionStartOutcome,
    SideEffect,
)
from hooks.registry import HookRegistry

__all__ = [
    "BadHookResult",
    "Hook",
    "HookContext",
    "HookPoint",
    "HookRegistry",
    "HookResult",
    "HookTimeout",
    "OnError",
    "PostToolUseHook",
    "PostToolUseOutcome",
    "PreToolUseHook",
    "PreToolUseOutcome",
    "RunEvents",
    "SessionStartHook",
    "SessionStartOutcome",
    "SideEffect",
    "SuspendRun",
]
