#!/usr/bin/env python3
"""A PreToolUse hook for a Bash tool: refuses shell commands that destroy data or run code
fetched from the network.

Speaks Claude Code's hook protocol: the event arrives as JSON on stdin; exit 0 lets the call go
on; exit 2 blocks it, and what is written on stderr is the reason the model reads.
"""

import json
import re
import sys

# (what to look for, what the command would do)
DANGERS = (
    (
        r"\brm\s+(?:-\w+\s+)*-\w*[rR]\w*\s+(?:-\w+\s+)*(?:/|~|\$HOME)/?(?:\s|$)",
        "deletes a root or home directory",
    ),
    (r"\bmkfs(?:\.\w+)?\b", "formats a file system"),
    (r"\bdd\b.*\bof=/dev/", "writes over a device"),
    (r"\b(?:curl|wget)\b[^|;&]*\|\s*(?:sudo\s+)?(?:ba|z|da)?sh\b", "runs a script fetched from the network"),
    (r"\bchmod\s+(?:-R\s+)?0?777\b", "makes files writable by everyone"),
    (r"\bgit\s+push\b.*(?:--force\b|\s-f\b)", "rewrites the history of a shared branch"),
    (r":\(\)\s*\{", "is a fork bomb"),
)


def main() -> int:
    event = json.load(sys.stdin)
    command = (event.get("tool_input") or {}).get("command")
    if not isinstance(command, str):
        return 0  # not a shell command: nothing for this hook to judge
    for pattern, effect in DANGERS:
        if re.search(pattern, command):
            print(
                f"Refused: `{command}` {effect}. If it is really intended, the user runs it by hand.",
                file=sys.stderr,
            )
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
