#!/usr/bin/env bash
# The tests of roles on remote hosts start a real OpenSSH server (sshd) on loopback with throwaway
# keys. Installs it from the system packages when it is missing; when it cannot be installed those
# tests skip, saying why (this script says it too).
set -u
if [ -x /usr/sbin/sshd ] || command -v sshd >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "install-sshd: sshd is missing and cannot be installed here (needs root and apt-get); SSH tests will skip" >&2
    exit 0
fi
echo "install-sshd: installing openssh-server" >&2
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q openssh-server >/dev/null 2>&1; then
    apt-get update -q >/dev/null 2>&1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q openssh-server >/dev/null 2>&1 \
        || echo "install-sshd: apt-get could not install openssh-server; SSH tests will skip" >&2
fi
exit 0
