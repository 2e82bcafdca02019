#!/usr/bin/env bash
# Run a command while busy loops hold CPUs, as a neighbour's jobs would: the suite's verdict,
# trust and guard tests must get the same answers on a starved machine (`make test HOG=N`).
#   bash tools/with-cpu-hog.sh [COUNT] COMMAND...      (COUNT: how many loops, 1 by default)
# Each hog is a plain Python loop (nothing to install) at the default priority, in a session of
# its own as a neighbour's job is (so the kernel's autogroup scheduling shares the CPUs between it
# and the suite as between two users' jobs), and all are stopped when the command ends, however it ends.
set -u
count=1
if [[ ${1:-} =~ ^[0-9]+$ ]]; then count=$1; shift; fi
hogs=()
for _ in $(seq 1 "$count"); do
    setsid python3 -c 'while True: pass' &
    hogs+=("$!")
done
trap 'kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null' EXIT
echo "with-cpu-hog: $count busy loop(s) (pids ${hogs[*]}) hold CPUs while: $*" >&2
"$@"
