//! The runtime's modules import one way only (the README's architecture
//! section): a module may name the modules listed before it, never one after
//! it, so there is no import cycle for a change to ripple around. This test
//! reads `aptix-core/src` and fails on any `crate::<module>` path, outside
//! comments and test code, that points up the list.

use std::fs;
use std::path::{Path, PathBuf};

/// The layers, lowest first.
const LAYERS: &[&str] = &[
    "safe_derive",
    "digest",
    "content",
    "generator",
    "https",
    "error",
    "envelope",
    "live",
    "context",
    "meta",
    "schema",
    "validate",
    "definition",
    "secrets",
    "tool",
    "erased",
    "activity",
    "catalog",
    "executor",
    "transcript",
    "model",
    "tool_search",
    "agent",
    "store",
    "durable",
    "mcp",
    "cli",
];

fn rank(module: &str) -> Option<usize> {
    LAYERS.iter().position(|m| *m == module)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src` belongs to (`agent/run.rs` → `agent`).
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("a file under src");
    let first = relative
        .components()
        .next()
        .expect("a path with a component")
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.trim_end_matches(".rs").to_owned()
}

/// Whether a file holds only tests (a sibling `tests.rs` or `*_tests.rs`).
fn is_test_file(file: &Path) -> bool {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name == "tests.rs" || name.ends_with("_tests.rs")
}

/// Every `crate::<module>` the code (not its comments, not its `#[cfg(test)]`
/// tail) names, with its line number.
fn imports(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("#[cfg(test)]") {
            break;
        }
        if code.starts_with("//") {
            continue;
        }
        let code = code.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            found.push((index + 1, name));
            rest = after;
        }
    }
    found
}

#[test]
fn imports_only_point_down_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("aptix-core/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut upward = Vec::new();
    let mut unknown = Vec::new();
    for file in &files {
        let module = module_of(&src, file);
        if module == "lib" || module == "__private" || is_test_file(file) {
            continue;
        }
        let Some(own) = rank(&module) else {
            unknown.push(format!(
                "{}: module `{module}` is in no layer",
                file.display()
            ));
            continue;
        };
        let text = fs::read_to_string(file).expect("a readable source file");
        for (line, target) in imports(&text) {
            if target == module || target == "__private" {
                continue;
            }
            match rank(&target) {
                Some(theirs) if theirs < own => {}
                Some(_) => upward.push(format!(
                    "{}:{line}: `{module}` names `crate::{target}`, a layer above it",
                    file.display()
                )),
                None => unknown.push(format!(
                    "{}:{line}: `crate::{target}` is in no layer",
                    file.display()
                )),
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "add the module to LAYERS (and to the README's architecture section):\n{}",
        unknown.join("\n")
    );
    assert!(
        upward.is_empty(),
        "imports must point down the layers (README, Architecture):\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_scan_sees_imports_and_skips_comments_and_tests() {
    let text = "use crate::error::ToolError;\n\
                // crate::durable in a comment\n\
                let x = crate::meta::route(a, b); // crate::cli\n\
                #[cfg(test)]\n\
                use crate::agent::Agent;\n";
    let names: Vec<String> = imports(text).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, ["error", "meta"]);
}

/// Crates whose macros put `unsafe` code into the crate that uses them, to
/// collect items at link time or run code before `main`. `forbid(unsafe_code)`
/// does not see code a foreign macro expands to, so `#[agent_tool]` once
/// registered tools through `linkme` with every crate saying it forbade
/// `unsafe`: this test is the guard the lint is not.
/// `async-stream` is here too: its only use is its `stream!` macro (see
/// [`UNSAFE_MACROS`]).
const UNSAFE_MACRO_CRATES: &[&str] = &[
    "linkme",
    "inventory",
    "ctor",
    "distributed-slice",
    "async-stream",
];

#[test]
fn no_crate_depends_on_a_crate_whose_macros_are_unsafe() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lock = fs::read_to_string(root.join("Cargo.lock"))
        .unwrap_or_else(|e| panic!("reading Cargo.lock: {e}"));
    let locked: Vec<&str> = lock
        .lines()
        .filter_map(|line| line.strip_prefix("name = \""))
        .filter_map(|rest| rest.strip_suffix('"'))
        .collect();
    let found: Vec<&&str> = UNSAFE_MACRO_CRATES
        .iter()
        .filter(|name| locked.contains(name))
        .collect();
    assert!(
        found.is_empty(),
        "the build depends on {found:?}, whose macros expand to `unsafe` code"
    );
}

/// Crates refused because they bring `unsafe` code of their own where safe
/// code does the job: `bm25`'s tokenizer pulls `deunicode` (a transliteration
/// table read through `slice::from_raw_parts` and `from_utf8_unchecked`) and
/// `cached` (a proc macro for a 16-entry cache). Tool search ranks with its
/// own BM25 instead (`aptix-core/src/tool_search/index.rs`), stemming with
/// `rust-stemmers`, which is safe code. `process-wrap` (rmcp's
/// `transport-child-process`) puts a stdio server in a process group through
/// `pre_exec`, an `unsafe` call, and brings `nix`; `McpToolset::stdio` spawns
/// with tokio's `Command` and `kill_on_drop` instead.
const REFUSED_UNSAFE_CRATES: &[&str] = &["bm25", "deunicode", "cached", "process-wrap", "nix"];

#[test]
fn no_crate_depends_on_a_refused_crate_with_unsafe_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lock = fs::read_to_string(root.join("Cargo.lock"))
        .unwrap_or_else(|e| panic!("reading Cargo.lock: {e}"));
    let found: Vec<&&str> = REFUSED_UNSAFE_CRATES
        .iter()
        .filter(|name| {
            lock.lines()
                .any(|line| line == format!("name = \"{name}\""))
        })
        .collect();
    assert!(
        found.is_empty(),
        "the build depends on {found:?}, which bring `unsafe` code a safe alternative avoids"
    );
}

