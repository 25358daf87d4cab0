//! Hostile schemas: a tool's JSON Schema may come from another MCP server
//! (`McpToolset` lists its tools' `inputSchema` and `outputSchema`), and no
//! small schema may cost unbounded CPU or memory when Aptix builds its
//! validators or lowers it to a provider's dialect. The red team's findings
//! of 2026-11-27 (R1, R2, R7), built here directly as catalog entries.
//!
//! Work is measured by what a bound fixes (the lowered spec's size, whether
//! a schema is refused); a thread that must end is waited for with a
//! generous timeout, only to tell a hang from an answer.

use std::sync::mpsc;
use std::time::Duration;

use aptix::executor::ToolCall;
use aptix::prelude::*;
use aptix::{Catalog, Executor, ToolEntry};
use serde_json::{Map, Value, json};

/// Far longer than any bounded answer takes in a debug build on a loaded
/// machine; only a hang gets near it.
const HANG: Duration = Duration::from_secs(60);

/// Runs `work` on a thread of its own and waits for it at most [`HANG`].
fn within_hang<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, answer) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(work());
    });
    match answer.recv_timeout(HANG) {
        Ok(value) => value,
        Err(_) => panic!("{what} had not ended after {HANG:?}"),
    }
}

async fn never_run(_: Value, _: ToolContext) -> Result<Value, ToolError> {
    Ok(json!("ran"))
}

fn entry(name: &str, parameters: Value) -> aptix::ToolEntryBuilder {
    ToolEntry::from_json_schema(
        name,
        "Test tool.",
        "A hostile schema.",
        parameters,
        never_run,
    )
}

// ---------------------------------------------------------------------
// R1: deciding which `null` members read as absent compiled the root's
// `$defs` (and their patterns) once per optional property.
// ---------------------------------------------------------------------

/// `props` optional string properties, one required, and `defs`
/// definitions each holding `pattern`: a few KB.
fn nullplan_bomb(props: usize, defs: usize, pattern: &str) -> Value {
    let mut properties = Map::new();
    properties.insert(
        "must".into(),
        json!({"type": "string", "description": "Required."}),
    );
    for i in 0..props {
        properties.insert(
            format!("p{i}"),
            json!({"type": "string", "description": "Optional."}),
        );
    }
    let mut definitions = Map::new();
    for i in 0..defs {
        definitions.insert(
            format!("d{i}"),
            json!({"type": "string", "pattern": pattern}),
        );
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": ["must"],
        "additionalProperties": false,
        "$defs": definitions,
    })
}

/// What a model sends all the time, a required member missing, is refused
/// at the cost of one validation: 100 optional properties and 100
/// definitions (8 KB) took 10,000 pattern compilations before.
#[test]
fn an_invalid_call_costs_work_linear_in_the_schema() {
    let schema = nullplan_bomb(100, 100, "^[^x]{1,300}$");
    let catalog = Catalog::builder()
        .entry(entry("lookup", schema))
        .build()
        .expect("catalog");
    let executor = Executor::new(catalog);
    let envelope = within_hang("an invalid call", move || {
        aptix_testkit::block_on(async {
            let call = ToolCall::new("c1", "lookup", r#"{"p0": "x", "p1": null}"#);
            executor
                .execute(&call, &ToolContext::new())
                .await
                .into_envelope()
                .expect("envelope")
                .to_json_string()
        })
    });
    assert!(envelope.contains("invalid_arguments"), "{envelope}");
    assert!(envelope.contains("must"), "{envelope}");
}
