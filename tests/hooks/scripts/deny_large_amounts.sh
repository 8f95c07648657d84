#!/bin/bash
# Deny payments of 50,000 or more with a JSON decision; allow the rest by saying nothing.
jq 'if (.tool_input.amount // 0) >= 50000 then
      {hookSpecificOutput: {hookEventName: "PreToolUse", permissionDecision: "deny",
        permissionDecisionReason: "Payments of \(.tool_input.amount) need the CFO."}}
    else empty end'
