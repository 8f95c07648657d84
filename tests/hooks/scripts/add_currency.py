#!/usr/bin/env python3
"""Rewrite the arguments: every payment is in CNY."""

import json
import sys

event = json.load(sys.stdin)
tool_input = dict(event["tool_input"], currency="CNY")
print(
    json.dumps(
        {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "allow",
                "updatedInput": tool_input,
            }
        }
    )
)
