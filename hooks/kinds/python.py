"""``python`` hooks: a hook class or a function named by its dotted path.

The path is resolved when the declaration is saved (and again when a run builds its chain):
``package.module.Name``. A :class:`hooks.contract.Hook` subclass is instantiated with the
declaration's params and must have the declared point; a function ``f(ctx) -> HookResult``
(``async def`` or plain ``def``) is wrapped in a hook of the declared point (it takes no params).
``settings.HOOK_PYTHON_PREFIXES``, when set, limits which modules may be named.

Every call of a python hook runs in a hook thread (:mod:`hooks.kinds.offloop`), never on the
server's event loop: the class's ``should_trigger``, ``execute`` and ``on_blocked``, or the
function. Its code may block; its timeout still binds (docs/design.md §1.1), and other runs go on
meanwhile. Only the declaration's matcher is checked on the loop. Calls of one hook may run at the
same time in different threads: a hook class keeps no per-call state on its instance.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any, Unpack

from django.conf import settings

from hooks.contract import Hook, HookContext, HookPoint, HookResult
from hooks.kinds.base import Declared, DeclaredHook, MatchedHook, Matcher, parse_point
from hooks.kinds.offloop import hook_threads
from hooks.params import hook_params_errors


class CallableHook(DeclaredHook):
    """A function declared as a hook (``async def`` or ``def``), called in a hook thread."""

    kind = "python"

    def __init__(self, func: Callable[[HookContext], Any], *, path: str, **declared: Any) -> None:
        super().__init__(**declared)
        self.func = func
        self.path = path

    async def execute(self, ctx: HookContext) -> HookResult:
        return await hook_threads().run(self.func, ctx, key=self.path)


class ThreadedHook(MatchedHook):
    """A hook class declared by path, restricted to its declaration's matcher (checked on the
    loop); the instance's own ``should_trigger``, ``execute`` and ``on_blocked`` run in a hook
    thread. A call it does not trigger for answers an empty :class:`HookResult`, which the
    registry treats exactly as a skipped hook."""

    kind = "python"

    def __init__(self, inner: Hook, matcher: Matcher, *, path: str) -> None:
        super().__init__(inner, matcher)
        self.path = path
        self.observes_blocked_calls = inner.observes_blocked_calls  # type: ignore[misc]

    def should_trigger(self, ctx: HookContext) -> bool:
        return self.point is HookPoint.SESSION_START or self.matcher(ctx.tool_name)

    async def execute(self, ctx: HookContext) -> HookResult:
        return await hook_threads().run(self._triggered_execute, ctx, key=self.path)

    async def on_blocked(self, ctx: HookContext, *, blocked_by: str, error: str) -> None:
        tell = functools.partial(self._triggered_on_blocked, blocked_by=blocked_by, error=error)
        await hook_threads().run(tell, ctx, key=self.path)

    # In the hook thread, on its own event loop:

    async def _triggered_execute(self, ctx: HookContext) -> HookResult:
        if not await _answer(self.inner.should_trigger(ctx)):
            return HookResult()
        return await self.inner.execute(ctx)

    async def _triggered_on_blocked(self, ctx: HookContext, *, blocked_by: str, error: str) -> None:
        if await _answer(self.inner.should_trigger(ctx)):
            await self.inner.on_blocked(ctx, blocked_by=blocked_by, error=error)


async def _answer(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def resolve_path(path: Any) -> Any:
    if not isinstance(path, str) or "." not in path or not all(p.isidentifier() for p in path.split(".")):
        raise ValueError("path must be a dotted path such as 'package.module.Name'")
    prefixes = list(getattr(settings, "HOOK_PYTHON_PREFIXES", []) or [])
    if prefixes and not any(path == p or path.startswith(p.rstrip(".") + ".") for p in prefixes):
        raise ValueError(f"path {path!r} is outside HOOK_PYTHON_PREFIXES")
    module_name, _, attr = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the operator's module is broken: say which and why
        raise ValueError(f"module {module_name!r} cannot be imported: {type(exc).__name__}: {exc}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ValueError(f"module {module_name!r} has no {attr!r}") from None


def load_python_hook(
    *,
    path: str,
    params: dict[str, Any],
    **declared: Unpack[Declared],
) -> Hook:
    """The hook a python declaration describes, its matcher applied, run in hook threads; or
    ``ValueError``/``TypeError`` saying why not."""
    target = resolve_path(path)
    name, point, matcher = declared["name"], parse_point(declared["point"]), declared.get("matcher")
    tunables = {key: declared.get(key) for key in ("priority", "timeout", "on_error")}
    if inspect.isclass(target):
        if not issubclass(target, Hook) or inspect.isabstract(target):
            raise ValueError(f"{path!r} is not a concrete hook class")
        if getattr(target, "system", False):
            raise ValueError(f"{path!r} is a system hook and cannot be declared")
        if getattr(target, "point", None) is not point:
            raise ValueError(f"{path!r} is a {getattr(target, 'point', '?')} hook, not {point}")
        problems = hook_params_errors(target, params)
        if problems:
            raise ValueError("; ".join(problems[:5]))
        hook = target(**params)
        Hook.__init__(hook, **tunables)
        return ThreadedHook(hook, Matcher(matcher), path=path)
    # A function written in Python (not a builtin such as os.system), async or not.
    if inspect.iscoroutinefunction(target) or inspect.isfunction(target):
        if params:
            raise ValueError("a function hook takes no params")
        return CallableHook(target, path=path, name=name, point=point, matcher=matcher, **tunables)
    raise ValueError(f"{path!r} is neither a hook class nor a function")
