//! The fused validator against `jsonschema` on schemas written by hand and generated at
//! random, read as a `serde_json::Value` (a client tool's payload): each expectation is
//! `jsonschema`'s answer, and the fused validator may vouch only for documents it accepts,
//! reading them as the exact path does.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::FusedValidator;
use super::tests::Rng;
use crate::schema::canonical_parameters;
use crate::validate::{RAW_TOKEN, parse_value};

/// `jsonschema`'s answer on the text, as the exact path sees it.
fn reference(validator: &jsonschema::Validator, raw: &str) -> bool {
    parse_value(raw).is_ok_and(|value| validator.is_valid(&value))
}

/// The fused answer on `raw` is sound: `Some` only for a document `jsonschema` accepts, and
/// the same value the exact path reads.
fn sound(fused: &FusedValidator, raw: &str, valid: bool) -> Result<(), TestCaseError> {
    if let Some(value) = fused.parse::<Value>(raw) {
        prop_assert!(valid, "accepted what jsonschema rejects: {}", raw);
        prop_assert_eq!(
            Some(value),
            parse_value(raw).ok(),
            "read differently: {}",
            raw
        );
    }
    Ok(())
}

/// Each `(document, expected)`: `jsonschema` answers `expected`, and the fused validator (where
/// it compiles the schema) is sound on it.
fn check(schema: Value, cases: &[(&str, bool)]) {
    let slow = jsonschema::draft202012::new(&schema).expect("jsonschema compiles");
    let fused = FusedValidator::compile(&schema);
    for (raw, expected) in cases {
        assert_eq!(
            reference(&slow, raw),
            *expected,
            "jsonschema: {schema} on {raw}"
        );
        if let Some(fused) = &fused
            && let Err(error) = sound(fused, raw, *expected)
        {
            panic!("fused: {schema}: {error}");
        }
    }
}

fn declined(schema: Value) {
    assert!(
        FusedValidator::compile(&schema).is_none(),
        "should decline {schema}"
    );
}

