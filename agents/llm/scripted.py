"""A deterministic provider driven by a script in the agent's ``model_config_json``.

Used by the demo and the tests, and handy for rehearsing a policy without a model::

    {"provider": "scripted", "script": {"turns": [
        {"tool_calls": [{"name": "oa__purchase_list", "arguments": {}}]},
        {"tool_calls": [{"name": "oa__purchase_pay", "arguments": {"purchase_id": "$last.0.id"}}]},
        {"content": "Done: {last}"}
    ]}}

or ``{"rules": [{"match": "<regex on the user's message>", "turns": [...]}, …]}`` (first match
wins; a rule without ``match`` is the fallback). The turn played is the number of assistant
messages since the last user message, so a resumed run continues where it stopped.

In a turn, a string argument ``"$last"`` or ``"$last.<path>"`` takes the last tool observation
(parsed as JSON when it is JSON; a path of keys and list indexes); ``{last}`` in ``content`` is
replaced by the last observation's text. ``"delay": <seconds>`` (at most
:data:`MAX_DELAY_SECONDS`) makes a turn answer that much later, as a slow model would: fault
drills use it to stop a process while a model call is in flight.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from agents.llm.base import DeltaCallback, LLMConfigError, LLMProvider, LLMResponse, ToolCall

MAX_DELAY_SECONDS = 60.0


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
            try:
                re.compile(rule["match"])
            except (re.error, TypeError) as exc:
                raise LLMConfigError(f"script rule {r}: bad match pattern: {exc}") from None
        for t, turn in enumerate(rule["turns"]):
            if not isinstance(turn, dict) or not ({"content", "tool_calls"} & set(turn)):
                raise LLMConfigError(f"script turn {t}: needs content or tool_calls")
            delay = turn.get("delay", 0)
            sane = isinstance(delay, int | float) and not isinstance(delay, bool)
            if not sane or not 0 <= delay <= MAX_DELAY_SECONDS:
                limit = f"{MAX_DELAY_SECONDS:g}"
                raise LLMConfigError(f"script turn {t}: delay must be between 0 and {limit} seconds")
            for call in turn.get("tool_calls", []):
                if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                    raise LLMConfigError(f"script turn {t}: every tool call needs a name")


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
        turns = self._turns_for(user_text)
        last = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "tool"), "")
        if played >= len(turns):
            turn: dict[str, Any] = {"content": "I have nothing more to do."}
        else:
            turn = turns[played]
        if turn.get("delay"):
            await asyncio.sleep(float(turn["delay"]))
        content = str(turn.get("content") or "").replace("{last}", last)
        if content and on_delta is not None:
            for piece in re.findall(r"\S+\s*", content):
                await on_delta(piece)
        calls = [
            ToolCall(
                id=f"call_{len(messages)}_{n}",
                name=call["name"],
                arguments=_resolve(call.get("arguments", {}), last),
            )
            for n, call in enumerate(turn.get("tool_calls", []))
        ]
        return LLMResponse(content=content, tool_calls=calls)

    def _turns_for(self, user_text: str) -> list[dict[str, Any]]:
        if "turns" in self.script:
            return self.script["turns"]
        for rule in self.script["rules"]:
            if "match" not in rule or re.search(rule["match"], user_text, re.IGNORECASE):
                return rule["turns"]
        return [{"content": "I can't help with that."}]


def _resolve(value: Any, last: str) -> Any:
    if isinstance(value, dict):
        return {k: _resolve(v, last) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, last) for v in value]
    if isinstance(value, str) and (value == "$last" or value.startswith("$last.")):
        try:
            current: Any = json.loads(last)
        except ValueError:
            current = last
        for key in value.split(".")[1:]:
            try:
                current = current[int(key)] if isinstance(current, list) else current[key]
            except (KeyError, IndexError, ValueError, TypeError):
                return None
        return current
    return value
