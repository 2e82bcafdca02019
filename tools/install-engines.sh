#!/usr/bin/env bash
# make test's engines: vLLM for CPU (engine/install.sh) and llama.cpp's llama-server (engine/install-llamacpp.sh),
# each installed once, its paths written to its env file (.engine.env, .engine-llamacpp.env). Both are tried; one
# that does not install fails this script (exit 1) with one line naming it and the last thing its installer said,
# and its env file is removed, so that its end-to-end tests fail naming it too (tests/components.py).
#   FAIRWIN_ENGINES         which to install (default: "vllm llamacpp")
#   FAIRWIN_ENGINE_ENV_DIR  where the env files go (default: the repository's root)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
envs="${FAIRWIN_ENGINE_ENV_DIR:-$root}"
status=0
for name in ${FAIRWIN_ENGINES:-vllm llamacpp}; do
    case "$name" in
        vllm) script=install.sh env=.engine.env what="vLLM for CPU" ;;
        llamacpp) script=install-llamacpp.sh env=.engine-llamacpp.env what="llama.cpp's llama-server" ;;
        *) echo "install-engines: no engine named $name (vllm or llamacpp)" >&2; exit 2 ;;
    esac
    said="$(mktemp)"
    # The installer's progress goes on to the terminal as it comes, and is kept for its last line.
    if { bash "$root/engine/$script" 2>&1 >&3 3>&- | tee "$said" >&2; } 3> "$envs/$env.tmp"; then
        mv "$envs/$env.tmp" "$envs/$env"
    else
        rm -f "$envs/$env.tmp" "$envs/$env"
        echo "install-engines: $what did not install: $(grep -v '^[[:space:]]*$' "$said" | tail -1)" >&2
        status=1
    fi
    rm -f "$said"
done
exit $status
