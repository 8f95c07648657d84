"""A deterministic provider driven by a script in the agent's ``model_config_json``.

Used by the demo and the tests, and handy for rehearsing a policy without a model::

    {"provider": "scripted", "script": {"turns": [
        {"tool_calls": [{"name": "oa__purchase_list", "arguments": {}}]},
        {"tool_calls": [{"name": "oa__purchase_pay", "arguments": {"purchase_id": "$last.0.id"}}]},
        {"content": "Done: {last}"}
    ]}}

or ``{"rules": [{"match": "<regex on the user's message>", "turns": [...]}, …]}`` (first match
wins, case-insensitive; a rule without ``match`` is the fallback). The turn played is the number
of assistant messages since the last user message, so a resumed run continues where it stopped.

References, to the last tool observation (``last``: parsed as JSON when it is JSON, with a path
of keys and list indexes) and to the named groups of the patterns that matched (``match``: the
rule's ``match`` and the chosen case's ``when``):

* a string argument ``"$last"``, ``"$last.<path>"`` or ``"$match.<name>"`` takes that value
  (``None`` when it is not there); a ``|number`` suffix reads it as a number ("60,000" → 60000,
  ``None`` when it is no number);
* in ``content``, ``{last}`` is the last observation's text as is; ``{last.<path>}`` and
  ``{match.<name>}`` are replaced by the value's text, formatted by an optional spec for numbers
  (``{last.amount:,.2f}`` → "1,200.00"); a value that is not there is replaced by nothing;
* ``"each": {"in": "last" | "last.<path>", "line": "- {item.id}: {item.amount:,.2f}", "join":
  "\\n"}`` renders one line per element of that list (``{item…}`` is the element), put where
  ``content`` says ``{each}``.

A turn may instead be ``{"choose": [case, …]}``: the first case whose ``when`` holds is played
(``when`` maps references — ``"last"``, ``"last.<path>"``, ``"match.<name>"`` — to regexes, all of
which must be found, case-insensitively, in the reference's text; a reference that is not there
holds none; a case without ``when`` always holds). That is how a script reacts to what a tool
answered: an empty list (``{"last": "^\\\\[\\\\]$"}``), a refusal, a rejection by a person.

``"delay": <seconds>`` (at most :data:`MAX_DELAY_SECONDS`) makes a turn answer that much later,
as a slow model would: fault drills use it to stop a process while a model call is in flight.
"""

from __future__ import annotations

import asyncio
import json
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from agents.llm.base import DeltaCallback, LLMConfigError, LLMProvider, LLMResponse, ToolCall

MAX_DELAY_SECONDS = 60.0
NOTHING_MORE = "I have nothing more to do."

_MISSING = object()
_PLACEHOLDER_RE = re.compile(r"\{(last|match|item|each)((?:\.[^{}:\s.]+)*)(?::([^{}]*))?\}")
"""``{last}``, ``{last.0.amount:,.2f}``, ``{match.who}``, ``{item.id}``, ``{each}``."""
_REFERENCE_RE = re.compile(r"^(last|match)((?:\.[^.\s]+)*)$")
"""A reference in ``when`` or after ``$`` in an argument: ``last``, ``last.0.id``, ``match.who``."""


def check_script(script: Any) -> None:
    """Raise :class:`LLMConfigError` unless ``script`` is a usable script."""
    if not isinstance(script, dict) or not (("turns" in script) ^ ("rules" in script)):
        raise LLMConfigError('script must be an object with either "turns" or "rules"')
    rules = script.get("rules", [{"turns": script.get("turns")}])
    if not isinstance(rules, list) or not rules:
        raise LLMConfigError("script.rules must be a non-empty list")
    for r, rule in enumerate(rules):
        if not isinstance(rule, dict) or not isinstance(rule.get("turns"), list) or not rule["turns"]:
            raise LLMConfigError(f"script rule {r} needs a non-empty list of turns")
        if "match" in rule:
            _check_pattern(rule["match"], f"script rule {r}: bad match pattern")
        for t, turn in enumerate(rule["turns"]):
            if isinstance(turn, dict) and "choose" in turn:
                cases = turn["choose"]
                if not isinstance(cases, list) or not cases:
                    raise LLMConfigError(f"script turn {t}: choose needs a non-empty list of cases")
                for c, case in enumerate(cases):
                    _check_turn(case, f"script turn {t}, case {c}", case=True)
            else:
                _check_turn(turn, f"script turn {t}")


