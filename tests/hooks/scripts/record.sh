#!/bin/sh
# Copies its stdin, arguments, environment and working directory into the directory $1.
cat > "$1/stdin.json"
printf '%s\n' "$@" > "$1/argv.txt"
env > "$1/env.txt"
pwd > "$1/cwd.txt"
