"""``python`` hooks: a hook class or an async callable named by its dotted path.

The path is resolved when the declaration is saved (and again when a run builds its chain):
``package.module.Name``. A :class:`hooks.contract.Hook` subclass is instantiated with the
declaration's params and must have the declared point; an ``async def f(ctx) -> HookResult`` is
wrapped in a hook of the declared point (it takes no params). ``settings.HOOK_PYTHON_PREFIXES``, when
set, limits which modules may be named.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

from hooks.contract import Hook, HookContext, HookPoint, HookResult, OnError
from hooks.kinds.base import DeclaredHook, parse_point


class CallableHook(DeclaredHook):
    """An async callable declared as a hook."""

    kind = "python"

    def __init__(self, func: Callable[[HookContext], Awaitable[HookResult]], **declared: Any) -> None:
        super().__init__(**declared)
        self.func = func

    async def execute(self, ctx: HookContext) -> HookResult:
        return await self.func(ctx)


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
    name: str,
    point: str | HookPoint,
    matcher: str | None = None,
    priority: int | None = None,
    timeout: float | None = None,
    on_error: OnError | None = None,
) -> Hook:
    """The hook a python declaration describes, or ``ValueError``/``TypeError`` saying why not.
    (The caller applies the matcher to a hook class's instance.)"""
    target = resolve_path(path)
    point = parse_point(point)
    tunables = {"priority": priority, "timeout": timeout, "on_error": on_error}
    if inspect.isclass(target):
        if not issubclass(target, Hook) or inspect.isabstract(target):
            raise ValueError(f"{path!r} is not a concrete hook class")
        if getattr(target, "system", False):
            raise ValueError(f"{path!r} is a system hook and cannot be declared")
        if getattr(target, "point", None) is not point:
            raise ValueError(f"{path!r} is a {getattr(target, 'point', '?')} hook, not {point}")
        from hooks.catalog import hook_params_errors

        problems = hook_params_errors(target, params)
        if problems:
            raise ValueError("; ".join(problems[:5]))
        hook = target(**params)
        Hook.__init__(hook, **tunables)
        return hook
    if inspect.iscoroutinefunction(target):
        if params:
            raise ValueError("an async callable takes no params")
        return CallableHook(target, name=name, point=point, matcher=matcher, **tunables)
    raise ValueError(f"{path!r} is neither a hook class nor an 'async def' callable")