def _check_pattern(pattern: Any, problem: str) -> None:
    try:
        re.compile(pattern)
    except (re.error, TypeError) as exc:
        raise LLMConfigError(f"{problem}: {exc}") from None


def _check_turn(turn: Any, where: str, *, case: bool = False) -> None:
    if not isinstance(turn, dict) or not ({"content", "tool_calls"} & set(turn)):
        raise LLMConfigError(f"{where}: needs content or tool_calls")
    delay = turn.get("delay", 0)
    sane = isinstance(delay, int | float) and not isinstance(delay, bool)
    if not sane or not 0 <= delay <= MAX_DELAY_SECONDS:
        raise LLMConfigError(f"{where}: delay must be between 0 and {MAX_DELAY_SECONDS:g} seconds")
    calls = turn.get("tool_calls", [])
    if not isinstance(calls, list):
        raise LLMConfigError(f"{where}: tool_calls must be a list")
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise LLMConfigError(f"{where}: every tool call needs a name")
    if "when" in turn:
        when = turn["when"]
        if not case or not isinstance(when, dict) or not when:
            raise LLMConfigError(f"{where}: when belongs to a case of choose and maps references to patterns")
        for reference, pattern in when.items():
            if not _REFERENCE_RE.match(str(reference)):
                raise LLMConfigError(
                    f'{where}: when: {reference!r} is not "last", "last.<path>" or "match.<name>"'
                )
            _check_pattern(pattern, f"{where}: when: bad pattern for {reference}")
    if "each" in turn:
        each = turn["each"]
        good = (
            isinstance(each, dict)
            and isinstance(each.get("line"), str)
            and isinstance(each.get("join", "\n"), str)
            and _REFERENCE_RE.match(str(each.get("in", "last"))) is not None
        )
        if not good:
            raise LLMConfigError(
                f'{where}: each needs "line" (text) and may have "in" (a reference) and "join"'
            )


