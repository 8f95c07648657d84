#!/bin/bash
# Ask a human for payments of 50,000 or more.
jq 'if (.tool_input.amount // 0) >= 50000 then
      {hookSpecificOutput: {hookEventName: "PreToolUse", permissionDecision: "ask",
        permissionDecisionReason: "large payment"}}
    else empty end'
