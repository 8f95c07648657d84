"""Harmless built-in tools: the current time and arithmetic."""

from __future__ import annotations

import ast
import datetime as dt
import operator
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agents.tools.base import Tool, ToolError, ToolSpec


class CurrentTime(Tool):
    reaches_outside = False
    spec = ToolSpec(
        name="current_time",
        title="Current time",
        description="The current date and time, in ISO 8601, in the given IANA time zone (default UTC).",
        parameters={
            "type": "object",
            "properties": {"timezone": {"type": "string", "description": "e.g. Asia/Shanghai"}},
            "additionalProperties": False,
        },
    )

    async def run(self, args: dict[str, Any]) -> Any:
        name = args.get("timezone") or "UTC"
        try:
            zone = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise ToolError(f"unknown time zone {name!r}") from None
        return {"timezone": name, "now": dt.datetime.now(zone).isoformat(timespec="seconds")}


_OPS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 1e6):
            raise ToolError("exponent too large")
        return _OPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.operand))
    raise ToolError("only numbers and + - * / // % ** ( ) are allowed")


class Calculator(Tool):
    reaches_outside = False
    spec = ToolSpec(
        name="calculator",
        title="Calculator",
        description="Evaluates an arithmetic expression such as '(1200 - 200) * 1.06'.",
        parameters={
            "type": "object",
            "properties": {"expression": {"type": "string", "maxLength": 200}},
            "required": ["expression"],
            "additionalProperties": False,
        },
    )

    async def run(self, args: dict[str, Any]) -> Any:
        try:
            tree = ast.parse(args["expression"], mode="eval")
        except SyntaxError:
            raise ToolError("not an arithmetic expression") from None
        try:
            return {"expression": args["expression"], "value": _evaluate(tree)}
        except ZeroDivisionError:
            raise ToolError("division by zero") from None
        except OverflowError:
            raise ToolError("the result is too large") from None


BUILTIN_TOOLS: dict[str, type[Tool]] = {"current_time": CurrentTime, "calculator": Calculator}
