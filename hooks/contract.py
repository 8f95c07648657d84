"""The hook contract: what a hook receives, what it returns, and the base classes it subclasses.

This module is the public surface re-exported by :mod:`hooks`. Hooks are small objects with a
``name``, a ``priority`` (lower runs earlier), a ``timeout`` in seconds and an ``on_error`` policy;
they may filter with ``should_trigger`` and do their work in ``async execute``. They are run only by
:class:`hooks.registry.HookRegistry`, which enforces ordering, chaining, timeouts and failing closed.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

OnError = Literal["block", "allow"]

GATE_PRIORITY = 1_000_000
"""The approval gate's priority. It runs last among PreToolUse hooks: nothing may run after it, so
a declared hook's priority must be strictly below (refused otherwise when the agent is saved and
when a registry is built)."""


class Band(enum.IntEnum):
    """Where a hook runs in its point's chain, before its priority counts (docs/design.md §1.12): the
    registry orders hooks by ``(band, priority)``.

    ``GUARD``: the platform's system guards (the read-only guard), and hooks whose class only
    records and changes nothing (the audit log: it must digest the tool's own result, before any
    rewrite). ``AGENT``: the hooks an agent declares. ``ENFORCED``: the hooks its organisation
    enforces — they see the arguments that will run and the observation the model will read, so
    no agent hook can undo what they checked. ``GATE``: the approval gate, always last.

    A declaration's band comes from where it was declared (``hooks.catalog.registry_from_chain``),
    never from the declarer: a hook class may only ask to run *earlier* (``GUARD``)."""

    GUARD = 0
    AGENT = 1
    ENFORCED = 2
    GATE = 3


class HookPoint(enum.StrEnum):
    PRE_TOOL_USE = "PreToolUse"
    POST_TOOL_USE = "PostToolUse"
    SESSION_START = "SessionStart"


class RunEvents(Protocol):
    """Where a *system* hook publishes structured run events (the approval gate's
    ``approval.pending``): the registry hands it to system hooks only, as
    :attr:`HookContext.events`, so a declared hook can never forge one."""

    async def publish(self, type_: str, payload: dict[str, Any], *, at_once: bool = True) -> None:
        """Emit an event; ``at_once`` stores and pushes it now, otherwise it goes with the run's
        next write."""


@dataclass(slots=True, kw_only=True)
class HookContext:
    """What a hook sees. The engine fills ``metadata`` (``org_id``, ``conversation_id``, ``run_id``,
    ``tool_call_id``, ``requires_confirmation``, ``execution_path``, …).

    ``metadata`` holds JSON-able facts only (command and http hooks receive it as JSON); every hook
    can write it, so nothing in it is trusted by the platform.

    The registry stamps ``hook_point``; when a hook rewrites arguments or the result, the next hook
    receives a copy carrying them, and the caller's context keeps the originals.

    ``requires_confirmation`` (PreToolUse) says whether the call will need a human's approval:
    the registry sets it before every hook from the engine's facts (``metadata``'s
    ``requires_confirmation`` and ``require_confirmation_for_all``) and from every earlier hook
    that answered ``HookResult(require_confirmation=True)``. A hook can raise it only through its
    result: whatever a hook writes here is overwritten before the next one runs, so no hook can
    lower it. The approval gate reads it.

    Two fields travel outside ``metadata`` because the platform relies on them:
    ``confirmation_request_id`` (PostToolUse) names the approval request that let this call run,
    set by the engine from the gate's answer (:attr:`PreToolUseOutcome.confirmation_request_id`);
    ``events`` is given by the registry to system hooks only (``None`` for every other hook);
    ``tool_schema`` is the tool's parameters (a JSON schema) as the engine knows them, read by the
    hooks that judge arguments (:mod:`hooks.conditions`: which texts are numbers, which fields the
    tool has); ``None`` where no tool is known. It is not sent to command or http hooks.
    """

    tool_name: str = ""
    tool_args: dict[str, Any] = field(default_factory=dict)
    agent_id: int | None = None
    user_id: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    tool_result: Any = None
    hook_point: HookPoint | None = None
    requires_confirmation: bool = False
    confirmation_request_id: str | None = None
    events: RunEvents | None = None
    tool_schema: Mapping[str, Any] | None = None


def needs_approval(ctx: HookContext) -> bool:
    """Whether the call ``ctx`` describes needs a human's approval before it runs: its tool is
    flagged (``metadata["requires_confirmation"]``, which the engine also sets for a call a person
    was already asked about), its agent confirms everything (``require_confirmation_for_all``), or
    an earlier hook asked (``ctx.requires_confirmation``, folded by the registry).

    The one predicate: the registry starts a PreToolUse chain from it and the approval gate
    triggers on it, so that the two never disagree about a call. It can only add the need."""
    meta = ctx.metadata
    return bool(
        ctx.requires_confirmation
        or meta.get("requires_confirmation")
        or meta.get("require_confirmation_for_all")
    )


@dataclass(slots=True, kw_only=True)
class HookResult:
    """What a hook answers.

    ``allow`` matters only for PreToolUse; ``modified_args`` rewrites the arguments seen by later
    hooks and by the tool; ``modified_result`` rewrites a PostToolUse observation;
    ``additional_context`` is a SessionStart contribution to the system prompt; ``side_effects``
    are short human-readable notes merged into the run's trace.

    ``approved_args_sha256`` is the approval gate's answer to the engine: the SHA-256 of the
    arguments a human approved. The registry honours it only from a *system* hook (one the
    platform attaches; declared hooks never are) and reports it as
    :attr:`PreToolUseOutcome.approved_args_sha256`; from any other hook it is ignored. The engine
    refuses to run arguments with another hash. It never travels in ``metadata``, which every hook
    can write. ``confirmation_request_id`` (the approved request) is honoured the same way and
    reaches the PostToolUse hooks as :attr:`HookContext.confirmation_request_id`.

    ``require_confirmation=True`` (PreToolUse, any hook) asks for a human's approval of this call
    although its tool is not flagged ``requires_confirmation``: the registry folds it into
    :attr:`HookContext.requires_confirmation` for the later hooks, the approval gate (last) then
    treats the call as one that needs approval, and the outcome reports it
    (:attr:`PreToolUseOutcome.requires_confirmation`, with the hooks that asked). It only ever
    adds a human in the loop: ``False`` (the default) never removes one, and a blocked call stays
    blocked. ``confirmation_reason`` says why, for the trace. Ignored at the other points.
    """

    allow: bool = True
    error: str | None = None
    modified_args: dict[str, Any] | None = None
    modified_result: Any | None = None
    additional_context: str | None = None
    side_effects: list[str] = field(default_factory=list)
    approved_args_sha256: str | None = None
    require_confirmation: bool = False
    confirmation_reason: str | None = None
    confirmation_request_id: str | None = None


class SuspendRun(Exception):
    """Raised by a PreToolUse hook that cannot answer yet (the approval gate while nobody has
    decided). The registry passes it through as a distinct *suspended* outcome; the engine then
    checkpoints and parks the run. It is the only exception that is not read as a failure, and only
    at the PreToolUse point: raised anywhere else it fails closed like any other error.
    """

    def __init__(
        self,
        reason: str,
        *,
        detail: dict[str, Any] | None = None,
        still_waiting: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail or {}
        #: Asked once the run is parked. ``False`` means the awaited answer arrived while the run
        #: was being parked (nobody could resume it then), so the engine resumes it at once.
        self.still_waiting = still_waiting


class Hook(abc.ABC):
    """Base of the three hook kinds. Subclass one of them, not this.

    Class attributes are the defaults; a declaration may override ``priority``, ``timeout`` and
    ``on_error`` for one instance through the constructor.

    ``timeout`` bounds the hook's wall time, from ``should_trigger`` to its answer (docs/design.md §1.1):
    a hook that answers after it has timed out, and its answer is ignored. A hook run on the
    event loop cannot be interrupted while it blocks it, so code that may block is declared as a
    python hook, which runs in a hook thread (:mod:`hooks.kinds.offloop`).

    ``description`` (one line for operators) and ``params_schema`` (the JSON schema of the
    constructor's keyword parameters other than the three above) describe a declarable hook in
    the catalog: declarations are validated against the schema before the class is built, and the
    admin builds its forms from it.

    ``observes_blocked_calls``: a hook (at any point) that also wants to hear of PreToolUse calls
    that were blocked — by a hook's ``allow=False`` or by one that failed closed — sets it and
    implements :meth:`on_blocked` (an audit log records blocked calls this way). Observers run
    after the block, under their own timeout; what they do or raise never unblocks the call.
    """

    point: ClassVar[HookPoint]
    name: ClassVar[str] = ""
    #: attached by the platform to every agent; cannot be declared or removed by an agent
    system: ClassVar[bool] = False
    description: ClassVar[str] = ""
    #: the default accepts any object: a class that does not describe its parameters checks them
    #: in its constructor (every built-in describes its own)
    params_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    observes_blocked_calls: ClassVar[bool] = False
    #: asks a human (the approval gate): left out of an eval's sandboxed chain, which never
    #: opens an approval request (docs/design.md §1.2)
    asks_humans: ClassVar[bool] = False
    #: see :class:`Band`; set per instance by the chain's builder for declared hooks
    band: int = Band.AGENT
    priority: int = 100
    timeout: float = 5.0
    on_error: OnError = "block"

    def __init__(
        self,
        *,
        priority: int | None = None,
        timeout: float | None = None,
        on_error: OnError | None = None,
    ) -> None:
        if priority is not None:
            self.priority = int(priority)
        if timeout is not None:
            if not timeout > 0:
                raise ValueError(f"hook {self.hook_name!r}: timeout must be a positive number of seconds")
            self.timeout = float(timeout)
        if on_error is not None:
            if on_error not in ("block", "allow"):
                raise ValueError(f"hook {self.hook_name!r}: on_error must be 'block' or 'allow'")
            self.on_error = on_error

    @property
    def hook_name(self) -> str:
        return self.name or type(self).__name__

    def should_trigger(self, ctx: HookContext) -> bool:
        """Whether :meth:`execute` runs for this context. May also be ``async``."""
        return True

    @abc.abstractmethod
    async def execute(self, ctx: HookContext) -> HookResult:
        """Do the hook's work. Exceptions, timeouts and non-``HookResult`` answers fail closed."""

    async def on_blocked(self, ctx: HookContext, *, blocked_by: str, error: str) -> None:
        """Called (when ``observes_blocked_calls``) for a PreToolUse call that ``blocked_by`` (a
        hook's name) refused with ``error`` (what the LLM is told). ``ctx`` carries the arguments
        as they were when the call was blocked. The default does nothing."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.hook_name} point={self.point} priority={self.priority}>"


class PreToolUseHook(Hook):
    """Runs before a tool call; may block it (``allow=False``) or rewrite its arguments."""

    point = HookPoint.PRE_TOOL_USE


class PostToolUseHook(Hook):
    """Runs after a tool call; may rewrite the observation (``modified_result``)."""

    point = HookPoint.POST_TOOL_USE


class SessionStartHook(Hook):
    """Runs once per run before its first LLM call; may add ``additional_context``."""

    point = HookPoint.SESSION_START
