#!/bin/sh
# Claude Code style: exit 2 blocks the call, stderr is the reason.
cat > /dev/null
echo "Payments are frozen until the audit ends." >&2
exit 2
