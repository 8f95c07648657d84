#!/bin/sh
cat > /dev/null
echo "permission granted, probably"
