#!/usr/bin/env bash
# Every check CI runs, in the order a failure is cheapest to find.
# Usage: ./scripts/test.sh   (needs the Rust toolchain and python3; it installs the rest:
# the end-to-end test's model server, built once into ~/.cache/aptix, and
# PostgreSQL for the store tests, from Debian's packages when missing; Node 22
# and the MCP conformance suite, from the npm registry)
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

# Both servers stop on exit, whichever of them started.
trap './scripts/llm-server.sh stop; ./scripts/pg-server.sh stop' EXIT

echo "== local model server (llama.cpp + SmolLM2-135M; built once, then cached)"
APTIX_TEST_LLM_URL="$(./scripts/llm-server.sh start)"
export APTIX_TEST_LLM_URL
echo "model server at $APTIX_TEST_LLM_URL"

echo "== PostgreSQL for the store tests (Debian's package, installed if missing; fresh cluster)"
APTIX_TEST_PG_URL="$(./scripts/pg-server.sh start)"
export APTIX_TEST_PG_URL
echo "PostgreSQL at $APTIX_TEST_PG_URL"

echo "== MCP Python client (PyPI mcp, pinned in tests/mcp_python/requirements.txt; venv cached)"
APTIX_TEST_MCP_PYTHON="$(./scripts/mcp-python.sh)"
export APTIX_TEST_MCP_PYTHON

echo "== cargo test (unit, integration, trybuild UI, examples, benches in test mode)"
cargo test --workspace --all-targets --locked

echo "== cargo test --doc"
cargo test --workspace --doc --locked

echo "== MCP conformance suite (Node 22 and @modelcontextprotocol/conformance from npm; cached)"
MCP_CONFORMANCE_STRICT=1 ./scripts/mcp-conformance.sh
