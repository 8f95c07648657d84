#!/usr/bin/env python3
"""Rewrite the result: card numbers are masked."""

import json
import re
import sys

event = json.load(sys.stdin)
text = json.dumps(event["tool_response"])
masked = json.loads(re.sub(r"\b\d{12}(\d{4})\b", r"************\1", text))
print(
    json.dumps(
        {
            "hookSpecificOutput": {
                "hookEventName": "PostToolUse",
                "updatedMCPToolOutput": masked,
                "additionalContext": "Card numbers were masked.",
            }
        }
    )
)