class ScriptedProvider(LLMProvider):
    name = "scripted"

    def __init__(self, script: dict[str, Any]) -> None:
        check_script(script)
        self.script = script

    async def complete(
        self,
        *,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse:
        user_index = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        user_text = messages[user_index].get("content") or "" if user_index >= 0 else ""
        played = sum(1 for m in messages[user_index + 1 :] if m.get("role") == "assistant")
        turns, groups = self._turns_for(str(user_text))
        last = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "tool"), "")
        scope = _Scope(last, groups)
        if played >= len(turns):
            turn: dict[str, Any] = {"content": NOTHING_MORE}
        else:
            turn = _chosen(turns[played], scope)
        if turn.get("delay"):
            await asyncio.sleep(float(turn["delay"]))
        content = _render(str(turn.get("content") or ""), scope, each=turn.get("each"))
        if content and on_delta is not None:
            for piece in re.findall(r"\S+\s*", content):
                await on_delta(piece)
        calls = [
            ToolCall(
                id=f"call_{len(messages)}_{n}",
                name=call["name"],
                arguments=_resolve(call.get("arguments", {}), scope),
            )
            for n, call in enumerate(turn.get("tool_calls", []))
        ]
        return LLMResponse(content=content, tool_calls=calls)

    def _turns_for(self, user_text: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The turns of the rule the user's message selects, and its pattern's named groups."""
        if "turns" in self.script:
            return self.script["turns"], {}
        for rule in self.script["rules"]:
            if "match" not in rule:
                return rule["turns"], {}
            found = re.search(rule["match"], user_text, re.IGNORECASE)
            if found is not None:
                return rule["turns"], found.groupdict()
        return [{"content": "I can't help with that."}], {}


class _Scope:
    """What references read: the last observation (its text, and its JSON when it is JSON) and
    the named groups of the patterns that matched so far."""

    def __init__(self, last: str, groups: dict[str, Any]) -> None:
        self.last_text = last
        try:
            self.last: Any = json.loads(last)
        except ValueError:
            self.last = last
        self.groups = dict(groups)

    def get(self, root: str, path: str, item: Any = _MISSING) -> Any:
        """The value of ``root`` + ``path`` (``".0.id"``), or ``_MISSING``."""
        keys = [key for key in path.split(".") if key]
        if root == "match":
            if len(keys) != 1:
                return _MISSING
            value = self.groups.get(keys[0])
            return _MISSING if value is None else value
        current = item if root == "item" else self.last
        if current is _MISSING:
            return _MISSING
        for key in keys:
            try:
                current = current[int(key)] if isinstance(current, list) else current[key]
            except (KeyError, IndexError, ValueError, TypeError):
                return _MISSING
        return current


def _text(value: Any, spec: str | None = None) -> str:
    """A value as text: strings as they are, numbers formatted by ``spec`` (when it suits them),
    anything else as JSON; nothing for a missing value."""
    if value is _MISSING or value is None:
        return ""
    if spec and isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        try:
            return format(value, spec)
        except (ValueError, TypeError):
            pass
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _chosen(turn: dict[str, Any], scope: _Scope) -> dict[str, Any]:
    """The turn itself, or for a ``choose`` turn its first case whose ``when`` holds (its named
    groups join the scope's); a choice no case fits ends the turns."""
    if "choose" not in turn:
        return turn
    for case in turn["choose"]:
        groups: dict[str, Any] = {}
        for reference, pattern in case.get("when", {}).items():
            root, path = _REFERENCE_RE.match(reference).groups()  # type: ignore[union-attr]
            value = scope.last_text if (root, path) == ("last", "") else scope.get(root, path)
            found = None if value is _MISSING else re.search(pattern, _text(value), re.IGNORECASE)
            if found is None:
                break
            groups.update(found.groupdict())
        else:
            scope.groups.update({k: v for k, v in groups.items() if v is not None})
            return case
    return {"content": NOTHING_MORE}


def _render(content: str, scope: _Scope, *, each: dict[str, Any] | None = None, item: Any = _MISSING) -> str:
    def fill(found: re.Match[str]) -> str:
        root, path, spec = found.group(1), found.group(2), found.group(3)
        if root == "each":
            return _lines(each, scope) if each and not path else found.group(0)
        if root == "item" and item is _MISSING:
            return found.group(0)
        if (root, path, spec) == ("last", "", None):
            return scope.last_text
        return _text(scope.get(root, path, item), spec)

    return _PLACEHOLDER_RE.sub(fill, content)


def _lines(each: dict[str, Any], scope: _Scope) -> str:
    root, path = _REFERENCE_RE.match(str(each.get("in", "last"))).groups()  # type: ignore[union-attr]
    items = scope.get(root, path)
    if not isinstance(items, list):
        return ""
    return str(each.get("join", "\n")).join(_render(each["line"], scope, item=item) for item in items)


def _number(value: Any) -> int | float | None:
    """A number, from a number or a text spelling one ("60,000", " 1200.50 "); else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    try:
        number = Decimal(str(value).replace(",", "").strip())
    except (InvalidOperation, ValueError):
        return None
    if not number.is_finite():
        return None
    return int(number) if number == number.to_integral_value() else float(number)


def _resolve(value: Any, scope: _Scope) -> Any:
    if isinstance(value, dict):
        return {k: _resolve(v, scope) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, scope) for v in value]
    if isinstance(value, str) and value.startswith("$"):
        reference, _, conversion = value[1:].partition("|")
        found = _REFERENCE_RE.match(reference)
        if found is None or conversion not in ("", "number"):
            return value
        resolved = scope.get(*found.groups())
        if resolved is _MISSING:
            return None
        return _number(resolved) if conversion == "number" else resolved
    return value
