#!/usr/bin/env python3
"""Withhold a result that shows a card number (PostToolUse "decision": "block" with a reason)."""

import json
import re
import sys

event = json.load(sys.stdin)
if re.search(r"\b\d{16}\b", json.dumps(event["tool_response"])):
    print(json.dumps({"decision": "block", "reason": "It shows a card number."}))