/// Keywords, keyword values and patterns outside what one pass checks exactly are left to
/// `jsonschema`.
#[test]
fn declines_what_it_cannot_check_exactly() {
    declined(json!({"type": "float"}));
    declined(json!({"type": []}));
    declined(json!({"type": ["string", "string"]}));
    declined(json!({"multipleOf": 0.5}));
    declined(json!({"multipleOf": 0}));
    declined(json!({"multipleOf": 1.0}));
    for pattern in [
        "(?=a)", "(?!a)", "(?<=a)", "(a)\\1", "\\bword", "[[a]]", "a{,2}", "\\x41", "\\u0041",
        "a**", "[a-]b]", "(?<n>a)", "[\\w-z]", "[z-a]", "{", "a{2", "\\p{L}", "\\c", "[]",
    ] {
        declined(json!({"pattern": pattern}));
    }
    declined(json!({"$ref": "#"}));
    declined(
        json!({"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"anyOf": [{"$ref": "#/$defs/A"}]}}, "$ref": "#/$defs/A"}),
    );
    declined(json!({"$ref": "#/$defs/Missing"}));
    declined(json!({"$ref": "other.json"}));
    declined(json!({"properties": {"a": {"$defs": {}}}}));
    declined(json!({"if": {}, "then": {}}));
    declined(json!({"patternProperties": {}}));
    declined(json!({"$schema": "https://json-schema.org/draft/2020-12/schema"}));
    declined(json!({"required": ["a", "a"]}));
    declined(json!({"minLength": -1}));
    declined(json!({"minLength": 1.0}));
    declined(json!({"title": 1}));
}

/// Only soundness, no expectation.
fn agree(schema: Value, docs: &[&str]) {
    let slow = jsonschema::draft202012::new(&schema).expect("jsonschema compiles");
    let cases: Vec<(&str, bool)> = docs
        .iter()
        .map(|raw| (*raw, reference(&slow, raw)))
        .collect();
    check(schema, &cases);
}

#[test]
fn malformed_and_trailing_text_is_invalid() {
    check(
        json!({}),
        &[
            ("", false),
            ("{", false),
            ("{} x", false),
            ("{}{}", false),
            ("[1,]", false),
            ("nul", false),
            ("NaN", false),
            ("\"\\ud800\"", false),
            ("\"\u{1}\"", false),
            ("1e400", false),
            ("-", false),
            ("01", false),
            (" {} \n", true),
            ("\"\\ud83d\\ude00\"", true),
        ],
    );
}

#[test]
fn deep_input_is_invalid_not_a_crash() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    check(json!({}), &[(&deep, false)]);
    let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
    check(
        json!({"items": {"$ref": "#"}}),
        &[(&ok, true), (&deep, false)],
    );
    let objects = format!("{}1{}", "{\"a\":".repeat(5_000), "}".repeat(5_000));
    check(
        json!({"properties": {"a": {"$ref": "#"}}}),
        &[(&objects, false)],
    );
}

#[test]
fn applicators_over_deep_documents_stay_polynomial() {
    // Both branches descend into the same subtree: a naive walk is exponential in depth.
    let schema = json!({"oneOf": [
        {"type": "object", "properties": {"x": {"$ref": "#"}}},
        {"type": "object", "properties": {"x": {"$ref": "#"}}, "required": ["y"]},
        {"type": "integer"}
    ]});
    let doc = format!("{}1{}", "{\"x\":".repeat(120), "}".repeat(120));
    let started = std::time::Instant::now();
    check(schema, &[(&doc, true)]);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn raw_value_token_matches_the_value_parse() {
    // Under `serde_json/raw_value` (on in aptix's workspace) a `Value` parse reads this
    // member name specially; whichever way serde_json is built, the answers must agree.
    let token = RAW_TOKEN;
    let docs = [
        format!(r#"{{"{token}": "[1, 2]"}}"#),
        format!(r#"{{"{token}": "{{\"name\": \"Ada\"}}"}}"#),
        format!(r#"{{"{token}": "{{\"name\": 1}}"}}"#),
        format!(r#"{{"{token}": "[1, "}}"#),
        format!(r#"{{"{token}": 1}}"#),
        format!(r#"{{"{token}": "1", "name": "Ada"}}"#),
        format!(r#"{{"name": "Ada", "{token}": "1"}}"#),
        format!(r#"{{"name": {{"{token}": "\"Ada\""}}}}"#),
        format!(r#"{{"name": {{"{token}": "7"}}, "name": "Ada"}}"#),
        format!(r#"{{"name": {{"{token}": "nope"}}, "name": "Ada"}}"#),
        format!(r#"[{{"{token}": "{{}}"}}]"#),
    ];
    let docs: Vec<&str> = docs.iter().map(String::as_str).collect();
    for schema in [
        json!({}),
        json!({"type": "object"}),
        json!({"type": "array"}),
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        json!({"properties": {"name": {"type": "string"}}, "additionalProperties": false}),
        json!({"items": {"type": "integer"}}),
        json!({"enum": [[1, 2], {"name": "Ada"}]}),
        json!({"not": {"type": "object"}}),
    ] {
        agree(schema, &docs);
    }
}

#[test]
fn type_keyword() {
    check(
        json!({"type": "integer"}),
        &[
            ("1", true),
            ("1.0", true),
            ("-0", true),
            ("-0.0", true),
            ("1e2", true),
            ("1.5e1", true),
            ("1e-2", false),
            ("1.5", false),
            ("18446744073709551616", true),
            ("-9223372036854775809", true),
            ("123456789012345678901234567890.5", true),
            ("\"1\"", false),
            ("null", false),
        ],
    );
    check(
        json!({"type": ["string", "null"]}),
        &[("\"x\"", true), ("null", true), ("1", false), ("[]", false)],
    );
    check(
        json!({"type": "number"}),
        &[("1", true), ("0.5", true), ("true", false)],
    );
    check(
        json!({"type": ["array", "object", "boolean"]}),
        &[("[]", true), ("{}", true), ("false", true), ("0", false)],
    );
}

#[test]
fn enum_and_const() {
    check(
        json!({"enum": ["red", "green", 1, null, [1, {"a": 2}], {"b": [true]}]}),
        &[
            ("\"red\"", true),
            ("\"r\\u0065d\"", true),
            ("\"blue\"", false),
            ("1.0", true),
            ("1e0", true),
            ("2", false),
            ("null", true),
            ("false", false),
            ("[1.0, {\"a\": 2.0}]", true),
            ("[1, {\"a\": 3}]", false),
            ("{\"b\": [true]}", true),
            ("{\"b\": [true], \"c\": 1}", false),
            ("{\"b\": [false], \"b\": [true]}", false),
        ],
    );
    check(
        json!({"const": 0}),
        &[("0", true), ("-0.0", true), ("0.0", true), ("1", false)],
    );
    check(
        json!({"const": 9_007_199_254_740_993_u64}),
        &[
            ("9007199254740993", true),
            ("9007199254740992", false),
            ("9007199254740993.0", false),
        ],
    );
    check(json!({"enum": []}), &[("1", false), ("null", false)]);
    check(
        json!({"type": "string", "enum": ["a", "b"]}),
        &[("\"a\"", true), ("\"c\"", false)],
    );
}

#[test]
fn numeric_bounds() {
    check(
        json!({"minimum": 1, "maximum": 2.5}),
        &[
            ("1", true),
            ("0.9999999999999999", false),
            ("2.5", true),
            ("2.5000000000000004", false),
            ("\"9\"", true),
        ],
    );
    check(
        json!({"exclusiveMinimum": -1, "exclusiveMaximum": 18_446_744_073_709_551_615_u64}),
        &[
            ("-1", false),
            ("-0.9", true),
            ("18446744073709551614", true),
            ("18446744073709551615", false),
            ("18446744073709551616", false),
            ("1e19", true),
            ("1.8446744073709552e19", false),
        ],
    );
    check(
        json!({"maximum": 9_007_199_254_740_992_u64}),
        &[("9007199254740993", false), ("9007199254740993.0", true)],
    );
    check(
        json!({"minimum": -9_223_372_036_854_775_808_i64}),
        &[
            ("-9223372036854775808", true),
            ("-9223372036854775809", true),
            ("-9223372036854777856", false),
        ],
    );
}

#[test]
fn multiple_of() {
    check(
        json!({"multipleOf": 3}),
        &[
            ("9", true),
            ("-9", true),
            ("10", false),
            ("9.0", true),
            ("0", true),
            ("-0.0", true),
            ("4.5", false),
            ("18446744073709551615", true),
            ("18446744073709551616", false),
            ("\"x\"", true),
        ],
    );
    agree(
        json!({"multipleOf": 3}),
        &[
            "1e300",
            "3e300",
            "1.7976931348623157e308",
            "9007199254740993.0",
        ],
    );
    check(
        json!({"multipleOf": 2}),
        &[
            ("1e300", true),
            ("9007199254740994.0", true),
            ("1e-320", false),
        ],
    );
}

#[test]
fn string_lengths_and_patterns() {
    check(
        json!({"minLength": 2, "maxLength": 3}),
        &[
            ("\"a\"", false),
            ("\"ab\"", true),
            ("\"ééé\"", true),
            ("\"😀😀😀\"", true),
            ("\"\\ud83d\\ude00\"", false),
            ("\"abcd\"", false),
            ("5", true),
        ],
    );
    check(
        json!({"pattern": "^[a-z]+\\d{2,}$"}),
        &[
            ("\"abc12\"", true),
            ("\"abc1\"", false),
            ("\"ABC12\"", false),
            ("\"abc١٢\"", false),
        ],
    );
    check(
        json!({"pattern": "a.c"}),
        &[
            ("\"xabcx\"", true),
            ("\"a\\nc\"", false),
            ("\"a\\u2028c\"", false),
            ("\"aéc\"", true),
        ],
    );
    check(
        json!({"pattern": "^\\w+\\s\\S$"}),
        &[
            ("\"ab x\"", true),
            ("\"é x\"", false),
            ("\"ab\\ufeffx\"", true),
            ("\"ab\\u0085x\"", false),
        ],
    );
    check(
        json!({"pattern": "^(?:ab|c)*[-.]?$"}),
        &[("\"abcab-\"", true), ("\"abx\"", false), ("\"\"", true)],
    );
}

#[test]
fn arrays() {
    check(
        json!({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}),
        &[
            ("[\"a\"]", true),
            ("[\"a\", 1, 2]", true),
            ("[\"a\", 1, 2, 3]", false),
            ("[]", false),
            ("[1]", false),
            ("[\"a\", 1.5]", false),
        ],
    );
    check(
        json!({"uniqueItems": true}),
        &[
            ("[1, 2]", true),
            ("[1, 1.0]", false),
            ("[{\"a\": 1}, {\"a\": 1.0}]", false),
            ("[[1], [2]]", true),
            (
                "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, -0.0]",
                false,
            ),
            (
                "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18.5]",
                true,
            ),
        ],
    );
    check(json!({"items": false}), &[("[]", true), ("[1]", false)]);
}

#[test]
fn objects_and_duplicate_keys() {
    let schema = json!({
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
        "required": ["name"],
        "additionalProperties": false
    });
    check(
        schema,
        &[
            ("{\"name\": \"Ada\"}", true),
            ("{\"n\\u0061me\": \"Ada\"}", true),
            ("{\"name\": \"Ada\", \"age\": 36}", true),
            ("{\"age\": 36}", false),
            ("{\"name\": \"Ada\", \"x\": 1}", false),
            // A repeated name is refused, whichever value comes last.
            ("{\"name\": 1, \"name\": \"Ada\"}", false),
            ("{\"name\": \"Ada\", \"name\": 1}", false),
            ("{\"name\": \"Ada\", \"age\": -1, \"age\": 2}", false),
            ("[]", false),
        ],
    );
    check(
        json!({"additionalProperties": {"type": "integer"}, "minProperties": 2, "maxProperties": 2}),
        &[
            ("{\"a\": 1, \"b\": 2}", true),
            ("{\"a\": 1, \"a\": 2}", false),
            ("{\"a\": 1, \"a\": 2, \"b\": 3}", false),
            ("{\"a\": \"x\", \"b\": 1, \"a\": 2}", false),
            ("{\"a\": 1, \"b\": 1, \"a\": \"x\"}", false),
            ("{\"\\u0061\": \"x\", \"b\": 1, \"a\": 2}", false),
        ],
    );
    check(
        json!({"required": ["a"], "additionalProperties": false}),
        &[("{}", false), ("{\"a\": 1}", false), ("1", true)],
    );
    check(
        json!({"properties": {"a": {"properties": {"b": {"type": "null"}}}}}),
        &[
            ("{\"a\": {\"b\": 1}, \"a\": {\"b\": null}}", false),
            ("{\"a\": {\"b\": null, \"b\": 1}}", false),
        ],
    );
    let many: serde_json::Map<String, Value> = (0..70)
        .map(|i| (format!("p{i}"), json!({"type": "integer"})))
        .collect();
    check(
        json!({"properties": many, "required": ["p69", "p0"]}),
        &[
            ("{\"p0\": 1, \"p69\": 2}", true),
            ("{\"p0\": 1}", false),
            ("{\"p0\": 1, \"p69\": \"x\"}", false),
        ],
    );
}

#[test]
fn refs_and_applicators() {
    let tree = json!({
        "type": "object",
        "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
        "$defs": {"Node": {"$ref": "#"}}
    });
    check(
        tree,
        &[
            (
                "{\"value\": 1, \"children\": [{\"value\": 2, \"children\": []}]}",
                true,
            ),
            ("{\"value\": 1, \"children\": [{\"value\": \"x\"}]}", false),
        ],
    );
    check(
        json!({"properties": {"c": {"anyOf": [{"$ref": "#/$defs/C"}, {"type": "null"}]}}, "$defs": {"C": {"type": "string", "enum": ["r", "g"]}}}),
        &[
            ("{\"c\": null}", true),
            ("{\"c\": \"r\"}", true),
            ("{\"c\": \"b\"}", false),
            ("{\"c\": {}}", false),
        ],
    );
    check(
        json!({"oneOf": [{"type": "object", "required": ["a"]}, {"type": "object", "required": ["b"]}, {"type": "string"}]}),
        &[
            ("{\"a\": 1}", true),
            ("{\"a\": 1, \"b\": 2}", false),
            ("{}", false),
            ("\"s\"", true),
            ("1", false),
        ],
    );
    check(
        json!({"allOf": [{"type": "integer"}, {"minimum": 2}], "not": {"const": 3}}),
        &[("2", true), ("3", false), ("1", false), ("2.5", false)],
    );
    check(
        json!({"$ref": "#/$defs/A", "maxProperties": 1, "$defs": {"A": {"additionalProperties": {"type": "string"}}}}),
        &[
            ("{\"a\": \"x\"}", true),
            ("{\"a\": 1}", false),
            ("{\"a\": \"x\", \"b\": \"y\"}", false),
        ],
    );
}

#[test]
fn annotations_and_format_are_ignored() {
    check(
        json!({"type": "integer", "format": "uint8", "title": "t", "description": "d", "default": 300,
               "examples": [1], "deprecated": true, "readOnly": false, "writeOnly": false, "$comment": "c"}),
        &[("300", true), ("-5", true)],
    );
    check(
        json!({"type": "string", "format": "email"}),
        &[("\"not an email\"", true)],
    );
    check(
        json!({"type": "string", "format": "date-time"}),
        &[("\"yesterday\"", true)],
    );
}

// ----- schemars-generated schemas -----

mod derived {
    #![allow(dead_code)]
    use schemars::JsonSchema;
    use serde::Deserialize;

    #[derive(JsonSchema, Deserialize)]
    pub(crate) struct Greet {
        /// Who to greet.
        pub(crate) name: String,
    }

    #[derive(JsonSchema, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub(crate) enum Color {
        Red,
        Green,
        Blue,
    }

    #[derive(JsonSchema, Deserialize)]
    pub(crate) struct Inner {
        pub(crate) x: i32,
        pub(crate) next: Option<Box<Inner>>,
    }

    #[derive(JsonSchema, Deserialize)]
    pub(crate) enum Shape {
        Circle { r: f64 },
        Square(f64),
        Empty,
    }

    #[derive(JsonSchema, Deserialize)]
    pub(crate) struct Ten {
        pub(crate) id: u32,
        pub offset: i64,
        pub ratio: f64,
        pub title: String,
        pub enabled: bool,
        pub note: Option<String>,
        pub bytes: Vec<u8>,
        pub color: Color,
        pub inner: Option<Inner>,
        pub limit: Option<u16>,
        pub shape: Option<Shape>,
        #[serde(default)]
        pub tags: Vec<String>,
    }
}

#[test]
fn schemars_schemas_compile_and_agree() {
    let greet = canonical_parameters::<derived::Greet>();
    check(
        greet,
        &[
            ("{\"name\":\"Ada Lovelace\"}", true),
            ("{\"name\":null}", false),
            ("{}", false),
            ("{\"name\":\"Ada\",\"extra\":1}", false),
        ],
    );
    let ten = canonical_parameters::<derived::Ten>();
    check(
        ten.clone(),
        &[
            (TEN_FIELDS, true),
            (&TEN_FIELDS.replace("\"green\"", "\"pink\""), false),
            (&TEN_FIELDS.replace("\"id\":7", "\"id\":-7"), false),
            (&TEN_FIELDS.replace("\"id\":7", "\"id\":7.5"), false),
            (
                &TEN_FIELDS.replace("\"shape\":null", "\"shape\":{\"Circle\":{\"r\":1.5}}"),
                true,
            ),
            (
                &TEN_FIELDS.replace("\"shape\":null", "\"shape\":{\"Square\":2}"),
                true,
            ),
            (
                &TEN_FIELDS.replace("\"shape\":null", "\"shape\":\"Empty\""),
                true,
            ),
            (
                &TEN_FIELDS.replace("\"shape\":null", "\"shape\":{\"Circle\":{}}"),
                false,
            ),
            (
                &TEN_FIELDS.replace(
                    "\"shape\":null",
                    "\"shape\":{\"Square\":2,\"Circle\":{\"r\":1}}",
                ),
                false,
            ),
            (
                &TEN_FIELDS.replace(
                    "\"inner\":{\"x\":1,\"next\":null}",
                    "\"inner\":{\"x\":1,\"next\":{\"x\":2,\"next\":{\"x\":\"3\"}}}",
                ),
                false,
            ),
        ],
    );
    // The formats schemars writes (uint32, int64, double, uint8, ...) are annotations.
    assert!(ten.to_string().contains("\"format\":\"uint32\""));
}

const TEN_FIELDS: &str = r#"{"id":7,"offset":-3,"ratio":0.5,"title":"t","enabled":true,"note":null,"bytes":[1,2,255],"color":"green","inner":{"x":1,"next":null},"limit":10,"tags":["a"],"shape":null}"#;

// ----- random schemas against random documents -----

const KEYS: [&str; 6] = ["a", "b", "c", "ü", "k\"q", "x y"];

fn scalar_pool() -> Vec<Value> {
    vec![
        json!(null),
        json!(true),
        json!(false),
        json!(0),
        json!(1),
        json!(-1),
        json!(1.0),
        json!(1.5),
        json!(2),
        json!(3),
        json!(-0.0),
        json!(9_007_199_254_740_993_u64),
        json!(18_446_744_073_709_551_615_u64),
        json!(-9_223_372_036_854_775_808_i64),
        json!(1e19),
        json!(""),
        json!("a"),
        json!("ab"),
        json!("é"),
        json!("1"),
    ]
}

fn patterns() -> Vec<&'static str> {
    vec![
        "",
        "a",
        "^a",
        "a$",
        "^ab$",
        "^(a|b)$",
        "^[a-c]+$",
        "[^a]",
        "\\d",
        "^\\d+$",
        "\\w",
        "^\\S*$",
        "\\s",
        ".",
        "^.$",
        "^.{2,3}$",
        "a*b?",
        "(ab)+",
        "^(?:a|é)*$",
        "[\\d.]",
        "^[-a]$",
        "^\\.$",
        "\\$",
        "x|",
        "^(a|b|)$",
        "é+",
        "^[^\\s]+$",
        "a{2}",
        "^a{1,}$",
        "^\\/",
        "[a\\-z]",
        "\\D\\W",
        "^[\\w\\s]*$",
        "a+?",
        "^(?:)$",
        "^$",
        "\\t|\\n",
        "[é-ü]",
    ]
}

fn limit_pool() -> Vec<Value> {
    vec![
        json!(0),
        json!(1),
        json!(-1),
        json!(2.5),
        json!(-0.5),
        json!(3),
        json!(9_007_199_254_740_992_u64),
        json!(18_446_744_073_709_551_615_u64),
        json!(-9_223_372_036_854_775_808_i64),
        json!(1e19),
        json!(-1e300),
    ]
}

fn small_count() -> impl Strategy<Value = Option<u64>> {
    prop::option::weighted(0.3, 0u64..4)
}

fn types() -> impl Strategy<Value = Value> {
    let names = [
        "null", "boolean", "integer", "number", "string", "array", "object",
    ];
    prop_oneof![
        prop::sample::select(names.to_vec()).prop_map(|t| json!(t)),
        prop::sample::subsequence(names.to_vec(), 1..4).prop_map(|t| json!(t)),
    ]
}

fn insert(members: &mut serde_json::Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        members.insert(key.into(), value);
    }
}

fn leaf() -> impl Strategy<Value = Value> {
    let limits = limit_pool();
    let number = (
        prop::option::of(prop::sample::select(vec!["integer", "number"])),
        prop::option::weighted(0.3, prop::sample::select(limits.clone())),
        prop::option::weighted(0.3, prop::sample::select(limits.clone())),
        prop::option::weighted(0.2, prop::sample::select(limits.clone())),
        prop::option::weighted(0.2, prop::sample::select(limits)),
        prop::option::weighted(0.2, prop::sample::select(vec![1u64, 2, 3, 7, 10, 1 << 53])),
    )
        .prop_map(|(ty, min, max, xmin, xmax, multiple)| {
            let mut m = serde_json::Map::new();
            insert(&mut m, "type", ty.map(|t| json!(t)));
            insert(&mut m, "minimum", min);
            insert(&mut m, "maximum", max);
            insert(&mut m, "exclusiveMinimum", xmin);
            insert(&mut m, "exclusiveMaximum", xmax);
            insert(&mut m, "multipleOf", multiple.map(|d| json!(d)));
            Value::Object(m)
        });
    let string = (
        prop::bool::ANY,
        small_count(),
        small_count(),
        prop::option::weighted(0.5, prop::sample::select(patterns())),
    )
        .prop_map(|(typed, min, max, pattern)| {
            let mut m = serde_json::Map::new();
            insert(&mut m, "type", typed.then(|| json!("string")));
            insert(&mut m, "minLength", min.map(|n| json!(n)));
            insert(&mut m, "maxLength", max.map(|n| json!(n)));
            insert(&mut m, "pattern", pattern.map(|p| json!(p)));
            insert(&mut m, "format", typed.then(|| json!("email")));
            Value::Object(m)
        });
    let mut enum_items = scalar_pool();
    enum_items.extend([
        json!([1]),
        json!([1.0, "a"]),
        json!({"a": 1}),
        json!({}),
        json!([]),
    ]);
    let enumeration = prop::sample::subsequence(enum_items.clone(), 0..5)
        .prop_map(|items| json!({"enum": items}));
    let constant = prop::sample::select(enum_items).prop_map(|item| json!({"const": item}));
    prop_oneof![
        1 => Just(json!(true)),
        1 => Just(json!(false)),
        1 => Just(json!({"description": "anything"})),
        3 => types().prop_map(|t| json!({"type": t})),
        4 => number,
        4 => string,
        2 => enumeration,
        2 => constant,
        1 => Just(json!({"$ref": "#"})),
        2 => prop::sample::select(vec!["D0", "D1"]).prop_map(|d| json!({"$ref": format!("#/$defs/{d}")})),
    ]
}

fn schema() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 40, 4, |inner| {
        let object = (
            prop::bool::ANY,
            prop::collection::btree_map(prop::sample::select(KEYS.to_vec()), inner.clone(), 0..4),
            prop::sample::subsequence(KEYS.to_vec(), 0..3),
            prop_oneof![
                Just(None),
                Just(Some(json!(true))),
                Just(Some(json!(false))),
                inner.clone().prop_map(Some)
            ],
            small_count(),
            small_count(),
        )
            .prop_map(|(typed, properties, required, additional, min, max)| {
                let mut m = serde_json::Map::new();
                insert(&mut m, "type", typed.then(|| json!("object")));
                if !properties.is_empty() {
                    m.insert("properties".into(), json!(properties));
                }
                if !required.is_empty() {
                    m.insert("required".into(), json!(required));
                }
                insert(&mut m, "additionalProperties", additional);
                insert(&mut m, "minProperties", min.map(|n| json!(n)));
                insert(&mut m, "maxProperties", max.map(|n| json!(n)));
                Value::Object(m)
            });
        let array = (
            prop::bool::ANY,
            prop::option::of(inner.clone()),
            prop::collection::vec(inner.clone(), 0..3),
            small_count(),
            small_count(),
            prop::option::weighted(0.25, prop::bool::ANY),
        )
            .prop_map(|(typed, items, prefix, min, max, unique)| {
                let mut m = serde_json::Map::new();
                insert(&mut m, "type", typed.then(|| json!("array")));
                insert(&mut m, "items", items);
                if !prefix.is_empty() {
                    m.insert("prefixItems".into(), json!(prefix));
                }
                insert(&mut m, "minItems", min.map(|n| json!(n)));
                insert(&mut m, "maxItems", max.map(|n| json!(n)));
                insert(&mut m, "uniqueItems", unique.map(|u| json!(u)));
                Value::Object(m)
            });
        prop_oneof![
            4 => object,
            3 => array,
            3 => inner.clone().prop_map(|s| json!({"anyOf": [s, {"type": "null"}]})),
            1 => prop::collection::vec(inner.clone(), 1..4).prop_map(|v| json!({"anyOf": v})),
            1 => prop::collection::vec(inner.clone(), 1..4).prop_map(|v| json!({"oneOf": v})),
            1 => prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"allOf": v})),
            1 => inner.clone().prop_map(|s| json!({"not": s})),
            1 => (inner.clone(), inner).prop_map(|(a, b)| match (a, b) {
                (Value::Object(mut a), Value::Object(b)) => {
                    for (k, v) in b {
                        a.entry(k).or_insert(v);
                    }
                    Value::Object(a)
                }
                (a, _) => a,
            }),
        ]
    })
}

fn root_schema() -> impl Strategy<Value = Value> {
    (schema(), schema(), schema()).prop_map(|(root, d0, d1)| {
        let mut root = match root {
            Value::Object(m) => m,
            other => {
                let mut m = serde_json::Map::new();
                m.insert("allOf".into(), json!([other]));
                m
            }
        };
        root.insert("$defs".into(), json!({"D0": d0, "D1": d1}));
        Value::Object(root)
    })
}

const NUMBER_TEXTS: [&str; 42] = [
    "0",
    "-0",
    "0.0",
    "-0.0",
    "1",
    "1.0",
    "1.5",
    "2",
    "3",
    "-1",
    "-1.0",
    "7",
    "10",
    "1e1",
    "1E+1",
    "2.5e0",
    "1e2",
    "-1e-2",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "-9223372036854775809",
    "9007199254740993",
    "9007199254740992.0",
    "1e19",
    "1e300",
    "1e400",
    "123456789012345678901234567890",
    "0.30000000000000004",
    "4.0",
    "14",
    "2.5",
    "-0.5",
    "21",
    "10000000000000000000",
    "9223372036854775807",
    "-9223372036854775807",
    "0.1",
    "1.7976931348623157e308",
    "5e-324",
    "-1e-400",
    "1e-400",
];
const STRING_TEXTS: [&str; 20] = [
    "\"\"",
    "\"a\"",
    "\"ab\"",
    "\"abc\"",
    "\"é\"",
    "\"\\u00e9\"",
    "\"\\ud83d\\ude00\"",
    "\"😀\"",
    "\"\\ud800\"",
    "\"a b\"",
    "\"1\"",
    "\"12\"",
    "\"\\n\"",
    "\"x\\u0000\"",
    "\"\u{1}\"",
    "\"aab\"",
    "\"b\"",
    "\"ü\"",
    "\"\\u2028\"",
    "\".\"",
];

fn key_text(rng: &mut Rng, key: &str) -> String {
    if key == "a" && rng.chance(20) {
        return "\"\\u0061\"".into();
    }
    Value::String(key.into()).to_string()
}

fn random_doc(rng: &mut Rng, depth: usize) -> String {
    if depth > 0 && rng.chance(3) {
        let inner = random_doc(rng, depth - 1);
        let extra = if rng.chance(20) { ",\"a\":1" } else { "" };
        return format!("{{\"{}\":{}{extra}}}", RAW_TOKEN, Value::String(inner));
    }
    match rng.below(if depth == 0 { 4 } else { 6 }) {
        0 => rng.pick(&["null", "true", "false"]).to_string(),
        1 => rng.pick(&NUMBER_TEXTS).to_string(),
        2 | 3 => rng.pick(&STRING_TEXTS).to_string(),
        4 => {
            let items: Vec<String> = (0..rng.below(4))
                .map(|_| random_doc(rng, depth - 1))
                .collect();
            format!("[{}]", items.join(","))
        }
        _ => {
            let members: Vec<String> = (0..rng.below(4))
                .map(|_| {
                    let key = *rng.pick(&KEYS);
                    format!("{}:{}", key_text(rng, key), random_doc(rng, depth - 1))
                })
                .collect();
            format!("{{{}}}", members.join(","))
        }
    }
}

/// A document that tries to follow `schema` (with deliberate slips).
fn guided_doc(rng: &mut Rng, root: &Value, schema: &Value, depth: usize) -> String {
    if depth == 0 || rng.chance(5) {
        return random_doc(rng, 1);
    }
    let Value::Object(m) = schema else {
        return random_doc(rng, 2);
    };
    if let Some(Value::String(reference)) = m.get("$ref") {
        let target = if reference == "#" {
            Some(root)
        } else {
            reference
                .strip_prefix("#/$defs/")
                .and_then(|name| root.get("$defs").and_then(|d| d.get(name)))
        };
        if let Some(target) = target
            && rng.chance(70)
        {
            return guided_doc(rng, root, target, depth - 1);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = m.get(key)
            && rng.chance(70)
        {
            let branch = rng.pick(branches).clone();
            return guided_doc(rng, root, &branch, depth - 1);
        }
    }
    for key in ["enum", "const"] {
        let items = match m.get(key) {
            Some(Value::Array(items)) if key == "enum" => items.clone(),
            Some(item) if key == "const" => vec![item.clone()],
            _ => continue,
        };
        if !items.is_empty() && rng.chance(80) {
            let item = rng.pick(&items).clone();
            return match item {
                Value::Number(n)
                    if rng.chance(30)
                        && n.as_f64()
                            .is_some_and(|f| f.fract() == 0.0 && f.abs() < 1e15) =>
                {
                    format!("{}.0", n.as_f64().unwrap_or(0.0) as i64)
                }
                other => other.to_string(),
            };
        }
    }
    let ty = match m.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) if !ts.is_empty() => {
            rng.pick(ts).as_str().unwrap_or("null").to_owned()
        }
        _ if m.contains_key("properties")
            || m.contains_key("required")
            || m.contains_key("additionalProperties") =>
        {
            "object".into()
        }
        _ if m.contains_key("items") || m.contains_key("prefixItems") => "array".into(),
        _ if m.contains_key("pattern") || m.contains_key("minLength") => "string".into(),
        _ if m.contains_key("minimum") || m.contains_key("multipleOf") => "number".into(),
        _ => return random_doc(rng, 2),
    };
    match ty.as_str() {
        "object" => {
            let mut members = Vec::new();
            if let Some(Value::Object(properties)) = m.get("properties") {
                for (key, sub) in properties {
                    if rng.chance(75) {
                        members.push(format!(
                            "{}:{}",
                            key_text(rng, key),
                            guided_doc(rng, root, sub, depth - 1)
                        ));
                    }
                }
            }
            if let Some(Value::Array(required)) = m.get("required") {
                for key in required.iter().filter_map(Value::as_str) {
                    if rng.chance(60) {
                        let sub = m
                            .get("additionalProperties")
                            .cloned()
                            .unwrap_or(json!(true));
                        members.push(format!(
                            "{}:{}",
                            key_text(rng, key),
                            guided_doc(rng, root, &sub, depth - 1)
                        ));
                    }
                }
            }
            if rng.chance(25) {
                let sub = m
                    .get("additionalProperties")
                    .cloned()
                    .unwrap_or(json!(true));
                let key = *rng.pick(&KEYS);
                members.push(format!(
                    "{}:{}",
                    key_text(rng, key),
                    guided_doc(rng, root, &sub, depth - 1)
                ));
            }
            if !members.is_empty() && rng.chance(20) {
                let dup = rng.pick(&members).clone();
                let at = rng.below(members.len() + 1);
                members.insert(at, dup);
            }
            if members.len() > 1 && rng.chance(30) {
                let a = rng.below(members.len());
                let b = rng.below(members.len());
                members.swap(a, b);
            }
            format!("{{{}}}", members.join(","))
        }
        "array" => {
            let mut items = Vec::new();
            if let Some(Value::Array(prefix)) = m.get("prefixItems") {
                for sub in prefix {
                    if rng.chance(85) {
                        items.push(guided_doc(rng, root, sub, depth - 1));
                    }
                }
            }
            let sub = m.get("items").cloned().unwrap_or(json!(true));
            for _ in 0..rng.below(4) {
                items.push(guided_doc(rng, root, &sub, depth - 1));
            }
            if !items.is_empty() && rng.chance(20) {
                let dup = rng.pick(&items).clone();
                items.push(dup);
            }
            format!("[{}]", items.join(","))
        }
        "string" => {
            let alphabet = [
                "a", "b", "c", "é", "1", " ", "-", ".", "\\n", "/", "ü", "$", "\\u2028", "_",
            ];
            let len = rng.below(5);
            let body: String = (0..len).map(|_| *rng.pick(&alphabet)).collect();
            format!("\"{body}\"")
        }
        "integer" | "number" => {
            let mut candidates: Vec<String> = NUMBER_TEXTS.iter().map(|s| s.to_string()).collect();
            for key in [
                "minimum",
                "maximum",
                "exclusiveMinimum",
                "exclusiveMaximum",
                "multipleOf",
            ] {
                if let Some(Value::Number(n)) = m.get(key) {
                    candidates.push(n.to_string());
                    if let Some(f) = n.as_f64() {
                        candidates.push(Value::from(f + 1.0).to_string());
                        candidates.push(Value::from(f * 2.0).to_string());
                    }
                }
            }
            rng.pick(&candidates).clone()
        }
        "boolean" => rng.pick(&["true", "false"]).to_string(),
        "null" => "null".into(),
        _ => random_doc(rng, 2),
    }
}

/// Malformed or odd variants of a document.
fn mutate(rng: &mut Rng, text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let at = rng.below(chars.len() + 1);
    let (head, tail): (String, String) =
        (chars[..at].iter().collect(), chars[at..].iter().collect());
    match rng.below(6) {
        0 => head,
        1 => format!(
            "{text}{}",
            rng.pick(&[" x", "}", ",1", "]", " ", "\n", "{}"])
        ),
        2 => format!(
            "{head}{}{tail}",
            rng.pick(&["\"", ",", "{", "1", " ", "\\", ":"])
        ),
        3 => format!("{head}{}", &tail.chars().skip(1).collect::<String>()),
        4 => format!(" \t{text}\r\n"),
        _ => text.replace(':', " : ").replace(',', " , "),
    }
}

fn agree_on(schema: &Value, seed: u64) -> Result<(), TestCaseError> {
    let Some(fused) = FusedValidator::compile(schema) else {
        return Ok(());
    };
    let slow = match jsonschema::draft202012::new(schema) {
        Ok(slow) => slow,
        Err(error) => {
            return Err(TestCaseError::fail(format!(
                "jsonschema rejects {schema}: {error}"
            )));
        }
    };
    let mut rng = Rng(seed | 1);
    for round in 0..16 {
        let mut doc = if round % 4 == 3 {
            random_doc(&mut rng, 3)
        } else {
            guided_doc(&mut rng, schema, schema, 6)
        };
        if round % 5 == 4 {
            doc = mutate(&mut rng, &doc);
        }
        sound(&fused, &doc, reference(&slow, &doc))
            .map_err(|error| TestCaseError::fail(format!("schema {schema}: {error}")))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6000, max_shrink_iters: 2000, ..ProptestConfig::default() })]

    #[test]
    fn agrees_with_jsonschema(schema in root_schema(), seed in any::<u64>()) {
        agree_on(&schema, seed)?;
    }

    #[test]
    fn patterns_agree_with_jsonschema(pattern in pattern_strategy(), subjects in prop::collection::vec(subject_strategy(), 8)) {
        let schema = json!({"pattern": pattern});
        if let Some(fused) = FusedValidator::compile(&schema) {
            let slow = jsonschema::draft202012::new(&schema).map_err(|e| TestCaseError::fail(format!("{schema}: {e}")))?;
            for subject in subjects {
                let doc = Value::String(subject).to_string();
                let valid = reference(&slow, &doc);
                sound(&fused, &doc, valid)?;
                prop_assert_eq!(fused.parse::<Value>(&doc).is_some(), valid, "pattern {} on {}", pattern, doc);
            }
        }
    }
}

fn pattern_strategy() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        prop::sample::select(vec![
            "a", "b", "é", "1", " ", "-", "\\.", "\\d", "\\w", "\\s", "\\D", "\\W", "\\S", ".",
            "\\n", "\\/", "_", "😀", "\\t"
        ])
        .prop_map(str::to_owned),
        prop::sample::select(vec![
            "[ab]", "[^a]", "[a-c]", "[\\d_]", "[-a]", "[a-]", "[^\\s]", "[\\W]", "[é-ü]", "[.]",
            "[\\]]", "[\\^a]", "[a^]"
        ])
        .prop_map(str::to_owned),
    ];
    let quantified = (
        atom,
        prop::sample::select(vec![
            "", "", "", "*", "+", "?", "{2}", "{1,}", "{0,2}", "*?", "+?",
        ]),
    )
        .prop_map(|(a, q)| format!("{a}{q}"));
    let seq = prop::collection::vec(quantified, 0..4).prop_map(|parts| parts.concat());
    let group = seq.clone().prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..3).prop_map(|alts| alts.join("|")),
            (
                inner.clone(),
                prop::sample::select(vec!["", "*", "?", "+", "{1,2}"])
            )
                .prop_map(|(g, q)| format!("({g}){q}")),
            (inner, prop::sample::select(vec!["", "*", "?"]))
                .prop_map(|(g, q)| format!("(?:{g}){q}")),
        ]
    });
    let structured = (prop::bool::ANY, group, prop::bool::ANY).prop_map(|(start, body, end)| {
        format!(
            "{}{body}{}",
            if start { "^" } else { "" },
            if end { "$" } else { "" }
        )
    });
    // Arbitrary strings of regex syntax: whatever of these compiles must still agree.
    let noise = prop::collection::vec(
        prop::sample::select(vec![
            'a', 'b', '\\', '[', ']', '(', ')', '?', '*', '+', '{', '}', '1', '2', ',', '-', '^',
            '$', '|', '.', 'd', 'w', 's', 'S', 'b', 'B', ':', '=', '!', '<', 'u', 'x', 'c', 'n',
            '0', '/', '&', '~', 'é',
        ]),
        0..10,
    )
    .prop_map(|chars| chars.into_iter().collect::<String>());
    prop_oneof![3 => structured, 2 => noise]
}

fn subject_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            'a', 'b', 'c', 'é', 'ü', '1', '٣', ' ', '\n', '\r', '\u{2028}', '\u{feff}', '\u{85}',
            '\u{a0}', '-', '.', '_', '/', '😀', '^', ']', '\t',
        ]),
        0..6,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

#[test]
fn schemars_schemas_agree_on_random_documents() {
    for schema in [
        canonical_parameters::<derived::Greet>(),
        canonical_parameters::<derived::Ten>(),
        canonical_parameters::<derived::Inner>(),
        canonical_parameters::<derived::Shape>(),
    ] {
        for seed in 1..400 {
            agree_on(&schema, seed * 7919).expect("agreement");
        }
    }
}
