#!/usr/bin/env bash
# Every check CI runs, in the order a failure is cheapest to find.
# Usage: ./scripts/test.sh   (needs the Rust toolchain and python3; it installs the rest:
# the end-to-end test's model server, built once into ~/.cache/aptix, and
# PostgreSQL for the store tests, from Debian's packages when missing; Node 22
# and the MCP conformance suite, from the npm registry)
# Each step prints how long it took, and the run ends with a table of them.
set -euo pipefail
cd "$(dirname "$0")/.."
# A clean clone is built once and never debugged: incremental caches and
# debug info would only add gigabytes (a panic still names its file and line).
if [ -n "${CI:-}" ]; then
  export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=false
fi

TIMES=()
RUN_STARTED=$SECONDS
STEP_NAME=""
STEP_STARTED=$SECONDS
step() {
  finish_step
  STEP_NAME="$1"
  STEP_STARTED=$SECONDS
  echo "== $1"
}
finish_step() {
  if [ -n "$STEP_NAME" ]; then
    local took=$((SECONDS - STEP_STARTED))
    echo "-- ${took}s: $STEP_NAME ($(du -sh target 2>/dev/null | cut -f1) in target/, $(df -h . | awk 'NR==2 {print $4}') free)"
    TIMES+=("$(printf '%6ss  %s' "$took" "$STEP_NAME")")
  fi
  STEP_NAME=""
}
report() {
  local status=$?
  finish_step
  echo "== step times"
  for line in "${TIMES[@]}"; do echo "$line"; done
  echo "$(printf '%6ss  %s' $((SECONDS - RUN_STARTED)) 'total')"
  if [ -n "${APTIX_TEST_LLM_URL:-}" ]; then ./scripts/llm-server.sh stop "$APTIX_TEST_LLM_URL" || true; fi
  ./scripts/pg-server.sh stop || true
  exit "$status"
}
# Both servers stop on exit, whichever of them started.
trap report EXIT

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "a tools-only crate's build: aptix with default-features = false (no HTTP client, no store)"
# The README's promise: a crate that only declares tools pulls no HTTP
# client, TLS stack, SQL driver or MCP runtime. Checked on the dependency
# tree of that build, and the build itself.
HEAVY="$(cargo tree -p aptix --no-default-features -e normal --prefix none --locked \
  | awk '{print $1}' | grep -xE 'reqwest|hyper|rustls|aws-lc-sys|ring|sqlx|rmcp|axum|clap' | sort -u || true)"
if [ -n "$HEAVY" ]; then
  echo "aptix without default features still depends on: $HEAVY" >&2
  exit 1
fi
cargo check -p aptix --no-default-features --lib --locked

step "local model server (llama.cpp + SmolLM2-135M; built once, then cached)"
APTIX_TEST_LLM_URL="$(./scripts/llm-server.sh start)"
export APTIX_TEST_LLM_URL
echo "model server at $APTIX_TEST_LLM_URL"

step "PostgreSQL for the store tests (Debian's package, installed if missing; fresh cluster)"
APTIX_TEST_PG_URL="$(./scripts/pg-server.sh start)"
export APTIX_TEST_PG_URL
echo "PostgreSQL at $APTIX_TEST_PG_URL"

step "MCP Python client (PyPI mcp, pinned in tests/mcp_python/requirements.txt; venv cached)"
APTIX_TEST_MCP_PYTHON="$(./scripts/mcp-python.sh)"
export APTIX_TEST_MCP_PYTHON

step "the mcp_conformance example, run by tests/mcp/mcp_client.rs as a remote MCP server"
# `cargo test --all-targets` builds examples as test harnesses only.
cargo build --example mcp_conformance --locked

step "cargo test (unit, integration, trybuild UI, examples, benches in test mode)"
cargo test --workspace --all-targets --locked

step "cargo test --doc"
cargo test --workspace --doc --locked

step "MCP conformance suite (Node 22 and @modelcontextprotocol/conformance from npm; cached)"
MCP_CONFORMANCE_STRICT=1 ./scripts/mcp-conformance.sh
