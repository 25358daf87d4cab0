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
# Every crate of the project is expanded: the four libraries, their unit
# tests (`--profile test`), and every example, integration test and bench
# (each a crate of its own: an example is a user's crate holding what
# `#[agent_tool]` generates there, and `#[tokio::test]` or a derived `Copy`
# in a test is `unsafe` code as much as in a library).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="target/no-unsafe"
mkdir -p "$OUT"
targets="aptix-core:--lib aptix-macros:--lib aptix-testkit:--lib aptix:--lib"
targets="$targets aptix-core:--lib:--profile=test aptix-macros:--lib:--profile=test"
targets="$targets aptix-testkit:--lib:--profile=test aptix:--lib:--profile=test"
for kind in example:examples test:tests bench:benches; do
  for file in "${kind#*:}"/*.rs; do
    targets="$targets aptix:--${kind%%:*}=$(basename "$file" .rs)"
  done
done
status=0
checked=0
for target in $targets; do
  IFS=: read -r crate kind profile <<<"$target"
  name="$crate${kind#--lib}${profile:+-test}"
  name="${name//--/-}"
  name="${name//=/-}"
  # shellcheck disable=SC2086 # `$profile` is one flag or none.
  RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$OUT/target" \
    cargo rustc --quiet --locked -p "$crate" "$kind" $profile --all-features -- -Zunpretty=expanded \
    >"$OUT/$name.rs"
  found=$(grep -nw 'unsafe' "$OUT/$name.rs" |
    grep -v '^[0-9]*:\s*//' |
    grep -v '"[^"]*\bunsafe\b[^"]*"' || true)
  checked=$((checked + 1))
  if [ -n "$found" ]; then
    echo "unsafe code in the expanded $name ($OUT/$name.rs):"
    echo "$found" | head -20
    status=1
  fi
done
if [ "$status" = 0 ]; then
  echo "no unsafe code after macro expansion in $checked crates (libraries, unit tests, examples, tests, benches)"
fi
exit "$status"
