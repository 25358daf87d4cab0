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
use aptix::{
    Catalog, Dialect, Executor, ToolEntry, catalog::CatalogError, catalog::CatalogProblem,
    schema::DefinitionError,
};
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

fn entry(name: &str, parameters: Value) -> aptix::catalog::ToolEntryBuilder {
    ToolEntry::from_json_schema(
        name,
        "Test tool.",
        "A hostile schema.",
        parameters,
        never_run,
    )
}

fn refusal(built: Result<Catalog, CatalogError>) -> String {
    match built {
        Ok(catalog) => panic!(
            "the catalog was built with {:?}",
            catalog
                .definitions()
                .map(|d| d.name().to_owned())
                .collect::<Vec<_>>()
        ),
        Err(error) => match error.problems.as_slice() {
            [CatalogProblem::Definition(DefinitionError::InvalidSchema { message, .. })] => {
                message.clone()
            }
            other => panic!("{other:?}"),
        },
    }
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
    // The call runs on the hang detector's thread, on a runtime of its own:
    // validation is synchronous work, which no timer of the test's runtime
    // could interrupt.
    let envelope = within_hang("an invalid call", move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
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

// ---------------------------------------------------------------------
// R7: a pattern the fused validator declines (a lookahead) ran on
// fancy-regex, whose backtracking is bounded only per string (1M steps);
// patterns compiled without a size bound of their own.
// ---------------------------------------------------------------------

/// Exponential for a backtracking engine on a run of `a`s.
const BACKTRACKING: &str = "^(?:(?:a|(?=a)a)+b|a+)$";

fn string_property(pattern: &str) -> Value {
    json!({
        "type": "object",
        "properties": {"q": {"type": "string", "pattern": pattern, "description": "Query."}},
        "additionalProperties": false,
    })
}

/// A pattern no linear-time engine runs is refused when the catalog is
/// built, naming the pattern: the arguments of a call are never matched
/// against it by a backtracking engine.
#[test]
fn a_pattern_without_a_linear_time_match_is_refused_in_parameters() {
    let message = refusal(
        Catalog::builder()
            .entry(entry("scan", string_property(BACKTRACKING)))
            .build(),
    );
    assert!(
        message.contains(BACKTRACKING) && message.contains("linear-time"),
        "{message}"
    );
}

/// The same in an output schema, against which a remote server's results
/// (and a client's or a person's) are checked.
#[test]
fn a_pattern_without_a_linear_time_match_is_refused_in_an_output_schema() {
    let output = json!({
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "string", "pattern": BACKTRACKING}}},
    });
    let built = Catalog::builder()
        .entry(
            entry(
                "scan",
                json!({"type": "object", "additionalProperties": false}),
            )
            .output_schema(output),
        )
        .build();
    let built = match built {
        // Refused when first used, it must at least not run: checked on a
        // thread, as the red team's result (200 strings of 17 `a`s) would.
        Ok(catalog) => {
            let definition = catalog.get("scan").cloned().expect("listed");
            let items: Vec<Value> = (0..200).map(|_| Value::String("a".repeat(17))).collect();
            let checked = within_hang("checking a result", move || {
                definition.check_output(&json!({"items": items}))
            });
            panic!("the catalog was built; checking a result gave {checked:?}")
        }
        Err(error) => Err(error),
    };
    let message = refusal(built);
    assert!(
        message.contains("output schema") && message.contains("linear-time"),
        "{message}"
    );
}

