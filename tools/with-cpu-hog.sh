#!/usr/bin/env bash
# Run a command while a busy loop holds one CPU, as a neighbour's job would: the suite's verdict,
# trust and guard tests must get the same answers on a starved machine (`make test HOG=1`).
# The hog is a plain Python loop (nothing to install), at the default priority, and is always
# stopped when the command ends, however it ends.
set -u
python3 -c 'while True: pass' &
hog=$!
trap 'kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null' EXIT
echo "with-cpu-hog: a busy loop (pid $hog) holds one CPU while: $*" >&2
"$@"
