//! Cold start: what the first definition of one tool costs in a fresh process,
//! `Catalog::builder().tool::<T>().build()` plus lowering it for a model.
//!
//! Everything a process does once (building the definition, compiling its
//! validators, any lazily built static such as a regex or a meta-schema) is
//! paid here, so the figure has to come from new processes: the driver runs
//! this same binary as a child once per sample, the child times its one first
//! definition and prints the microseconds, and the driver reports the
//! distribution.
//!
//! ```sh
//! cargo bench --bench cold_start            # 200 fresh processes
//! cargo bench --bench cold_start -- 1000    # or any count
//! ```
//!
//! Run as a test (`cargo test --all-targets`, no `--bench` argument) it
//! starts one child only.

#[path = "../examples/hello_world.rs"]
#[allow(dead_code)]
mod hello_world;

use std::hint::black_box;
use std::process::Command;
use std::time::Instant;

use aptix::{Catalog, Dialect};
use hello_world::HelloWorldTool;

/// The argument that makes the binary a child that measures once.
const CHILD: &str = "--cold-start-child";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|arg| arg == CHILD) {
        child();
        return;
    }
    let benching = args.iter().any(|arg| arg == "--bench");
    let samples = args
        .iter()
        .find_map(|arg| arg.parse::<usize>().ok())
        .unwrap_or(if benching { 200 } else { 1 });
    driver(samples);
}

/// The measured work: one tool's first definition, checked and lowered.
fn child() {
    let start = Instant::now();
    let catalog = Catalog::builder()
        .tool::<HelloWorldTool>()
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let lowered = catalog
        .lower(Dialect::OpenAiStrict)
        .unwrap_or_else(|error| panic!("{error}"));
    let elapsed = start.elapsed();
    black_box(lowered);
    // For comparison, what `jsonschema` costs on first use in the same process: its first
    // validator checks the schema against the draft 2020-12 meta-schema, whose own validator it
    // compiles then. The definition above does not pay it.
    let start = Instant::now();
    let checked = catalog
        .get("agent_hello_world")
        .map(|definition| definition.check_output(&serde_json::json!({"message": "hi"})));
    let jsonschema = start.elapsed();
    black_box(checked);
    println!(
        "{} {}",
        elapsed.as_secs_f64() * 1e6,
        jsonschema.as_secs_f64() * 1e6
    );
}

fn driver(samples: usize) {
    let exe = std::env::current_exe().unwrap_or_else(|error| panic!("{error}"));
    let mut definition = Vec::with_capacity(samples);
    let mut jsonschema = Vec::with_capacity(samples);
    for _ in 0..samples {
        let output = Command::new(&exe)
            .arg(CHILD)
            .output()
            .unwrap_or_else(|error| panic!("{error}"));
        assert!(output.status.success(), "the child failed: {output:?}");
        let text = String::from_utf8_lossy(&output.stdout);
        let mut figures = text.split_whitespace().map(|figure| {
            figure
                .parse::<f64>()
                .unwrap_or_else(|error| panic!("{error}: {text:?}"))
        });
        definition.push(figures.next().unwrap_or(f64::NAN));
        jsonschema.push(figures.next().unwrap_or(f64::NAN));
    }
    report(
        &format!("first definition of one tool + lowering, {samples} fresh processes"),
        definition,
    );
    report(
        "then jsonschema's first validator (not on that path)",
        jsonschema,
    );
}

fn report(what: &str, mut micros: Vec<f64>) {
    micros.sort_by(f64::total_cmp);
    let at = |q: f64| micros[((micros.len() - 1) as f64 * q).round() as usize];
    println!(
        "cold start, {what}: min {:.1} µs, median {:.1} µs, p90 {:.1} µs, max {:.1} µs",
        at(0.0),
        at(0.5),
        at(0.9),
        at(1.0)
    );
}
