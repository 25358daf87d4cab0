#!/usr/bin/env bash
# Every check CI runs, in the order a failure is cheapest to find.
# Usage: ./scripts/test.sh   (needs only the Rust toolchain)
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== cargo test (unit, integration, trybuild UI, examples, benches in test mode)"
cargo test --workspace --all-targets --locked

echo "== cargo test --doc"
cargo test --workspace --doc --locked
