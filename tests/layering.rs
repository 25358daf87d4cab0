//! The runtime's modules import one way only (the README's architecture
//! section): a module may name the modules listed before it, never one after
//! it, so there is no import cycle for a change to ripple around. This test
//! reads `aptix-core/src` and fails on any `crate::<module>` path, outside
//! comments and test code, that points up the list.

use std::fs;
use std::path::{Path, PathBuf};

/// The layers, lowest first.
const LAYERS: &[&str] = &[
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
    // With its submodules: `erased` (tool code with its types erased), then
    // `activity` (reached as `crate::catalog::activity`; the crate root
    // re-exports it for users only), then the entries, the builder, the catalog.
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
