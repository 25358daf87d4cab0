//! The validator as a whole: `null` members, capped violation lists, duplicate members, closed
//! objects beside combinators, and what the dialects keep of them.

use serde::Deserialize;
use serde_json::Value;

use super::{ArgsValidator, MAX_VIOLATIONS, compilations};
use crate::error::ErrorCode;
use crate::schema::canonical_parameters;

fn validator<T: schemars::JsonSchema>() -> ArgsValidator {
    ArgsValidator::new(&canonical_parameters::<T>()).expect("schema compiles")
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Batch {
    /// The items.
    items: Vec<Item>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Item {
    /// A number.
    #[serde(default)]
    a: u32,
}

fn items(count: usize, member: &str) -> String {
    let items = vec![member; count].join(",");
    format!(r#"{{"items":[{items}]}}"#)
}

/// Whether an optional member accepts `null` is decided once per validator (the first
/// document that needs it), never per member of a document.
#[test]
fn null_members_compile_no_schema_per_document() {
    let validator = validator::<Batch>();
    compilations::reset();
    let _: Batch = validator
        .parse(&items(1, r#"{"a":null}"#))
        .expect("nulls read as absent");
    compilations::reset();
    let batch: Batch = validator
        .parse(&items(10_000, r#"{"a":null}"#))
        .expect("nulls read as absent");
    assert_eq!(batch.items.len(), 10_000);
    assert_eq!(compilations::count(), 0);
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Ranged {
    /// Small numbers.
    items: Vec<Small>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Small {
    /// At most 9.
    #[schemars(range(max = 9))]
    n: u32,
}

/// The violation list is capped, with a count of the rest.
#[test]
fn violations_are_capped_with_a_count_of_the_rest() {
    let validator = validator::<Ranged>();
    let rejection = validator
        .parse::<Ranged>(&items(10_000, r#"{"n":10}"#))
        .expect_err("out of range");
    assert_eq!(rejection.code, ErrorCode::InvalidArguments);
    let details = rejection
        .details
        .as_ref()
        .and_then(Value::as_array)
        .expect("details");
    assert_eq!(details.len(), MAX_VIOLATIONS);
    let more = 10_000 - MAX_VIOLATIONS;
    assert!(
        rejection.message.contains(&format!("{more} more")),
        "{}",
        rejection.message
    );
    assert!(
        rejection.message.len() < 8 * 1024,
        "{}",
        rejection.message.len()
    );
}

#[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
struct Ratio {
    /// A fraction.
    #[schemars(range(min = 0.0, max = 1.0))]
    g: Option<f32>,
}

/// The fused layer must not vouch for an `f32` it checked after rounding; a diverging
/// document (above the maximum in `f64`, equal to it in `f32`).
#[test]
fn fused_layer_declines_f32_targets() {
    let schema = canonical_parameters::<Ratio>();
    let fused = super::fused::FusedValidator::compile(&schema).expect("compiles");
    let raw = r#"{"g":1.0000000000000002}"#;
    assert_eq!(fused.parse::<Ratio>(raw), None);
    let reference = jsonschema::draft202012::new(&schema).expect("compiles");
    let value: Value = serde_json::from_str(raw).expect("json");
    assert!(!reference.is_valid(&value));
    let rejection = validator::<Ratio>()
        .parse::<Ratio>(raw)
        .expect_err("above the maximum");
    assert_eq!(rejection.code, ErrorCode::InvalidArguments);
    // Valid documents still pass, through the other layers.
    assert_eq!(
        validator::<Ratio>().parse::<Ratio>(r#"{"g":0.5}"#),
        Ok(Ratio { g: Some(0.5) })
    );
}

#[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
struct Open {
    /// What to open.
    target: Target,
}

#[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum Target {
    File {
        /// The file's path.
        path: String,
    },
    Labels(std::collections::BTreeMap<String, String>),
}

/// A duplicate member is refused by every layer, with its name and path, instead of
/// the tool getting another variant than the one validated.
#[test]
fn duplicate_members_are_refused_by_every_layer() {
    let raw = r#"{"target":{"path":"/etc/shadow","path":"/srv/public/ok"}}"#;
    let rejection = validator::<Open>()
        .parse::<Open>(raw)
        .expect_err("duplicate member");
    assert_eq!(rejection.code, ErrorCode::InvalidArguments);
    assert!(
        rejection.message.contains("`path`") && rejection.message.contains("/target"),
        "{}",
        rejection.message
    );
    // The same through a `Value` (a client tool's payload) and for plain structs and maps.
    assert!(validator::<Open>().parse::<Value>(raw).is_err());
    let flat = r#"{"items":[{"a":1,"a":2}]}"#;
    assert!(validator::<Batch>().parse::<Batch>(flat).is_err());
    let schema = canonical_parameters::<Batch>();
    if let Some(fused) = super::fused::FusedValidator::compile(&schema) {
        assert!(fused.parse::<Value>(flat).is_none());
    }
    // Escapes spell the same name.
    let escaped = r#"{"items":[{"a":1,"\u0061":2}]}"#;
    let rejection = validator::<Batch>()
        .parse::<Batch>(escaped)
        .expect_err("duplicate");
    assert!(
        rejection.message.contains("/items/0"),
        "{}",
        rejection.message
    );
}

#[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
struct OpenUrl {
    /// The page to open.
    page: Page,
}

#[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
struct Page {
    /// An https URL.
    #[schemars(regex(pattern = "^https://"))]
    url: String,
    #[serde(flatten)]
    mode: Mode,
}

#[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(tag = "mode", rename_all = "snake_case")]
enum Mode {
    Tab,
    Window {
        /// Width in pixels.
        width: u32,
    },
}

/// An object beside a combinator (a flattened enum) is closed too: unknown members
/// are refused, also when the arguments are read as a `Value` (a client tool's payload).
#[test]
fn objects_beside_combinators_are_closed() {
    let validator = validator::<OpenUrl>();
    let good = r#"{"page":{"url":"https://example.com","mode":"tab"}}"#;
    assert!(validator.parse::<OpenUrl>(good).is_ok());
    assert!(validator.parse::<Value>(good).is_ok());
    let window = r#"{"page":{"url":"https://example.com","mode":"window","width":800}}"#;
    assert!(validator.parse::<OpenUrl>(window).is_ok());
    for bad in [
        r#"{"page":{"url":"https://example.com","mode":"tab","onload":"javascript:alert(1)"}}"#,
        r#"{"page":{"__proto__":{"admin":true},"url":"https://example.com","mode":"tab"}}"#,
        // A member of another variant.
        r#"{"page":{"url":"https://example.com","mode":"tab","width":800}}"#,
    ] {
        let rejection = validator.parse::<Value>(bad).expect_err(bad);
        assert_eq!(rejection.code, ErrorCode::InvalidArguments, "{bad}");
        assert!(validator.parse::<OpenUrl>(bad).is_err(), "{bad}");
    }
}

#[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
struct Draw {
    /// What to draw.
    shape: Shape,
}

#[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Shape {
    Circle(Circle),
    Square {
        /// Side length.
        side: f64,
    },
}

#[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
struct Circle {
    /// Radius.
    r: f64,
}

#[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
struct TwoCircles {
    /// A shape.
    shape: Shape,
    /// A plain circle, whose definition the variant shares.
    plain: Circle,
}

/// An internally tagged newtype variant validates (the tag is not "additional" to the
/// struct it wraps), and stays closed.
#[test]
fn internally_tagged_newtype_variants_validate() {
    let draw = validator::<Draw>();
    assert_eq!(
        draw.parse::<Draw>(r#"{"shape":{"kind":"circle","r":1.5}}"#),
        Ok(Draw {
            shape: Shape::Circle(Circle { r: 1.5 })
        })
    );
    assert!(
        draw.parse::<Draw>(r#"{"shape":{"kind":"square","side":2}}"#)
            .is_ok()
    );
    assert!(
        draw.parse::<Value>(r#"{"shape":{"kind":"circle","r":1.5,"extra":1}}"#)
            .is_err()
    );
    // The shared definition stays closed where it is used on its own.
    let validator = validator::<TwoCircles>();
    let good = r#"{"shape":{"kind":"circle","r":1},"plain":{"r":2}}"#;
    assert!(validator.parse::<Value>(good).is_ok());
    let tagged_plain = r#"{"shape":{"kind":"circle","r":1},"plain":{"r":2,"kind":"circle"}}"#;
    assert!(validator.parse::<Value>(tagged_plain).is_err());
}

/// In the provider dialects, the closed combined object keeps its meaning in
/// each, or is refused.
#[test]
fn dialects_keep_combined_objects_closed() {
    use crate::schema::dialect::{Dialect, provider_tool};
    let page = canonical_parameters::<OpenUrl>();
    for dialect in [Dialect::Anthropic, Dialect::Mcp] {
        let lowered = provider_tool(dialect, "open_url", "Opens a page.", &page).expect("lowers");
        assert!(
            lowered
                .to_string()
                .contains(r#""unevaluatedProperties":false"#)
        );
    }
    // OpenAI strict has no `unevaluatedProperties`: each variant becomes one closed object.
    let openai =
        provider_tool(Dialect::OpenAiStrict, "open_url", "Opens a page.", &page).expect("lowers");
    let variants = openai["parameters"]["$defs"]["Page"]["anyOf"]
        .as_array()
        .expect("one closed object per variant");
    assert_eq!(variants.len(), 2);
    for variant in variants {
        assert_eq!(variant["additionalProperties"], Value::Bool(false));
        assert!(variant["properties"].get("url").is_some(), "{variant}");
        assert!(variant["properties"].get("mode").is_some(), "{variant}");
    }
    assert!(!openai.to_string().contains("unevaluatedProperties"));
    // Gemini cannot close objects at all; the executor still does.
    let gemini =
        provider_tool(Dialect::Gemini, "open_url", "Opens a page.", &page).expect("lowers");
    assert!(!gemini.to_string().contains("unevaluatedProperties"));
    // The tagged newtype variant is one plain closed object everywhere.
    let draw = canonical_parameters::<Draw>();
    for dialect in [
        Dialect::OpenAiStrict,
        Dialect::Anthropic,
        Dialect::Gemini,
        Dialect::Mcp,
    ] {
        provider_tool(dialect, "draw", "Draws.", &draw).expect("lowers");
    }
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct Counted {
    items: Vec<Count>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct Count {
    #[serde(rename = "a/b")]
    count: u8,
}

/// A type stricter than its schema (here `u8` under `"type": "integer"`) fails the exact path's
/// typed parse, which names the refused value by its JSON pointer and gives serde's message,
/// without a line and column in the text made from the `Value`, which the model never saw.
#[test]
fn a_type_stricter_than_its_schema_is_refused_at_its_path() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"items": {"type": "array", "items": {
            "type": "object",
            "properties": {"a/b": {"type": "integer"}},
            "required": ["a/b"]
        }}},
        "required": ["items"]
    });
    let validator = ArgsValidator::new(&schema).expect("schema compiles");
    let rejection = validator
        .parse::<Counted>(r#"{"items": [{"a/b": 1}, {"a/b": 300}]}"#)
        .expect_err("300 is no u8");
    assert_eq!(rejection.code, ErrorCode::InvalidArguments);
    assert_eq!(
        rejection.details,
        Some(serde_json::json!([{
            "path": "/items/1/a~1b",
            "message": "invalid value: integer `300`, expected u8"
        }]))
    );
    assert!(!rejection.message.contains("line"), "{}", rejection.message);
}

#[derive(Debug, PartialEq, Deserialize)]
enum Figure {
    Circle { r: u32 },
    Point,
}

#[derive(Debug, Deserialize)]
struct Declined {
    single: f32,
    wide: i128,
    raw: Box<serde_json::value::RawValue>,
    shapes: Vec<Figure>,
    by_number: std::collections::BTreeMap<u32, String>,
    #[serde(rename = "$serde_json::private::RawValue")]
    odd_name: bool,
}

/// What the fast path declines (single-precision floats, 128-bit integers, raw values, enums
/// with data, number-keyed maps, a member with serde_json's private raw-value name) is read on
/// the exact path as `serde_json` reads it.
#[test]
fn the_exact_path_reads_what_the_fast_path_declines() {
    let schema = serde_json::json!({"type": "object"});
    let validator = ArgsValidator::new(&schema).expect("schema compiles");
    let raw = r#"{"single": 0.1, "wide": -5, "raw": {"x": [1, 2]},
        "shapes": [{"Circle": {"r": 2}}, "Point"], "by_number": {"7": "seven"},
        "$serde_json::private::RawValue": true}"#;
    let parsed: Declined = validator.parse(raw).expect("valid");
    let expected: Declined = serde_json::from_str(raw).expect("serde_json reads it");
    assert_eq!(parsed.single.to_bits(), expected.single.to_bits());
    assert_eq!(parsed.wide, -5);
    assert_eq!(parsed.raw.get(), expected.raw.get());
    assert_eq!(parsed.shapes, vec![Figure::Circle { r: 2 }, Figure::Point]);
    assert_eq!(parsed.by_number.get(&7).map(String::as_str), Some("seven"));
    assert!(parsed.odd_name);
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct Numbered {
    by_number: std::collections::BTreeMap<u32, u8>,
}

/// A refused value under a number-keyed map is named by its key.
#[test]
fn a_refusal_under_a_number_key_names_the_key() {
    let schema = serde_json::json!({"type": "object"});
    let validator = ArgsValidator::new(&schema).expect("schema compiles");
    let rejection = validator
        .parse::<Numbered>(r#"{"by_number": {"7": 1, "8": 300}}"#)
        .expect_err("300 is no u8");
    assert_eq!(
        rejection.details,
        Some(serde_json::json!([{
            "path": "/by_number/8",
            "message": "invalid value: integer `300`, expected u8"
        }]))
    );
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct Pair {
    a: u8,
    b: u8,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct Holder {
    pair: Pair,
}

/// The array form `serde_json` also reads for a struct is refused, even where a hand-written
/// schema allows it: the typed parse reads a struct as a map only.
#[test]
fn a_struct_is_read_as_an_object_only() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"pair": {"type": ["object", "array"]}}
    });
    let validator = ArgsValidator::new(&schema).expect("schema compiles");
    let rejection = validator
        .parse::<Holder>(r#"{"pair": [1, 2]}"#)
        .expect_err("an array is no struct here");
    assert_eq!(rejection.code, ErrorCode::InvalidArguments);
    let details = rejection.details.expect("details");
    assert_eq!(details[0]["path"], "/pair", "{details}");
    assert!(
        details[0]["message"]
            .as_str()
            .is_some_and(|message| message.starts_with("invalid type: sequence")),
        "{details}"
    );
}

#[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
struct Optional {
    /// How many; 3 when not given.
    #[serde(default = "three")]
    count: u32,
}

fn three() -> u32 {
    3
}

/// Some models send nothing at all for a tool whose parameters are all optional: an empty or
/// all-whitespace string reads as `{}`, on the fast path and on the exact one, and a schema
/// that requires a member refuses it as `{}` is refused.
#[test]
fn blank_arguments_read_as_an_empty_object() {
    let fast = validator::<Optional>();
    assert!(fast.has_fast_path());
    // A pattern the fast path declines sends the same documents down the exact path.
    let mut schema = canonical_parameters::<Optional>();
    schema["patternProperties"] = serde_json::json!({ "^x_": { "type": "string" } });
    let exact = ArgsValidator::new(&schema).expect("schema compiles");
    assert!(!exact.has_fast_path());
    for validator in [&fast, &exact] {
        for blank in ["", "  ", "\n\t "] {
            let parsed: Optional = validator.parse(blank).expect("blank reads as {}");
            assert_eq!(parsed, Optional { count: 3 });
        }
    }
    let required = validator::<Small>();
    let blank = required.parse::<Small>(" ").expect_err("n is required");
    let empty = required.parse::<Small>("{}").expect_err("n is required");
    assert_eq!(blank, empty);
    assert_eq!(blank.code, ErrorCode::InvalidArguments);
}

/// A map key read as bytes (`serde_bytes`, `bytes::Bytes` keys do so).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ByteKey(Vec<u8>);

impl<'de> Deserialize<'de> for ByteKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Bytes;
        impl serde::de::Visitor<'_> for Bytes {
            type Value = ByteKey;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E>(self, bytes: &[u8]) -> Result<ByteKey, E> {
                Ok(ByteKey(bytes.to_vec()))
            }
            fn visit_str<E>(self, text: &str) -> Result<ByteKey, E> {
                Ok(ByteKey(text.as_bytes().to_vec()))
            }
        }
        deserializer.deserialize_bytes(Bytes)
    }
}

#[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
struct ByBytes {
    /// Counts by key.
    #[schemars(with = "std::collections::HashMap<String, u32>")]
    counts: std::collections::HashMap<ByteKey, u32>,
}

/// What `serde_json::from_str` reads, the validator reads: a map whose keys are read as bytes
/// (the fast path declines them, so the exact path's typed read must take them).
#[test]
fn map_keys_read_as_bytes_are_read() {
    let text = r#"{"counts":{"a":1,"b":2}}"#;
    let expected: ByBytes = serde_json::from_str(text).expect("serde_json reads it");
    let parsed: ByBytes = validator::<ByBytes>()
        .parse(text)
        .unwrap_or_else(|rejection| panic!("{rejection:?}"));
    assert_eq!(parsed, expected);
}

/// The red team's schema (2026-11-27, R1): `props` optional string properties, one required,
/// and `defs` definitions each with a `pattern`.
fn nullplan_bomb(props: usize, defs: usize) -> Value {
    let mut properties = serde_json::Map::new();
    properties.insert("must".into(), serde_json::json!({"type": "string"}));
    for i in 0..props {
        properties.insert(format!("p{i}"), serde_json::json!({"type": "string"}));
    }
    let mut definitions = serde_json::Map::new();
    for i in 0..defs {
        definitions.insert(
            format!("d{i}"),
            serde_json::json!({"type": "string", "pattern": "^[^x]{1,30}$"}),
        );
    }
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": ["must"],
        "$defs": definitions,
    })
}

/// Planning which `null` members read as absent compiles no schema and no pattern: the first
/// invalid call of a tool costs the exact path's validator (its one distinct pattern), the same
/// whatever the number of properties and definitions, not a compilation of every definition per
/// optional property (R1).
#[test]
fn planning_nulls_compiles_nothing_per_property() {
    let mut counts = Vec::new();
    for (props, defs) in [(4, 4), (40, 40)] {
        let validator = ArgsValidator::new(&nullplan_bomb(props, defs)).expect("compiles");
        compilations::reset();
        let rejection = validator
            .parse::<Value>(r#"{"p0": "x", "p1": null}"#)
            .expect_err("`must` is missing");
        assert_eq!(rejection.code, ErrorCode::InvalidArguments);
        counts.push(compilations::count());
    }
    assert_eq!(counts[0], counts[1], "{counts:?}");
    assert!(counts[1] <= 5, "{counts:?}");
}

/// The plan's answer to "does this schema accept `null`" is `jsonschema`'s wherever it gives
/// one, and it gives one for the shapes schemars writes.
#[test]
fn null_answers_agree_with_jsonschema() {
    use serde_json::json;
    let defs = json!({
        "S": {"type": "string"},
        "N": {"type": ["integer", "null"]},
        "Loop": {"$ref": "#/$defs/Loop"},
    });
    let decided = [
        json!(true),
        json!(false),
        json!({}),
        json!({"minLength": 3}),
        json!({"type": "string"}),
        json!({"type": ["string", "null"]}),
        json!({"enum": ["a", null]}),
        json!({"enum": ["a"]}),
        json!({"const": null}),
        json!({"const": 0}),
        json!({"$ref": "#/$defs/S"}),
        json!({"$ref": "#/$defs/N"}),
        json!({"anyOf": [{"$ref": "#/$defs/S"}, {"type": "null"}]}),
        json!({"anyOf": [{"$ref": "#/$defs/S"}, {"type": "integer"}]}),
        json!({"oneOf": [{"type": "null"}, {"enum": [null, 1]}]}),
        json!({"oneOf": [{"type": "null"}, {"type": "string"}]}),
        json!({"allOf": [{"$ref": "#/$defs/N"}, {"type": "integer"}]}),
        json!({"allOf": [{"$ref": "#/$defs/N"}, {"minimum": 1}]}),
        json!({"not": {"type": "null"}}),
        json!({"not": {"type": "string"}}),
        json!({"if": {"type": "null"}, "then": false}),
        json!({"if": {"type": "string"}, "else": {"type": "integer"}}),
        json!({"type": "object", "nullable": true}),
        json!({"$ref": "#/$defs/S", "default": null}),
    ];
    let undecided = [
        json!({"$ref": "#/$defs/Loop"}),
        json!({"$ref": "#/$defs/Missing"}),
        json!({"anyOf": [{"$ref": "#/$defs/Loop"}, {"type": "string"}]}),
    ];
    for schema in decided.iter().chain(&undecided) {
        let mut whole = match schema {
            Value::Object(node) => node.clone(),
            _ => serde_json::Map::new(),
        };
        whole.insert("$defs".into(), defs.clone());
        let whole = match schema {
            Value::Bool(_) => schema.clone(),
            _ => Value::Object(whole),
        };
        let answer = super::NullAnswers::default().accepts(&whole, &whole, 0);
        let decided = decided.contains(schema);
        assert_eq!(answer.is_some(), decided, "{schema}");
        if let (Some(answer), Ok(reference)) = (answer, jsonschema::draft202012::new(&whole)) {
            assert_eq!(answer, reference.is_valid(&Value::Null), "{schema}");
        }
    }
}

/// The patterns of one schema compile within a budget, each counted at the smallest size
/// limit it fits in; lookaround is refused by `jsonschema` as by the fused layer.
#[test]
fn patterns_compile_within_a_budget_per_schema() {
    use super::patterns::{
        MAX_SCHEMA_PATTERN_BYTES, PatternBudget, PatternError, reference_validator,
    };
    let tiny = |budget: &mut PatternBudget, i: usize| {
        budget.compile(|limit| {
            regex::RegexBuilder::new(&format!("^a{i}$"))
                .size_limit(limit)
                .build()
        })
    };
    let mut budget = PatternBudget::default();
    let fit = MAX_SCHEMA_PATTERN_BYTES / (4 << 10);
    for i in 0..fit {
        assert!(tiny(&mut budget, i).is_ok(), "pattern {i}");
    }
    assert_eq!(
        tiny(&mut budget, fit).map(|_| ()),
        Err(PatternError::OverBudget)
    );
    // Too large for any size limit.
    let mut budget = PatternBudget::default();
    let huge = budget.compile(|limit| {
        regex::RegexBuilder::new("(?:[^a]{1,1000}){1,8}")
            .size_limit(limit)
            .build()
    });
    assert_eq!(huge.map(|_| ()), Err(PatternError::Refused));
    // Lookahead: declined by the fused layer, refused by `jsonschema` on the `regex` engine.
    let schema = serde_json::json!({"type": "string", "pattern": "^(?=a)a+$"});
    assert!(super::fused::FusedValidator::compile(&schema).is_none());
    let refused = reference_validator(&schema).expect_err("lookahead");
    assert!(refused.contains("/pattern"), "{refused}");
    assert!(ArgsValidator::new(&schema).is_err());
}
