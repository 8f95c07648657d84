#!/bin/sh
cat > /dev/null
echo "Traceback: secret=hunter2" >&2
exit 1