/// Macros that expand to `unsafe` code in the crate that calls them (pinning
/// with `Pin::new_unchecked`, generators over raw pointers): `tokio`'s
/// `select!`, `join!`, `try_join!` and `pin!`, `futures`' `select!`, `join!`
/// and `pin_mut!`, `async-stream`'s `stream!` and `try_stream!`,
/// `pin-project`'s `pin_project!`, and `std::pin::pin!` too (since Rust 1.88
/// it is `super let` + `Pin::new_unchecked(..)` in an unsafe block).
/// `forbid(unsafe_code)` does not see them, for the same reason as above.
/// Written without their `!`, so that this list is not a call.
const UNSAFE_MACROS: &[&str] = &[
    "select",
    "join",
    "try_join",
    "pin",
    "pin_mut",
    "stream",
    "try_stream",
    "pin_project",
];

/// The calls in `text` of a macro that expands to `unsafe` code: one of
/// [`UNSAFE_MACROS`], whatever its path.
fn unsafe_macro_calls(text: &str) -> Vec<String> {
    let mut calls = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or_default();
        for (at, _) in code.match_indices('!') {
            let before = &code[..at];
            let name_start = before
                .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let name = &before[name_start..];
            let after = code[at + 1..].trim_start();
            if after.starts_with(['(', '{', '[']) && UNSAFE_MACROS.contains(&name) {
                calls.push(line.trim().to_owned());
            }
        }
    }
    calls
}

#[test]
fn the_unsafe_macro_scan_finds_the_calls() {
    // `%` stands for `!`, so that this file holds no call itself.
    let text = "let x = tokio::select% {\n\
                tokio::pin%(deadline);\n\
                let s = async_stream::stream% {\n\
                let (a, b) = join%(a, b);\n\
                let p = std::pin::pin%(f); // tokio::pin%(g)\n\
                assert%(x != y);\n"
        .replace('%', "!");
    let calls = unsafe_macro_calls(&text);
    assert_eq!(calls.len(), 5, "{calls:?}");
}

#[test]
fn no_crate_calls_a_macro_that_expands_to_unsafe_code() {
    let files = project_files();
    let mut found = Vec::new();
    for file in &files {
        let text =
            fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        for call in unsafe_macro_calls(&text) {
            found.push(format!("{}: {call}", file.display()));
        }
    }
    assert!(
        found.is_empty(),
        "macros that expand to `unsafe` code:\n{}",
        found.join("\n")
    );
}

/// Every Rust file of the project: the four crates, their tests, benches
/// and examples (each a crate of its own, and code the project ships).
fn project_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "src",
        "aptix-core/src",
        "aptix-macros/src",
        "aptix-testkit/src",
        "tests",
        "benches",
        "examples",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    files
}

#[test]
fn no_crate_derives_copy() {
    // `#[derive(Clone, Copy)]` adds an impl of `::core::clone::TrivialClone`,
    // an unsafe marker trait, to the crate; `Copy` is implemented by hand instead. Tests, benches
    // and examples too: each is a crate, and the rule is for all code.
    let files = project_files();
    let mut found = Vec::new();
    for file in &files {
        let text =
            fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or_default();
            if code.contains("derive(")
                && code
                    .split(|c: char| !c.is_alphanumeric())
                    .any(|word| word == "Copy")
            {
                found.push(format!("{}: {}", file.display(), line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "derived `Copy`:\n{}", found.join("\n"));
}

#[test]
fn no_test_runs_under_the_tokio_test_attribute() {
    // `#[tokio::test]` pins the test's future with
    // `Pin::new_unchecked(&mut body)` in an unsafe block in the test's own crate;
    // `aptix_testkit::block_on` runs it on a runtime instead (the future
    // moved into `Runtime::block_on`, as `#[tokio::main]` does).
    let attribute = ["#[tokio", "::test"].concat();
    let mut found = Vec::new();
    for file in &project_files() {
        let text =
            fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or_default();
            if code.contains(&attribute) {
                found.push(format!("{}: {}", file.display(), line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "{} tests run under `{attribute}]`, which expands to `unsafe` code:\n{}",
        found.len(),
        found.join("\n")
    );
}
