#!/usr/bin/env python3
"""A PreToolUse hook for file writes: denies writing an environment file (``.env``,
``.env.local``, …; templates such as ``.env.example`` pass) or any file under a protected
directory.

    file_guard.py --protect DIR [--protect DIR …]

Speaks Claude Code's hook protocol: reads the event on stdin and, to deny, prints
``{"hookSpecificOutput": {"permissionDecision": "deny", …}}`` and exits 0; says nothing otherwise.
Paths are normalised first (``notes/../secrets/key`` is under ``secrets``); a relative path cannot
be placed, so it is denied.
"""

import argparse
import json
import os
import sys

TEMPLATES = (".example", ".sample", ".template")


def deny(reason: str) -> None:
    answer = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }
    print(json.dumps(answer))


def why_not(path: str, protected: list[str]) -> str | None:
    if not os.path.isabs(path):
        return f"{path} is not an absolute path: the guard cannot tell where it would be written."
    target = os.path.normpath(path)
    name = os.path.basename(target)
    if name == ".env" or (name.startswith(".env.") and not name.endswith(TEMPLATES)):
        return f"{path} is an environment file: it holds secrets and is never written by an agent."
    for directory in protected:
        root = os.path.normpath(directory)
        if target == root or target.startswith(root.rstrip(os.sep) + os.sep):
            return f"{path} is inside {root}, which is protected: it is never written by an agent."
    return None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--protect", action="append", default=[], metavar="DIR")
    options = parser.parse_args()
    event = json.load(sys.stdin)
    tool_input = event.get("tool_input") or {}
    path = tool_input.get("file_path") or tool_input.get("notebook_path")
    if isinstance(path, str) and path:
        reason = why_not(path, options.protect)
        if reason is not None:
            deny(reason)
    return 0


if __name__ == "__main__":
    sys.exit(main())
