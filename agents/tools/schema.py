"""JSON-schema checks for tool parameters and arguments."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from django.core.exceptions import ValidationError
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

EMPTY_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def check_parameters_schema(schema: Any) -> None:
    """Raise ``ValidationError`` unless ``schema`` is a valid JSON schema of an object."""
    if schema in (None, {}):
        return
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValidationError({"parameters_schema": 'must be a JSON schema with "type": "object"'})
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ValidationError({"parameters_schema": f"not a valid JSON schema: {exc.message}"}) from None


@lru_cache(maxsize=512)
def _validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json))


def argument_errors(schema: dict[str, Any], args: Any) -> list[str]:
    """Human-readable problems with ``args`` against ``schema`` (empty when valid)."""
    if not isinstance(args, dict):
        return ["arguments must be a JSON object"]
    # Validators are built once per distinct schema: this runs on every tool call.
    validator = _validator(json.dumps(schema or EMPTY_OBJECT_SCHEMA, sort_keys=True))
    problems = []
    for error in sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in error.absolute_path)
        problems.append(f"{where}: {error.message}" if where else error.message)
    return problems
