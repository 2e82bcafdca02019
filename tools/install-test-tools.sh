#!/usr/bin/env bash
# System programs the tests run for real, installed from the system packages when missing:
#   sshd                      (openssh-server)          roles on remote hosts, over loopback SSH
#   chromium-headless-shell   (chromium-headless-shell) report.html rendered and screenshotted
#   PostgreSQL's server       (postgresql)              the shared control archive, initdb'd per test session
#   tmux                      (tmux)                    chain placeholders on remote hosts
#   podman and runc           (podman, runc)            container roles, rootful, with throwaway storage per
#                                                       test session
#   the docker CLI            (docker.io)               the same container roles driven through podman's
#                                                       Docker-compatible socket
#   openssl                   (openssl)                 a throwaway certificate for the TLS transport test
#   Slurm and munge           (slurm-wlm, munge)        a throwaway cluster of two nodes on this machine
# One that cannot be installed where this machine could install it (root, with apt-get) fails this script with
# one line naming the packages and apt-get's last word: a component that failed to install fails the suite.
# Where the machine cannot (not root, no apt-get), it says so, and the tests that need one skip saying why
# (tests/components.py), except under CI, where they fail.
set -u
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
need=()
have sshd || need+=(openssh-server)
have chromium-headless-shell || need+=(chromium-headless-shell)
# Debian keeps initdb and pg_ctl off the PATH, in /usr/lib/postgresql/VERSION/bin.
have initdb || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need+=(postgresql)
have podman || need+=(podman)
have runc || need+=(runc)
have tmux || need+=(tmux)
have docker || need+=(docker.io)
have openssl || need+=(openssl)
have slurmctld && have slurmd && have sbatch || need+=(slurm-wlm)
have munged || need+=(munge)
if [ ${#need[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "install-test-tools: ${need[*]} missing and cannot be installed here (needs root and apt-get); their tests will skip" >&2
    exit 0
fi
echo "install-test-tools: installing ${need[*]}" >&2
said="$(mktemp)"
trap 'rm -f "$said"' EXIT
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >"$said" 2>&1; then
    apt-get update -q >"$said" 2>&1
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >"$said" 2>&1; then
        echo "install-test-tools: apt-get could not install ${need[*]}: $(grep -v '^[[:space:]]*$' "$said" | tail -1)" >&2
        exit 1
    fi
fi
exit 0
