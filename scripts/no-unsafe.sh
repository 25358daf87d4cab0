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
# Also read: the trybuild pass cases, and the libraries' lowered code (see
# the end of this script for the two constructs rustc lowers to `unsafe`).
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

# The lines of expanded code in $1 that hold `unsafe` outside comments and
# string literals (literals are taken out first, so a line that mentions the
# word in a message but also holds real `unsafe` is still found).
unsafe_lines() {
  grep -nw 'unsafe' "$1" |
    grep -v '^[0-9]*:\s*//' |
    sed -E 's/"([^"\\]|\\.)*"/""/g' |
    grep -w 'unsafe' || true
}

status=0
checked=0
# Counts one crate read, and fails the run if `$2` (what was found) is not
# empty, saying where (`$1`).
report() {
  checked=$((checked + 1))
  if [ -n "$2" ]; then
    echo "unsafe code in $1:"
    echo "$2" | head -20
    status=1
  fi
}
targets="aptix-core:--lib aptix-macros:--lib aptix-testkit:--lib aptix:--lib"
targets="$targets aptix-core:--lib:--profile=test aptix-macros:--lib:--profile=test"
targets="$targets aptix-testkit:--lib:--profile=test aptix:--lib:--profile=test"
for kind in example:examples test:tests bench:benches; do
  for file in "${kind#*:}"/*.rs; do
    targets="$targets aptix:--${kind%%:*}=$(basename "$file" .rs)"
  done
done
for target in $targets; do
  IFS=: read -r crate kind profile <<<"$target"
  name="$crate${kind#--lib}${profile:+-test}"
  name="${name//--/-}"
  name="${name//=/-}"
  # shellcheck disable=SC2086 # `$profile` is one flag or none.
  RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$OUT/target" \
    cargo rustc --quiet --locked -p "$crate" "$kind" $profile --all-features -- -Zunpretty=expanded \
    >"$OUT/$name.rs"
  report "the expanded $name ($OUT/$name.rs)" "$(unsafe_lines "$OUT/$name.rs")"
done
# The trybuild pass cases are users' crates too (every accepted form of
# `#[agent_tool]`), compiled by trybuild in a project of its own: expanded
# here as the binaries of a scratch crate that depends on `aptix`, with the
# workspace's lock file.
UI="$OUT/ui-pass"
mkdir -p "$UI/src/bin"
rm -f "$UI"/src/bin/*.rs
cp tests/ui/pass/*.rs "$UI/src/bin/"
cp Cargo.lock "$UI/Cargo.lock"
cat >"$UI/Cargo.toml" <<TOML
[package]
name = "aptix-ui-pass"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
aptix = { path = "$(pwd)" }
# What the derives in the cases name, as in trybuild's project.
serde = { version = "1.0", features = ["derive"] }
serde_json = "1.0"
schemars = "1.2"

[workspace]
TOML
for file in "$UI"/src/bin/*.rs; do
  case_name=$(basename "$file" .rs)
  (cd "$UI" && RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="../target" \
    cargo rustc --quiet --bin "$case_name" -- -Zunpretty=expanded) >"$OUT/ui-pass-$case_name.rs"
  report "the expanded trybuild pass case $case_name" "$(unsafe_lines "$OUT/ui-pass-$case_name.rs")"
done

# After expansion rustc lowers two constructs to `unsafe` blocks of its own,
# in every Rust program: `.await` (`unsafe { Pin::new_unchecked(&mut
# __awaitee) }`) and `format_args!` (`unsafe { format_arguments::new(..) }`,
# rustc 1.95). `forbid(unsafe_code)` does not count them, and no safe code
# avoids them. The lowered code (HIR) of the four libraries is read for any
# other `unsafe`, so that nothing else the compiler writes goes unseen.
for crate in aptix-core aptix-macros aptix-testkit aptix; do
  RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$OUT/target" \
    cargo rustc --quiet --locked -p "$crate" --lib --all-features -- -Zunpretty=hir \
    >"$OUT/$crate.hir"
  # Each `unsafe` with the line after it, on one line.
  awk '
    /^[[:space:]]*\/\// { next }
    pending != "" { print pending " " $0; pending = "" }
    /(^|[^[:alnum:]_])unsafe([^[:alnum:]_]|$)/ { pending = NR ": " $0 }
    END { if (pending != "") print pending }
  ' "$OUT/$crate.hir" >"$OUT/$crate.hir-unsafe"
  found=$(unsafe_lines "$OUT/$crate.hir-unsafe" |
    grep -v 'unsafe {[[:space:]]*poll(new_unchecked(&mut __awaitee)' |
    grep -v 'unsafe {[[:space:]]*format_arguments::new(' || true)
  report "the lowered (HIR) $crate, other than .await and format_args! ($OUT/$crate.hir)" "$found"
done

if [ "$status" = 0 ]; then
  echo "no unsafe code after macro expansion in $checked crates (libraries, unit tests, examples, tests, benches, trybuild pass cases; the libraries' lowered code too)"
fi
exit "$status"
