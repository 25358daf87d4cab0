//! Compile-time contract of `#[agent_tool]`: every rule the macro checks has
//! a case in `tests/ui/*.rs` whose `.stderr` shows the error a user sees, and
//! every accepted form has a case in `tests/ui/pass/`.
//!
//! Regenerate the expected output with `TRYBUILD=overwrite cargo test --test ui`
//! and read every changed `.stderr` before committing it.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}

/// Separate from `ui`: a `TestCases` with any pass case builds (links) every
/// case, while one with only compile-fail cases just checks them.
#[test]
fn ui_pass() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
}