/// Distinct patterns, each under the size bound of one pattern, that
/// together would compile to far more than one schema's patterns may.
fn many_large_patterns(count: usize) -> Value {
    let mut properties = Map::new();
    for i in 0..count {
        // A class of all but one character, 400 times: about 600 KB of
        // compiled automaton each.
        let excluded = char::from(b'a' + (i % 26) as u8);
        let pattern = format!("^[^{excluded}]{{1,400}}x{i}$");
        properties.insert(
            format!("p{i}"),
            json!({"type": "string", "pattern": pattern, "description": "Text."}),
        );
    }
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

/// One pattern compiles to a bounded automaton, and so do a schema's
/// patterns together: 64 large ones (under 4 KB of schema) are refused,
/// naming the bound, instead of taking some 40 MB in each of two engines.
#[test]
fn a_schema_whose_patterns_compile_too_large_is_refused() {
    let message = refusal(
        Catalog::builder()
            .entry(entry("wide", many_large_patterns(64)))
            .build(),
    );
    assert!(
        message.contains("patterns would compile to more than"),
        "{message}"
    );
    // One pattern far past the bound of one pattern.
    let message = refusal(
        Catalog::builder()
            .entry(entry("long", string_property("^(?:[^a]{1,1000}){1,8}$")))
            .build(),
    );
    assert!(
        message.contains("/properties/q/pattern") && message.contains("MiB"),
        "{message}"
    );
    // A few large ones are fine.
    Catalog::builder()
        .entry(entry("some", many_large_patterns(2)))
        .build()
        .expect("two large patterns");
}

// ---------------------------------------------------------------------
// R2: OpenAI strict lowering inlined every `$ref` that carries a
// description; 1024 inlines of one large definition made a tool spec a
// thousand times its schema.
// ---------------------------------------------------------------------

/// `refs` properties each `{"$ref": "#/$defs/Big", "description": "x"}`,
/// and `Big` an object of `fields` string properties.
fn inline_bomb(refs: usize, fields: usize) -> Value {
    let mut big = Map::new();
    for i in 0..fields {
        big.insert(
            format!("f{i}"),
            json!({"type": "string", "description": "A field."}),
        );
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    for i in 0..refs {
        properties.insert(
            format!("r{i}"),
            json!({"$ref": "#/$defs/Big", "description": "x"}),
        );
        required.push(Value::String(format!("r{i}")));
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
        "$defs": {"Big": {"type": "object", "properties": big, "additionalProperties": false}},
    })
}

fn lowered_bytes(
    parameters: &Value,
    dialect: Dialect,
) -> Result<usize, aptix::schema::DialectError> {
    let parameters = parameters.clone();
    within_hang("lowering", move || {
        aptix::schema::dialect::lower(dialect, &parameters).map(|lowered| lowered.to_string().len())
    })
}

/// The OpenAI strict spec of a tool stays within a small multiple of its
/// schema: past the bound, a `$ref` keeps its reference and loses its
/// description instead of being copied again.
#[test]
fn openai_strict_lowering_stays_within_a_multiple_of_the_schema() {
    let parameters = inline_bomb(1020, 300);
    let canonical = parameters.to_string().len();
    let catalog = Catalog::builder()
        .entry(entry("wide", parameters.clone()))
        .build()
        .expect("catalog");
    let sent = within_hang("lowering the catalog", move || {
        catalog
            .lower(Dialect::OpenAiStrict)
            .map(|tools| Value::Array(tools).to_string().len())
    })
    .expect("lowered");
    assert!(
        sent < 8 * canonical,
        "a schema of {canonical} bytes lowered to {sent} bytes (x{})",
        sent / canonical
    );
    // A few such references are still inlined with their descriptions.
    let small = inline_bomb(3, 4);
    let lowered = aptix::schema::dialect::lower(Dialect::OpenAiStrict, &small).expect("lowered");
    assert_eq!(lowered["properties"]["r0"]["description"], "x");
    assert!(
        lowered["properties"]["r0"]["properties"]
            .get("f0")
            .is_some(),
        "{lowered}"
    );
}

/// Gemini has no `$ref` and must inline every one: past the bound the
/// lowering is refused, naming the limit.
#[test]
fn gemini_lowering_is_refused_past_the_bound() {
    let parameters = inline_bomb(1020, 300);
    let canonical = parameters.to_string().len();
    match lowered_bytes(&parameters, Dialect::Gemini) {
        Ok(sent) => panic!("a schema of {canonical} bytes lowered to {sent} bytes for Gemini"),
        Err(error) => assert!(error.reason.contains("bytes"), "{error}"),
    }
    // Anthropic and MCP take the schema as it is.
    for dialect in [Dialect::Anthropic, Dialect::Mcp, Dialect::OpenAiCompatible] {
        assert_eq!(
            lowered_bytes(&parameters, dialect),
            Ok(canonical),
            "{dialect}"
        );
    }
}

/// An object closed beside `anyOf` is written out once per branch for
/// OpenAI strict mode: many branches of a large object are refused rather
/// than multiplied.
#[test]
fn distributing_an_object_over_many_branches_is_bounded() {
    let mut properties = Map::new();
    for i in 0..200 {
        properties.insert(
            format!("f{i}"),
            json!({"type": "string", "description": "A field."}),
        );
    }
    let branches: Vec<Value> = (0..2000)
        .map(|i| json!({"required": [format!("f{}", i % 200)]}))
        .collect();
    let parameters = json!({
        "type": "object",
        "properties": properties,
        "anyOf": branches,
        "unevaluatedProperties": false,
    });
    let wrapped = json!({
        "type": "object",
        "properties": {"w": parameters},
        "required": ["w"],
        "additionalProperties": false,
    });
    let canonical = wrapped.to_string().len();
    match lowered_bytes(&wrapped, Dialect::OpenAiStrict) {
        Ok(sent) => assert!(
            sent < 8 * canonical,
            "a schema of {canonical} bytes lowered to {sent} bytes (x{})",
            sent / canonical
        ),
        Err(error) => assert!(error.reason.contains("bytes"), "{error}"),
    }
}

/// Proving the branches of a `oneOf` mutually exclusive (OpenAI strict and
/// Gemini read it as `anyOf`) follows shared required members: a
/// definition whose required members all refer to itself made that proof
/// exponential in its depth.
#[test]
fn proving_branches_exclusive_is_bounded() {
    let mut inner = Map::new();
    let mut required = Vec::new();
    for i in 0..12 {
        inner.insert(format!("m{i}"), json!({"$ref": "#/$defs/Node"}));
        required.push(Value::String(format!("m{i}")));
    }
    let parameters = json!({
        "type": "object",
        "properties": {"x": {"oneOf": [{"$ref": "#/$defs/Node"}, {"$ref": "#/$defs/Node"}]}},
        "required": ["x"],
        "additionalProperties": false,
        "$defs": {"Node": {"type": "object", "properties": inner, "required": required, "additionalProperties": false}},
    });
    for dialect in [Dialect::OpenAiStrict, Dialect::Gemini] {
        // Not provably exclusive (both branches are the same schema): refused,
        // once the steps a proof may take are spent.
        match lowered_bytes(&parameters, dialect) {
            Ok(sent) => panic!("lowered to {sent} bytes for {dialect}"),
            Err(error) => assert!(error.reason.contains("steps"), "{error}"),
        }
    }
}

/// Each `$ref` is checked not to lead into a loop of bare references; a
/// long chain of them checked once per reference was quadratic.
#[test]
fn checking_chains_of_references_is_bounded() {
    let mut defs = Map::new();
    let links = 6000;
    for i in 0..links {
        defs.insert(
            format!("d{i}"),
            json!({"$ref": format!("#/$defs/d{}", i + 1)}),
        );
    }
    defs.insert(format!("d{links}"), json!({"type": "string"}));
    let parameters = json!({
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/d0", "description": "A chain."}},
        "required": ["x"],
        "additionalProperties": false,
        "$defs": defs,
    });
    for dialect in Dialect::ALL {
        let _ = lowered_bytes(&parameters, dialect);
    }
}
