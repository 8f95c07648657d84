#!/bin/sh
cat > /dev/null
head -c 3000000 /dev/zero | tr '\0' 'x'
