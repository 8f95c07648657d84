#!/bin/bash
# Writes its pid and its background child's pid to $1, then hangs.
echo $$ > "$1"
sleep 300 &
echo $! >> "$1"
wait
