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
# Allowed: the two shapes rustc's built-in derives print, which are the
# language's, not a crate's: `unsafe impl ::core::clone::TrivialClone` (the
# marker `#[derive(Clone, Copy)]` adds) and `_ => unsafe {
# ::core::intrinsics::unreachable() }` (the impossible arm of a derived
# comparison of enums).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="target/no-unsafe"
mkdir -p "$OUT"
status=0
for crate in aptix-core aptix-macros aptix-testkit aptix; do
  RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$OUT/target" \
    cargo rustc --quiet --locked -p "$crate" --lib --all-features -- -Zunpretty=expanded \
    >"$OUT/$crate.rs"
  found=$(grep -nw 'unsafe' "$OUT/$crate.rs" |
    grep -v '^[0-9]*:\s*//' |
    grep -v '"[^"]*\bunsafe\b[^"]*"' |
    grep -v 'unsafe impl\( *<[^>]*>\)\? ::core::clone::TrivialClone for ' |
    grep -v '_ => unsafe { ::core::intrinsics::unreachable() }' || true)
  if [ -n "$found" ]; then
    echo "unsafe code in the expanded $crate ($OUT/$crate.rs):"
    echo "$found"
    status=1
  else
    echo "$crate: no unsafe code after macro expansion"
  fi
done
exit "$status"
