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
from jsonschema import Draft202012Validator

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


def _schema_validator(cls: type[Hook]) -> Draft202012Validator:
    validator = _VALIDATORS.get(cls)
    if validator is None:
        Draft202012Validator.check_schema(cls.params_schema)
        validator = _VALIDATORS[cls] = Draft202012Validator(cls.params_schema)
    return validator


_VALIDATORS: dict[type[Hook], Draft202012Validator] = {}


def hook_params_errors(cls: type[Hook], params: Any) -> list[str]:
    """What is wrong with ``params`` for ``cls`` against its ``params_schema`` (the tunables
    ``priority``, ``timeout`` and ``on_error`` apart, which every hook takes), in words an operator
    reads: ``"max_chars: 5 is less than the minimum of 100"``. Empty when they are valid."""
    if not isinstance(params, dict):
        return ["params must be an object"]
    own = {key: value for key, value in params.items() if key not in _TUNABLE}
    problems = []
    for error in sorted(_schema_validator(cls).iter_errors(own), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in error.absolute_path)
        problems.append(f"{where}: {error.message}" if where else error.message)
    return problems


def catalog_entries() -> list[dict[str, Any]]:
    """Every registered hook described for the admin and for declarations, by name: its point,
    ``description``, ``params_schema``, whether it is a system hook, its default ``priority``,
    ``timeout`` and ``on_error``, and ``alias_of`` for an old name kept working."""
    entries = []
    for name, cls in sorted(hook_catalog().items()):
        entries.append(
            {
                "name": name,
                "point": str(cls.point),
                "description": cls.description or (cls.__doc__ or "").strip().split("\n")[0],
                "params_schema": cls.params_schema,
                "system": bool(getattr(cls, "system", False)),
                "priority": cls.priority,
                "timeout": cls.timeout,
                "on_error": cls.on_error,
                "alias_of": getattr(cls, "alias_of", None),
            }
        )
    return entries


def hook_params_schema(name: str) -> dict[str, Any]:
    """The parameter schema of the catalog hook ``name``, or :class:`HookDeclarationError`."""
    cls = hook_catalog().get(name)
    if cls is None:
        raise HookDeclarationError(f"unknown hook {name!r}")
    return cls.params_schema


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
        problems = hook_params_errors(cls, params)
        if problems:
            raise HookDeclarationError(f"hook {name!r}: bad params: {'; '.join(problems[:5])}")
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


# --- the chain a run keeps (DESIGN §1.10) ---------------------------------------------------------
# A run's effective hook chain is resolved once, when the run is created, and stored on it as
# plain JSON; every registry the run uses (at start and after each resume) is rebuilt from that
# record, so editing an agent never changes a run in flight.
#
# {"v": 1,
#  "declared": [{"name", "params", "priority", "timeout", "on_error"}, …],   declaration order
#  "system": ["read_only_guard", "confirmation_gate", …],                     by name
#  "require_confirmation_for_all": bool}                                      the agent's flag
# or {"v": 1, "error": "…"} when the declaration could not be resolved (the run then fails closed).

CHAIN_VERSION = 1
_TUNABLE = ("priority", "timeout", "on_error")


def system_hook_classes() -> list[type[Hook]]:
    """The hooks every agent carries: registered classes marked ``system`` (the built-in read-only
    guard, the approval gate that the approvals app registers at start-up, …)."""
    return [cls for cls in hook_catalog().values() if getattr(cls, "system", False) is True]


def resolve_chain(declaration: Any, *, require_confirmation_for_all: bool = False) -> dict[str, Any]:
    """Resolve an agent's declaration into the record a run keeps, or raise
    :class:`HookDeclarationError` (every check of :func:`build_hooks` applies)."""
    hooks = build_hooks(declaration)
    declared = []
    for hook, (name, params) in zip(hooks, parse_declaration(declaration), strict=True):
        declared.append(
            {
                "name": name,
                "params": {k: v for k, v in params.items() if k not in _TUNABLE},
                "priority": hook.priority,
                "timeout": hook.timeout,
                "on_error": hook.on_error,
            }
        )
    return {
        "v": CHAIN_VERSION,
        "declared": declared,
        "system": [cls.name for cls in system_hook_classes()],
        "require_confirmation_for_all": bool(require_confirmation_for_all),
    }


def registry_from_chain(chain: Any) -> HookRegistry:
    """The registry a run's recorded chain describes, or :class:`HookDeclarationError` (a
    recorded error, a hook that no longer exists, bad params: the run fails closed)."""
    if not isinstance(chain, dict) or chain.get("v") != CHAIN_VERSION:
        raise HookDeclarationError("the run's recorded hook chain is missing or of an unknown version")
    if "error" in chain:
        raise HookDeclarationError(str(chain["error"]))
    catalog = hook_catalog()
    hooks: list[Hook] = []
    try:
        for item in chain["declared"]:
            cls = catalog.get(item["name"])
            if cls is None or getattr(cls, "system", False):
                raise HookDeclarationError(f"hook {item['name']!r} is not declarable any more")
            hook = cls(**item["params"])
            # The tunables as resolved at the run's start, checked as a declaration would be.
            Hook.__init__(hook, **{key: item[key] for key in _TUNABLE})
            check_below_gate(hook)
            hooks.append(hook)
        for name in chain["system"]:
            cls = catalog.get(name)
            if cls is None or not getattr(cls, "system", False):
                raise HookDeclarationError(f"system hook {name!r} is not registered")
            hooks.append(cls())
        return HookRegistry(hooks)
    except HookDeclarationError:
        raise
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise HookDeclarationError(f"the run's recorded hook chain cannot be rebuilt: {exc}") from exc
