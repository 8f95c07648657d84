"""What running a chain answers: one outcome per point, trace notes attributed to their hook, and
the two failures the registry names itself (a timeout, an answer that is not a ``HookResult``).

These are plain values: :mod:`hooks.registry` builds them, the engine reads them, and hook kinds
raise :class:`HookTimeout` (a python hook refused for its runaways, :mod:`hooks.kinds.offloop`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hooks.contract import SuspendRun


@dataclass(slots=True, frozen=True)
class SideEffect:
    """One note for the run's trace, attributed to the hook that produced it.

    ``shadow``: set on the note of a hook in shadow mode that would have changed the call
    (:mod:`hooks.shadow`): ``{"decision": ..., "declaration": <id or None>, "source": ...}``. Only
    the registry sets it, from a :class:`~hooks.shadow.ShadowHook`'s answer: no hook can forge one."""

    hook: str
    message: str
    failure: bool = False
    shadow: dict[str, Any] | None = None


@dataclass(slots=True)
class PreToolUseOutcome:
    """``allow`` and the final ``tool_args``; when blocked, ``error`` is the LLM's observation.

    ``suspension`` is set when a hook could not answer yet: the call is neither allowed nor
    blocked, and the engine parks the run.

    ``approved_args_sha256`` is the hash of the arguments a human approved, taken only from a
    system hook's :attr:`HookResult.approved_args_sha256` (the approval gate's), never from
    ``metadata``; ``None`` when no approval was involved. The engine refuses to run arguments
    whose hash differs. ``confirmation_request_id`` (the request that approved) comes the same way.

    ``requires_confirmation`` is the call's final need for a human's approval (the engine's facts,
    or a hook that asked with ``HookResult(require_confirmation=True)``: those hooks are named in
    ``confirmation_requested_by``).
    """

    allow: bool
    tool_args: dict[str, Any]
    error: str | None = None
    blocked_by: str | None = None
    suspension: SuspendRun | None = None
    side_effects: list[SideEffect] = field(default_factory=list)
    approved_args_sha256: str | None = None
    requires_confirmation: bool = False
    confirmation_requested_by: list[str] = field(default_factory=list)
    confirmation_request_id: str | None = None

    @property
    def suspended(self) -> bool:
        return self.suspension is not None


@dataclass(slots=True)
class PostToolUseOutcome:
    """The observation after every PostToolUse hook; ``failed_hooks`` names hooks that failed."""

    result: Any
    side_effects: list[SideEffect] = field(default_factory=list)
    failed_hooks: list[str] = field(default_factory=list)


@dataclass(slots=True)
class SessionStartOutcome:
    """``additional_context`` pieces in hook order; ``ok=False`` means the run must not start."""

    ok: bool
    additional_context: list[str] = field(default_factory=list)
    error: str | None = None
    failed_by: str | None = None
    side_effects: list[SideEffect] = field(default_factory=list)


# The registry builds the outcome of a call that went through field by field, without the
# dataclass __init__ (it runs on every tool call): fail at import if the fields change.
assert tuple(PreToolUseOutcome.__dataclass_fields__) == (
    "allow",
    "tool_args",
    "error",
    "blocked_by",
    "suspension",
    "side_effects",
    "approved_args_sha256",
    "requires_confirmation",
    "confirmation_requested_by",
    "confirmation_request_id",
), "update the field-by-field PreToolUseOutcome in hooks.registry.run_pre_tool_use"
assert tuple(PostToolUseOutcome.__dataclass_fields__) == ("result", "side_effects", "failed_hooks"), (
    "update the field-by-field PostToolUseOutcome in hooks.registry.run_post_tool_use"
)


class HookTimeout(Exception):
    """A hook did not finish within its timeout (or was not started because earlier calls of it
    are still running past theirs). Never read as ``on_error="allow"`` for a hook that asks
    humans (the approval gate)."""


class BadHookResult(TypeError):
    """A hook answered something that is not a :class:`HookResult`."""
