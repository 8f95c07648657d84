"""The catalog of hook classes an agent may declare, and building a registry from a declaration.

An agent declares hooks in ``model_config_json["hooks"]["class_hooks"]`` as a list of names or
``{"name": …, "params": {…}}``. Names resolve against classes registered with :func:`register_hook`
(the built-ins in :mod:`hooks.builtin` and any module listed in ``settings.HOOK_MODULES``).
Building is all-or-nothing: any unknown name, bad parameter or import error raises
:class:`HookDeclarationError`, and the run fails before any LLM call (DESIGN §1.1).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from django.conf import settings

from hooks.contract import GATE_PRIORITY, Hook
from hooks.registry import HookRegistry

H = TypeVar("H", bound=type[Hook])

_CATALOG: dict[str, type[Hook]] = {}


class HookDeclarationError(ValueError):
    """An agent's hook declaration cannot be turned into hooks. ``str()`` names the problem."""


def register_hook(cls: H) -> H:
    """Class decorator: make a hook class declarable by its ``name``."""
    name = cls.name
    if not name:
        raise TypeError(f"{cls.__qualname__} needs a 'name' to be registered")
    existing = _CATALOG.get(name)
    if existing is not None and existing is not cls:
        raise TypeError(f"hook name {name!r} is already registered by {existing.__qualname__}")
    _CATALOG[name] = cls
    return cls


def _load_modules() -> None:
    for module in ("hooks.builtin", *getattr(settings, "HOOK_MODULES", ())):
        try:
            importlib.import_module(module)
        except Exception as exc:  # an operator's hook module is broken: say which and why
            raise HookDeclarationError(f"hook module {module!r} failed to import: {exc}") from exc


def hook_catalog() -> Mapping[str, type[Hook]]:
    _load_modules()
    return dict(_CATALOG)


def parse_declaration(declaration: Any) -> list[tuple[str, dict[str, Any]]]:
    """Check the shape of a ``class_hooks`` list; return ``(name, params)`` pairs."""
    if declaration is None:
        return []
    if not isinstance(declaration, list):
        raise HookDeclarationError("hooks.class_hooks must be a list of names or {name, params} objects")
    parsed = []
    for index, item in enumerate(declaration):
        if isinstance(item, str):
            parsed.append((item, {}))
        elif isinstance(item, dict) and isinstance(item.get("name"), str):
            params = item.get("params", {})
            unknown = set(item) - {"name", "params"}
            if unknown:
                raise HookDeclarationError(f"hooks.class_hooks[{index}] has unknown keys: {sorted(unknown)}")
            if not isinstance(params, dict):
                raise HookDeclarationError(f"hooks.class_hooks[{index}].params must be an object")
            parsed.append((item["name"], params))
        else:
            raise HookDeclarationError(f"hooks.class_hooks[{index}] must be a name or {{name, params}}")
    return parsed


def build_hooks(declaration: Any) -> list[Hook]:
    """Instantiate every declared hook, or raise :class:`HookDeclarationError`."""
    catalog = hook_catalog()
    hooks: list[Hook] = []
    for name, params in parse_declaration(declaration):
        cls = catalog.get(name)
        if cls is None:
            known = ", ".join(sorted(n for n, c in catalog.items() if not getattr(c, "system", False)))
            raise HookDeclarationError(f"unknown hook {name!r} (known hooks: {known})")
        if getattr(cls, "system", False):
            raise HookDeclarationError(f"hook {name!r} is attached automatically and cannot be declared")
        try:
            hook = cls(**params)
        except (TypeError, ValueError, OverflowError) as exc:
            raise HookDeclarationError(f"hook {name!r}: bad params: {exc}") from exc
        check_below_gate(hook)
        hooks.append(hook)
    return hooks


def check_below_gate(hook: Hook) -> None:
    """Refuse a declared hook that would run at or after the approval gate (DESIGN §1.10): the
    gate must see the final arguments, and nothing may change them once a human approved."""
    priority = hook.priority
    if not isinstance(priority, int | float) or not priority < GATE_PRIORITY:
        raise HookDeclarationError(
            f"hook {hook.hook_name!r}: priority {priority!r} is not below the approval gate's "
            f"({GATE_PRIORITY}); nothing may run after the gate"
        )


def build_registry(declaration: Any, *, system_hooks: Iterable[Hook] = ()) -> HookRegistry:
    """The registry for one run: declared hooks plus the system hooks every agent carries.

    Guarantee: no declared PreToolUse hook runs at or after the approval gate."""
    try:
        return HookRegistry([*build_hooks(declaration), *system_hooks])
    except HookDeclarationError:
        raise
    except (TypeError, ValueError) as exc:
        raise HookDeclarationError(str(exc)) from exc
