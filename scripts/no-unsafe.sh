#!/usr/bin/env bash
# Fails if the macro-expanded code of any Aptix crate holds `unsafe`.
#
# `forbid(unsafe_code)` does not see what a foreign macro expands (std's own
# `pin!` is `unsafe { Pin::new_unchecked(..) }` since Rust 1.88), and a scan of
# the sources for macro names only knows the macros it lists; the expanded
# code is what the compiler builds. Expansion needs `-Zunpretty`, which stable
# rustc gives only with RUSTC_BOOTSTRAP; it is used for this printout alone,
# never for a build.
#
# Skipped, as not code: comments, and the word inside a string literal.
# Nothing else is allowed, rustc's own derives included: `#[derive(Clone,
# Copy)]` adds `unsafe impl ::core::clone::TrivialClone` (so `Copy` is
# implemented by hand), and `#[derive(PartialEq)]` on an enum whose every
# variant holds data ends with `unsafe { ::core::intrinsics::unreachable() }`
# (so aptix-core writes those with `safe_derive::enum_eq!`).
#
# Besides the four libraries, the quickstart example is expanded: it is a
# user's crate, holding what `#[agent_tool]` generates there.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="target/no-unsafe"
mkdir -p "$OUT"
status=0
for target in aptix-core:--lib aptix-macros:--lib aptix-testkit:--lib aptix:--lib \
  aptix:--example=quickstart; do
  crate="${target%%:*}"
  kind="${target#*:}"
  name="$crate${kind#--lib}"
  name="${name/--example=/-example-}"
  RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$OUT/target" \
    cargo rustc --quiet --locked -p "$crate" "$kind" --all-features -- -Zunpretty=expanded \
    >"$OUT/$name.rs"
  found=$(grep -nw 'unsafe' "$OUT/$name.rs" |
    grep -v '^[0-9]*:\s*//' |
    grep -v '"[^"]*\bunsafe\b[^"]*"' || true)
  if [ -n "$found" ]; then
    echo "unsafe code in the expanded $name ($OUT/$name.rs):"
    echo "$found"
    status=1
  else
    echo "$name: no unsafe code after macro expansion"
  fi
done
exit "$status"
