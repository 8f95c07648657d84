"""Checking a hook class's parameters against its ``params_schema`` (JSON Schema 2020-12).

Shared by the catalog (declared catalog hooks) and the python kind (hook classes named by path):
both refuse the same parameters in the same words.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from hooks.contract import Hook

TUNABLE = ("priority", "timeout", "on_error")
"""The parameters every hook takes (:class:`hooks.contract.Hook`), outside its ``params_schema``."""

_VALIDATORS: dict[type[Hook], Draft202012Validator] = {}


def _schema_validator(cls: type[Hook]) -> Draft202012Validator:
    validator = _VALIDATORS.get(cls)
    if validator is None:
        Draft202012Validator.check_schema(cls.params_schema)
        validator = _VALIDATORS[cls] = Draft202012Validator(cls.params_schema)
    return validator


def hook_params_errors(cls: type[Hook], params: Any) -> list[str]:
    """What is wrong with ``params`` for ``cls`` against its ``params_schema`` (the tunables
    ``priority``, ``timeout`` and ``on_error`` apart, which every hook takes), in words an operator
    reads: ``"max_chars: 5 is less than the minimum of 100"``. Empty when they are valid."""
    if not isinstance(params, dict):
        return ["params must be an object"]
    own = {key: value for key, value in params.items() if key not in TUNABLE}
    problems = []
    for error in sorted(_schema_validator(cls).iter_errors(own), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in error.absolute_path)
        problems.append(f"{where}: {error.message}" if where else error.message)
    return problems
