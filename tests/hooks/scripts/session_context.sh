#!/bin/sh
cat > /dev/null
jq -n '{hookSpecificOutput: {hookEventName: "SessionStart", additionalContext: "Today is a payment freeze day."}}'
