"""Public API of the hook contract (DESIGN §3)."""

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
from hooks.registry import (
    BadHookResult,
    HookRegistry,
    HookTimeout,
    PostToolUseOutcome,
    PreToolUseOutcome,
    SessionStartOutcome,
    SideEffect,
)

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
