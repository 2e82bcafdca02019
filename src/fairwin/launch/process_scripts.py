"""Shell functions a remote host runs to ask whether a process, or a process group, is still running.

Kept apart from the SSH transport and the listing of remote runs, which both send them, so neither
imports the other.
"""

#: A shell function: does process group $1 have a member that is not a zombie (from /proc, where the host has it)?
#: A group's leader (the wrapper) dies with it, so its server is reaped by the host's init, which may take a second
#: or two (``kill -0`` answers for a zombie), and a zombie holds no port, memory or GPU. ``kill -SIG -PGID`` without
#: ``--``: dash, a common /bin/sh, refuses ``--``.
GROUP_ALIVE = (
    'alive() { if [ -r /proc/self/stat ]; then cat /proc/[0-9]*/stat 2>/dev/null | awk -v g="$1" '
    """'{ sub(/.*\\) /, ""); if ($3 == g && $1 != "Z") found = 1 } END { exit !found }'; """
    'else kill -0 -"$1" 2>/dev/null; fi; }; '
)
#: A shell function: is process $1 running, a zombie not counted (the same reason as GROUP_ALIVE's)?
PROCESS_RUNNING = (
    'running() { if [ -r /proc/self/stat ]; then s=$(sed "s/.*) //" /proc/"$1"/stat 2>/dev/null) && '
    '[ -n "$s" ] && [ "${s%% *}" != Z ]; else kill -0 "$1" 2>/dev/null; fi; }; '
)
