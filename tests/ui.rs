//! Compile-time contract of `#[agent_tool]`: every rule the macro checks has
//! a case in `tests/ui/*.rs` whose `.stderr` shows the error a user sees, and
//! every accepted form has a case in `tests/ui/pass/`.
//!
//! Regenerate the expected output with `TRYBUILD=overwrite cargo test --test ui`
//! and read every changed `.stderr` before committing it.
//!
//! trybuild compiles the cases in a project of its own, under
//! `target/tests/trybuild`, with this package's dependencies and
//! dev-dependencies; the dev-dependencies are kept out of it by
//! `cfg(not(trybuild))` in Cargo.toml, since the cases need only `aptix`.

/// Both kinds of case in one `TestCases`: trybuild builds its project's
/// dependency tree once per mode, `cargo check` for a run of compile-fail
/// cases only and `cargo build` as soon as one case must run, so two runs
/// would build the tree twice. A compile-fail case stops at its error either
/// way.
#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
