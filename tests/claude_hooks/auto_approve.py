#!/usr/bin/env python3
"""A PreToolUse hook that decides who approves: reading documentation needs nobody
(``permissionDecision: "allow"``); every other call it is asked about waits for a person
(``"ask"``).

Speaks Claude Code's hook protocol: reads the event on stdin, prints its decision as
``hookSpecificOutput`` JSON and exits 0. The tool is recognised by the last part of its name, so
Claude Code's ``Read``, an MCP tool's ``mcp__files__Read`` and this platform's ``files__Read``
are the same tool.
"""

import json
import os
import sys

DOCUMENTS = (".md", ".mdx", ".rst", ".txt", ".adoc")


def decide(event: dict) -> tuple[str, str]:
    tool = str(event.get("tool_name") or "").rsplit("__", 1)[-1]
    path = (event.get("tool_input") or {}).get("file_path")
    shown = path if isinstance(path, str) and path else "its input"
    if tool == "Read" and isinstance(path, str):
        lowered = path.lower()
        if lowered.endswith(DOCUMENTS) or f"{os.sep}docs{os.sep}" in lowered:
            return "allow", f"{os.path.basename(path)} is documentation: read without asking."
    return "ask", f"{tool} on {shown} is not a documentation read: a person approves it."


def main() -> int:
    decision, reason = decide(json.load(sys.stdin))
    answer = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
