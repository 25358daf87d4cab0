//! Provider dialects of a tool's JSON Schema.
//!
//! Every tool has one *canonical* parameters schema: JSON Schema draft 2020-12
//! as produced by schemars and post-processed by Aptix (object root,
//! `additionalProperties: false` on every object that has `properties`, or
//! `unevaluatedProperties: false` when they sit beside `oneOf`/`anyOf`,
//! reusable types under root `$defs`). Each LLM provider accepts a different
//! subset of JSON Schema in its tool definitions; [`lower`] turns the canonical
//! schema into one provider's whole tool definition.
//!
//! # The contract
//!
//! **A lowering that would change meaning is an error, never a silent change.**
//! A provider that is handed a schema it cannot enforce either rejects the
//! request or, worse, constrains the model to arguments the tool will then
//! refuse (or accepts ones it should not). So every keyword is either
//! expressed exactly in the target dialect, rewritten into an equivalent form,
//! or refused with a [`DialectError`] that names the keyword's JSON pointer in
//! the canonical schema. The only things ever dropped are those that cannot
//! change which arguments are valid, and each is listed here:
//!
//! * annotations: `default`, `examples`, `deprecated`, `readOnly`,
//!   `writeOnly`, `$comment` (OpenAI strict and Gemini only; Anthropic and MCP
//!   receive the canonical schema untouched);
//! * schemars' numeric `format`s (`int32`, `uint64`, `double`, ...), which
//!   only restate the Rust type; its range is already in `minimum`/`maximum`
//!   where it matters (Gemini keeps the four numeric formats it knows);
//! * `uniqueItems: false`, which asserts nothing;
//! * the root `$schema`, which names the canonical dialect;
//! * OpenAI only: the `description`/`title` beside a `$ref` that points back
//!   into a schema being lowered (strict mode accepts no keywords beside
//!   `$ref`, and such a reference cannot be inlined);
//! * Gemini only: `additionalProperties: false` and `unevaluatedProperties:
//!   false`, which Gemini cannot express
//!   (the executor validates arguments against the canonical schema, so extra
//!   properties are still rejected); `$defs`, once every `$ref` is inlined;
//!   string `format`s other than `date-time` and `enum`, since draft 2020-12
//!   makes `format` an annotation (OpenAI strict mode, which rejects unknown
//!   formats outright, refuses them instead).
//!
//! OpenAI strict mode also forces two rewrites, each documented where it is
//! made:
//!
//! * Every property must be listed in `required`, so a property the canonical
//!   schema leaves optional becomes required-but-nullable: the model sends
//!   `null` where it would have left the property out. Callers that
//!   deserialize OpenAI arguments should treat `null` for such a property as
//!   "absent" (serde already does for `Option` fields, not for
//!   `#[serde(default)]` ones).
//! * Every object must be closed. An object closed as a whole beside
//!   `oneOf`/`anyOf` (`unevaluatedProperties: false`: serde's flattened enum)
//!   becomes one closed object per branch, with the outer members in each;
//!   one that does not merge that simply is refused.
//! * An object that declares no properties and
//!   says nothing about additional ones (schemars' schema for a struct
//!   without fields, i.e. a tool without arguments) becomes the closed empty
//!   object; any other open object or map is refused.
//!
//! # The dialects
//!
//! * [`Dialect::OpenAiStrict`]: OpenAI Structured Outputs strict mode. Objects
//!   closed with every property required (see above); `$defs`/`$ref` kept,
//!   recursion included, except that a `$ref` carrying a description is
//!   replaced by its definition; `oneOf` becomes `anyOf` when its branches
//!   are provably mutually exclusive (serde's tagged enum shapes are);
//!   unsupported keywords and formats refused.
//! * [`Dialect::Anthropic`]: the canonical schema as is; Anthropic accepts
//!   full JSON Schema except a composition at the root.
//! * [`Dialect::Gemini`]: Gemini's OpenAPI 3 subset. Every `$ref` inlined (a
//!   recursive one is an error), `[T, "null"]` and `anyOf[.., {"type":"null"}]`
//!   turned into `nullable: true`, `const` into a one-value `enum`, `oneOf`
//!   into `anyOf` as for OpenAI; unsupported keywords refused.
//! * [`Dialect::Mcp`]: the canonical schema as is; MCP clients read 2020-12.
//!
//! Every dialect checks that the root is an object schema and that every
//! `$ref` resolves inside the parameters.
//!
//! All functions here are pure and deterministic: the same input always gives
//! the same output, and the input is never modified.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

/// A provider's dialect of JSON Schema for tool definitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// OpenAI function tools with `strict: true` (Structured Outputs), in the
    /// flat Responses-API shape.
    OpenAiStrict,
    /// Anthropic Messages API tools (`input_schema`).
    Anthropic,
    /// Gemini function declarations (the OpenAPI 3 `Schema` subset).
    Gemini,
    /// Model Context Protocol `tools/list` entries (`inputSchema`).
    Mcp,
}

impl Dialect {
    /// Every dialect, in a fixed order.
    pub const ALL: [Dialect; 4] = [
        Dialect::OpenAiStrict,
        Dialect::Anthropic,
        Dialect::Gemini,
        Dialect::Mcp,
    ];

    /// The dialect's stable identifier, as accepted by [`FromStr`].
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::OpenAiStrict => "openai_strict",
            Dialect::Anthropic => "anthropic",
            Dialect::Gemini => "gemini",
            Dialect::Mcp => "mcp",
        }
    }

    /// How error messages name the provider's schema support.
    fn provider(self) -> &'static str {
        match self {
            Dialect::OpenAiStrict => "OpenAI strict mode",
            Dialect::Anthropic => "Anthropic",
            Dialect::Gemini => "Gemini",
            Dialect::Mcp => "MCP",
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a [`Dialect`] from a string that names none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dialect `{input}`; expected one of openai_strict, openai, anthropic, gemini, mcp")]
pub struct ParseDialectError {
    /// The string that was not recognised.
    pub input: String,
}

impl FromStr for Dialect {
    type Err = ParseDialectError;

    /// Accepts the [`Dialect::as_str`] identifiers, plus `openai` for
    /// [`Dialect::OpenAiStrict`] (Aptix only ever emits strict OpenAI tools).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "openai_strict" | "openai" => Ok(Dialect::OpenAiStrict),
            "anthropic" => Ok(Dialect::Anthropic),
            "gemini" => Ok(Dialect::Gemini),
            "mcp" => Ok(Dialect::Mcp),
            _ => Err(ParseDialectError {
                input: s.to_owned(),
            }),
        }
    }
}

/// A canonical schema that a dialect cannot express without changing meaning.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool `{tool}` cannot be expressed in the {dialect} dialect at `{path}`: {reason}")]
pub struct DialectError {
    /// The tool's name.
    pub tool: String,
    /// The dialect that was asked for.
    pub dialect: Dialect,
    /// JSON pointer into the canonical parameters, e.g.
    /// `/properties/when/pattern`; `""` for the root.
    pub path: String,
    /// What cannot be expressed, and why.
    pub reason: String,
}

/// The whole provider tool definition for `dialect`.
///
/// * [`Dialect::OpenAiStrict`] gives
///   `{"type":"function","name","description","parameters","strict":true}`.
/// * [`Dialect::Anthropic`] gives `{"name","description","input_schema"}`.
/// * [`Dialect::Gemini`] gives `{"name","description","parameters"}`;
///   `parameters` is omitted for a tool without properties, because Gemini
///   rejects an `OBJECT` schema whose `properties` is empty.
/// * [`Dialect::Mcp`] gives `{"name","description","inputSchema"}`.
///
/// Every dialect requires `parameters` to be an object schema with
/// `"type": "object"` whose `$ref`s all resolve inside it.
pub fn lower(
    dialect: Dialect,
    name: &str,
    description: &str,
    parameters: &serde_json::Value,
) -> Result<serde_json::Value, DialectError> {
    let mut cx = Lowering {
        dialect,
        tool: name,
        root: parameters,
        open: vec![String::new()],
        expansions: 0,
    };
    let root = cx.check_root()?;
    check_references(&cx, parameters, "", 0)?;
    let mut tool = Map::new();
    match dialect {
        Dialect::OpenAiStrict => {
            // Strict mode wants a plain object at the root ("root objects
            // must not be anyOf").
            for keyword in ["anyOf", "oneOf"] {
                if root.contains_key(keyword) {
                    return Err(cx.error(
                        &pointer_push("", keyword),
                        format!("OpenAI strict mode does not accept `{keyword}` at the root of `parameters`"),
                    ));
                }
            }
            let lowered = openai_schema(&mut cx, parameters, "", 0)?;
            tool.insert("type".into(), Value::from("function"));
            tool.insert("name".into(), Value::from(name));
            tool.insert("description".into(), Value::from(description));
            tool.insert("parameters".into(), lowered);
            tool.insert("strict".into(), Value::Bool(true));
        }
        Dialect::Anthropic => {
            // Anthropic accepts full JSON Schema, except that the root of
            // `input_schema` may not be a composition: the API answers
            // "input_schema does not support oneOf, allOf, or anyOf at the
            // top level".
            for keyword in ["allOf", "anyOf", "oneOf"] {
                if root.contains_key(keyword) {
                    return Err(cx.error(
                        &pointer_push("", keyword),
                        format!("Anthropic does not accept `{keyword}` at the top level of `input_schema`"),
                    ));
                }
            }
            tool.insert("name".into(), Value::from(name));
            tool.insert("description".into(), Value::from(description));
            tool.insert("input_schema".into(), parameters.clone());
        }
        Dialect::Gemini => {
            let lowered = gemini_schema(&mut cx, parameters, "", 0)?;
            tool.insert("name".into(), Value::from(name));
            tool.insert("description".into(), Value::from(description));
            let has_properties = lowered
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|properties| !properties.is_empty());
            if has_properties {
                tool.insert("parameters".into(), Value::Object(lowered));
            }
        }
        Dialect::Mcp => {
            // MCP clients accept draft 2020-12 as is: the canonical schema is
            // the MCP schema.
            tool.insert("name".into(), Value::from(name));
            tool.insert("description".into(), Value::from(description));
            tool.insert("inputSchema".into(), parameters.clone());
        }
    }
    Ok(Value::Object(tool))
}

// ---------------------------------------------------------------------------
// Shared machinery
// ---------------------------------------------------------------------------

/// Deepest schema nesting followed (inlined references count), so that no
/// input can exhaust the stack.
const MAX_DEPTH: usize = 128;

/// Most `$ref`s inlined for one tool. Inlining a DAG of definitions can grow
/// exponentially; no real tool comes near this.
const MAX_EXPANSIONS: usize = 1024;

/// Annotations that every dialect here can carry, kept as they are.
const KEPT_ANNOTATIONS: [&str; 2] = ["description", "title"];

/// Annotations that never affect validation and that the lowered dialects
/// (OpenAI strict, Gemini) do not accept: dropped.
const DROPPED_ANNOTATIONS: [&str; 6] = [
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
];

/// The `format`s schemars puts on Rust numbers. They restate the Rust type
/// and are not validated for JSON numbers beyond what `minimum`/`maximum`
/// already say.
const NUMERIC_FORMATS: [&str; 14] = [
    "int8", "int16", "int32", "int64", "int128", "int", "uint8", "uint16", "uint32", "uint64",
    "uint128", "uint", "float", "double",
];

/// String formats OpenAI strict mode supports.
const OPENAI_FORMATS: [&str; 9] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Formats Gemini's `Schema.format` knows.
const GEMINI_FORMATS: [&str; 6] = ["int32", "int64", "float", "double", "enum", "date-time"];

/// JSON Schema's type names.
const TYPE_NAMES: [&str; 7] = [
    "null", "boolean", "object", "array", "number", "integer", "string",
];

struct Lowering<'a> {
    dialect: Dialect,
    tool: &'a str,
    root: &'a Value,
    /// Canonical pointers of the schemas whose bodies are being lowered,
    /// outermost first. Inlining one of these again would never end.
    open: Vec<String>,
    /// `$ref`s inlined so far.
    expansions: usize,
}

impl Lowering<'_> {
    fn error(&self, path: &str, reason: impl Into<String>) -> DialectError {
        DialectError {
            tool: self.tool.to_owned(),
            dialect: self.dialect,
            path: path.to_owned(),
            reason: reason.into(),
        }
    }

    fn tuple_items(&self, path: &str) -> DialectError {
        self.error(
            path,
            format!(
                "{} does not support `items` as an array (tuple validation)",
                self.dialect.provider()
            ),
        )
    }

    fn one_of_next_to_any_of(&self, path: &str) -> DialectError {
        self.error(
            path,
            format!(
                "{} cannot express `oneOf` next to `anyOf`: both would have to become the one `anyOf`",
                self.dialect.provider()
            ),
        )
    }

    /// A keyword the dialect cannot express and that cannot be dropped.
    fn refuse(&self, path: &str, keyword: &str) -> DialectError {
        self.error(
            path,
            format!(
                "{} does not support `{keyword}`, and dropping it would change which arguments are valid",
                self.dialect.provider()
            ),
        )
    }

    fn malformed(&self, path: &str, expected: &str) -> DialectError {
        self.error(path, format!("malformed schema: expected {expected}"))
    }

    /// Every provider wants an object schema at the root of a tool's
    /// parameters: arguments are always a JSON object.
    fn check_root(&self) -> Result<&Map<String, Value>, DialectError> {
        let Some(root) = self.root.as_object() else {
            return Err(self.error(
                "",
                "tool parameters must be a JSON Schema object with `\"type\": \"object\"`",
            ));
        };
        match root.get("type") {
            Some(Value::String(kind)) if kind == "object" => Ok(root),
            Some(_) => Err(self.error(
                "/type",
                "tool parameters must have `\"type\": \"object\"`: arguments are always a JSON object",
            )),
            None => Err(self.error(
                "",
                "tool parameters must have `\"type\": \"object\"`: arguments are always a JSON object",
            )),
        }
    }

    /// The object form of a schema; boolean schemas are refused because
    /// neither lowered dialect can say "anything" or "nothing".
    fn schema_object<'v>(
        &self,
        schema: &'v Value,
        path: &str,
        depth: usize,
    ) -> Result<&'v Map<String, Value>, DialectError> {
        if depth > MAX_DEPTH {
            return Err(self.error(
                path,
                format!("schema is nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        match schema {
            Value::Object(node) => Ok(node),
            Value::Bool(true) => Err(self.error(
                path,
                format!(
                    "the schema `true` accepts any value, which {} cannot express",
                    self.dialect.provider()
                ),
            )),
            Value::Bool(false) => Err(self.error(
                path,
                format!(
                    "the schema `false` accepts no value, which {} cannot express",
                    self.dialect.provider()
                ),
            )),
            _ => Err(self.malformed(path, "a schema (an object or a boolean)")),
        }
    }

    /// Counts one inlined `$ref` against [`MAX_EXPANSIONS`].
    fn expand(&mut self, path: &str) -> Result<(), DialectError> {
        self.expansions += 1;
        if self.expansions > MAX_EXPANSIONS {
            return Err(self.error(
                path,
                format!("inlining `$ref`s would expand more than {MAX_EXPANSIONS} references"),
            ));
        }
        Ok(())
    }

    /// The annotations next to a `$ref`, which are the only siblings a
    /// lowered dialect can carry: neither OpenAI strict mode nor Gemini
    /// accepts keywords beside `$ref`, and merging a constraint into the
    /// referenced schema could change what either one means.
    fn ref_annotations(
        &self,
        node: &Map<String, Value>,
        path: &str,
    ) -> Result<Map<String, Value>, DialectError> {
        let mut annotations = Map::new();
        for (keyword, value) in node {
            let at = pointer_push(path, keyword);
            if keyword == "$ref" || DROPPED_ANNOTATIONS.contains(&keyword.as_str()) {
                continue;
            }
            if KEPT_ANNOTATIONS.contains(&keyword.as_str()) {
                annotations.insert(keyword.clone(), expect_string(self, value, &at)?.into());
            } else {
                return Err(self.error(
                    &at,
                    format!(
                        "`{keyword}` next to `$ref` constrains the referenced schema; {} accepts no keywords beside `$ref`, and merging it into the referenced schema could change its meaning",
                        self.dialect.provider()
                    ),
                ));
            }
        }
        Ok(annotations)
    }

    /// Proves that `oneOf` may be read as `anyOf`: true when no value can
    /// match two branches, so "exactly one" and "at least one" agree.
    fn check_exclusive(&self, branches: &[Value], path: &str) -> Result<(), DialectError> {
        for (i, a) in branches.iter().enumerate() {
            for (j, b) in branches.iter().enumerate().skip(i + 1) {
                if !disjoint(self.root, a, b, 0) {
                    return Err(self.error(
                        path,
                        format!(
                            "{} does not support `oneOf`, and branches {i} and {j} are not provably mutually exclusive, so it cannot be rewritten as `anyOf`",
                            self.dialect.provider()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Appends one reference token to a JSON pointer, escaping `~` and `/`
/// (RFC 6901).
fn pointer_push(path: &str, token: &str) -> String {
    let mut out = String::with_capacity(path.len() + token.len() + 1);
    out.push_str(path);
    out.push('/');
    for c in token.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-decodes a URI fragment. A `%` not followed by two hex digits is
/// kept literally, as schemars does; `None` if the result is not UTF-8.
fn percent_decode(fragment: &str) -> Option<String> {
    if !fragment.contains('%') {
        return Some(fragment.to_owned());
    }
    let bytes = fragment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let decoded = (bytes[i] == b'%')
            .then(|| fragment.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match decoded {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Resolves a local `$ref` against the canonical root: the target and its
/// JSON pointer (the error's reason otherwise).
fn resolve_ref<'r>(root: &'r Value, reference: &str) -> Result<(&'r Value, String), String> {
    let Some(fragment) = reference.strip_prefix('#') else {
        return Err(format!(
            "`{reference}` is not a local reference; only `#...` references into the tool's own parameters can be resolved"
        ));
    };
    let Some(pointer) = percent_decode(fragment) else {
        return Err(format!("`{reference}` does not percent-decode to UTF-8"));
    };
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err(format!(
            "`{reference}` names an anchor, and only JSON-pointer references are supported"
        ));
    }
    match root.pointer(&pointer) {
        Some(target) => Ok((target, pointer)),
        None => Err(format!(
            "`{reference}` does not resolve to anything in the parameters"
        )),
    }
}

/// Whether every keyword of `node` other than `$ref` is an annotation.
fn is_bare_ref(node: &Map<String, Value>) -> bool {
    node.contains_key("$ref")
        && node.keys().all(|k| {
            k == "$ref"
                || KEPT_ANNOTATIONS.contains(&k.as_str())
                || DROPPED_ANNOTATIONS.contains(&k.as_str())
        })
}

fn is_annotation(keyword: &str) -> bool {
    KEPT_ANNOTATIONS.contains(&keyword) || DROPPED_ANNOTATIONS.contains(&keyword)
}

fn expect_string<'v>(cx: &Lowering, value: &'v Value, path: &str) -> Result<&'v str, DialectError> {
    value.as_str().ok_or_else(|| cx.malformed(path, "a string"))
}

fn expect_array<'v>(
    cx: &Lowering,
    value: &'v Value,
    path: &str,
) -> Result<&'v Vec<Value>, DialectError> {
    match value {
        Value::Array(items) if !items.is_empty() => Ok(items),
        _ => Err(cx.malformed(path, "a non-empty array")),
    }
}

fn expect_number(cx: &Lowering, value: &Value, path: &str) -> Result<Value, DialectError> {
    if value.is_number() {
        Ok(value.clone())
    } else {
        Err(cx.malformed(path, "a number"))
    }
}

fn expect_count(cx: &Lowering, value: &Value, path: &str) -> Result<Value, DialectError> {
    if value.is_u64() {
        Ok(value.clone())
    } else {
        Err(cx.malformed(path, "a non-negative integer"))
    }
}

/// The type names of a `type` keyword, validated.
fn parse_types<'v>(
    cx: &Lowering,
    value: &'v Value,
    path: &str,
) -> Result<Vec<&'v str>, DialectError> {
    let names: Vec<&str> = match value {
        Value::String(name) => vec![name.as_str()],
        Value::Array(names) if !names.is_empty() => {
            let mut out = Vec::with_capacity(names.len());
            for name in names {
                out.push(
                    name.as_str()
                        .ok_or_else(|| cx.malformed(path, "a type name or an array of them"))?,
                );
            }
            out
        }
        _ => return Err(cx.malformed(path, "a type name or a non-empty array of them")),
    };
    for name in &names {
        if !TYPE_NAMES.contains(name) {
            return Err(cx.malformed(path, "JSON Schema type names"));
        }
    }
    Ok(names)
}

/// The property names of `required`, each of which must be declared in
/// `properties`: both lowered dialects list `required` against `properties`.
fn parse_required<'v>(
    cx: &Lowering,
    node: &'v Map<String, Value>,
    properties: &Map<String, Value>,
    path: &str,
) -> Result<BTreeSet<&'v str>, DialectError> {
    let mut required = BTreeSet::new();
    let Some(value) = node.get("required") else {
        return Ok(required);
    };
    let at = pointer_push(path, "required");
    let Value::Array(names) = value else {
        return Err(cx.malformed(&at, "an array of property names"));
    };
    for (i, name) in names.iter().enumerate() {
        let at = pointer_push(&at, &i.to_string());
        let name = expect_string(cx, name, &at)?;
        if !properties.contains_key(name) {
            return Err(cx.error(
                &at,
                format!(
                    "`{name}` is required but not declared in `properties`, which {} cannot express",
                    cx.dialect.provider()
                ),
            ));
        }
        required.insert(name);
    }
    Ok(required)
}

/// Checks, for every dialect, that each `$ref` in the canonical schema is a
/// string that resolves inside the parameters and does not lead into a loop
/// of bare references (which would define nothing).
fn check_references(
    cx: &Lowering,
    schema: &Value,
    path: &str,
    depth: usize,
) -> Result<(), DialectError> {
    if depth > MAX_DEPTH {
        return Err(cx.error(
            path,
            format!("schema is nested more than {MAX_DEPTH} levels deep"),
        ));
    }
    let Some(node) = schema.as_object() else {
        return Ok(());
    };
    for (keyword, value) in node {
        let at = pointer_push(path, keyword);
        match keyword.as_str() {
            "$ref" => check_reference(cx, value, &at)?,
            "items"
            | "additionalProperties"
            | "not"
            | "if"
            | "then"
            | "else"
            | "contains"
            | "propertyNames"
            | "unevaluatedItems"
            | "unevaluatedProperties"
            | "additionalItems"
            | "contentSchema" => match value {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        check_references(cx, item, &pointer_push(&at, &i.to_string()), depth + 1)?;
                    }
                }
                _ => check_references(cx, value, &at, depth + 1)?,
            },
            "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                if let Value::Array(items) = value {
                    for (i, item) in items.iter().enumerate() {
                        check_references(cx, item, &pointer_push(&at, &i.to_string()), depth + 1)?;
                    }
                }
            }
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas"
            | "dependencies" => {
                if let Value::Object(schemas) = value {
                    for (name, sub) in schemas {
                        check_references(cx, sub, &pointer_push(&at, name), depth + 1)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn check_reference(cx: &Lowering, value: &Value, at: &str) -> Result<(), DialectError> {
    let Value::String(reference) = value else {
        return Err(cx.malformed(at, "a reference string"));
    };
    let (mut target, pointer) = resolve_ref(cx.root, reference).map_err(|r| cx.error(at, r))?;
    let mut seen = BTreeSet::from([pointer]);
    while let Some(node) = target.as_object().filter(|node| is_bare_ref(node)) {
        let Some(Value::String(next)) = node.get("$ref") else {
            // A malformed `$ref` in the target is reported where it stands.
            return Ok(());
        };
        let Ok((next_target, next_pointer)) = resolve_ref(cx.root, next) else {
            return Ok(());
        };
        if !seen.insert(next_pointer) {
            return Err(cx.error(
                at,
                format!(
                    "`{reference}` leads into a cycle of references that never reaches a schema"
                ),
            ));
        }
        target = next_target;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Mutual exclusivity of `oneOf` branches
// ---------------------------------------------------------------------------

/// True only if no JSON value can be valid against both `a` and `b`.
///
/// Sound but incomplete: each schema is over-approximated by the few
/// keywords examined (ignoring a keyword only widens the set of values
/// considered), so `true` is a proof and `false` means "not proven". It
/// covers what serde's enum representations produce: distinct types,
/// distinct `const`/`enum` values, a shared required tag property with
/// disjoint values (internally and adjacently tagged), and a required key
/// that the other closed object forbids (externally tagged).
fn disjoint(root: &Value, a: &Value, b: &Value, depth: usize) -> bool {
    if depth > 8 {
        return false;
    }
    let a = follow_refs(root, a);
    let b = follow_refs(root, b);
    let (a, b) = match (a, b) {
        (Value::Bool(false), _) | (_, Value::Bool(false)) => return true,
        (Value::Object(a), Value::Object(b)) => (a, b),
        _ => return false,
    };
    let a_types = declared_types(a);
    let b_types = declared_types(b);
    if let (Some(ta), Some(tb)) = (&a_types, &b_types)
        && !ta.iter().any(|x| tb.iter().any(|y| types_overlap(x, y)))
    {
        return true;
    }
    let a_values = finite_values(a);
    let b_values = finite_values(b);
    match (&a_values, &b_values) {
        (Some(va), Some(vb)) => {
            if va.iter().all(|x| vb.iter().all(|y| !json_equal(x, y))) {
                return true;
            }
        }
        (Some(values), None) => {
            if let Some(types) = &b_types
                && values.iter().all(|v| !types.iter().any(|t| has_type(v, t)))
            {
                return true;
            }
        }
        (None, Some(values)) => {
            if let Some(types) = &a_types
                && values.iter().all(|v| !types.iter().any(|t| has_type(v, t)))
            {
                return true;
            }
        }
        (None, None) => {}
    }
    // Object rules need every common value to be an object, which holds as
    // soon as either side admits only objects.
    let objects_only = |types: &Option<Vec<&str>>| {
        types
            .as_ref()
            .is_some_and(|types| types.iter().all(|t| *t == "object"))
    };
    if objects_only(&a_types) || objects_only(&b_types) {
        let a_required = required_names(a);
        let b_required = required_names(b);
        let a_properties = a.get("properties").and_then(Value::as_object);
        let b_properties = b.get("properties").and_then(Value::as_object);
        for name in a_required.intersection(&b_required) {
            if let (Some(sa), Some(sb)) = (
                a_properties.and_then(|p| p.get(*name)),
                b_properties.and_then(|p| p.get(*name)),
            ) && disjoint(root, sa, sb, depth + 1)
            {
                return true;
            }
        }
        if requires_forbidden(&a_required, b) || requires_forbidden(&b_required, a) {
            return true;
        }
    }
    false
}

/// Follows bare `$ref`s (a few hops at most) so that branches written as
/// references can be examined.
fn follow_refs<'r>(root: &'r Value, mut schema: &'r Value) -> &'r Value {
    for _ in 0..16 {
        let Some(node) = schema.as_object().filter(|node| is_bare_ref(node)) else {
            return schema;
        };
        match node
            .get("$ref")
            .and_then(Value::as_str)
            .map(|r| resolve_ref(root, r))
        {
            Some(Ok((target, _))) => schema = target,
            _ => return schema,
        }
    }
    schema
}

fn declared_types(node: &Map<String, Value>) -> Option<Vec<&str>> {
    match node.get("type")? {
        Value::String(name) => Some(vec![name.as_str()]),
        Value::Array(names) if !names.is_empty() => names.iter().map(Value::as_str).collect(),
        _ => None,
    }
}

fn types_overlap(a: &str, b: &str) -> bool {
    a == b || matches!((a, b), ("integer", "number") | ("number", "integer"))
}

/// The values a schema is limited to by `const` or `enum`, if it is.
fn finite_values(node: &Map<String, Value>) -> Option<Vec<&Value>> {
    if let Some(value) = node.get("const") {
        return Some(vec![value]);
    }
    match node.get("enum")? {
        Value::Array(values) => Some(values.iter().collect()),
        _ => None,
    }
}

/// Whether `value` is an instance of JSON Schema type `name` (unknown names
/// match, to stay conservative).
fn has_type(value: &Value, name: &str) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => true,
    }
}

/// JSON Schema equality: numbers compare by value (`1` equals `1.0`).
/// Errs towards "equal", which only ever weakens a disjointness proof.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => true,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

fn required_names(node: &Map<String, Value>) -> BTreeSet<&str> {
    match node.get("required") {
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => BTreeSet::new(),
    }
}

/// Whether `closed` rejects every object that has one of `required`: it
/// allows no additional properties and declares none of them.
fn requires_forbidden(required: &BTreeSet<&str>, closed: &Map<String, Value>) -> bool {
    if closed.get("additionalProperties") != Some(&Value::Bool(false))
        || closed.contains_key("patternProperties")
    {
        return false;
    }
    let declared = closed.get("properties").and_then(Value::as_object);
    required
        .iter()
        .any(|name| !declared.is_some_and(|p| p.contains_key(*name)))
}

// ---------------------------------------------------------------------------
// OpenAI strict mode
// ---------------------------------------------------------------------------

/// Lowers one schema to OpenAI Structured Outputs strict mode: every object
/// closed with all its properties required, only the supported keywords.
fn openai_schema(
    cx: &mut Lowering,
    schema: &Value,
    path: &str,
    depth: usize,
) -> Result<Value, DialectError> {
    let node = cx.schema_object(schema, path, depth)?;
    if node.contains_key("$ref") {
        return openai_ref(cx, node, path, depth);
    }
    // Alone, `unevaluatedProperties` is refused below like any unsupported keyword.
    if node.contains_key("unevaluatedProperties")
        && (node.contains_key("oneOf") || node.contains_key("anyOf"))
    {
        let distributed = openai_distribute(cx, node, path)?;
        return openai_schema(cx, &distributed, path, depth + 1);
    }
    // Strict mode constrains generation by the schema; a schema that names no
    // type leaves the value open, which strict mode cannot express.
    if !["type", "anyOf", "oneOf", "enum", "const"]
        .iter()
        .any(|k| node.contains_key(*k))
    {
        return Err(cx.error(
            path,
            "the schema declares no `type` (nor `enum`, `const` or `anyOf`), so it accepts any value, which OpenAI strict mode cannot express",
        ));
    }
    let types = match node.get("type") {
        Some(value) => parse_types(cx, value, &pointer_push(path, "type"))?,
        None => Vec::new(),
    };
    let mut out = Map::new();
    for (keyword, value) in node {
        let at = pointer_push(path, keyword);
        match keyword.as_str() {
            "type" | "enum" | "const" => {
                if keyword == "enum" {
                    expect_array(cx, value, &at)?;
                }
                out.insert(keyword.clone(), value.clone());
            }
            "description" | "title" => {
                out.insert(keyword.clone(), expect_string(cx, value, &at)?.into());
            }
            k if DROPPED_ANNOTATIONS.contains(&k) => {}
            "$schema" if path.is_empty() => {}
            "$defs" if path.is_empty() => {
                let Value::Object(defs) = value else {
                    return Err(cx.malformed(&at, "an object of schemas"));
                };
                let mut lowered = Map::new();
                for (name, def) in defs {
                    let def_path = pointer_push(&at, name);
                    cx.open.push(def_path.clone());
                    let def = openai_schema(cx, def, &def_path, depth + 1);
                    cx.open.pop();
                    lowered.insert(name.clone(), def?);
                }
                out.insert(keyword.clone(), Value::Object(lowered));
            }
            // Handled with the object as a whole, below.
            "properties" | "required" | "additionalProperties" => {}
            "items" => {
                if value.is_array() {
                    return Err(cx.tuple_items(&at));
                }
                out.insert(keyword.clone(), openai_schema(cx, value, &at, depth + 1)?);
            }
            "anyOf" => {
                let lowered = openai_branches(cx, value, &at, depth)?;
                out.insert(keyword.clone(), lowered);
            }
            "oneOf" => {
                if node.contains_key("anyOf") {
                    return Err(cx.one_of_next_to_any_of(&at));
                }
                let branches = expect_array(cx, value, &at)?;
                cx.check_exclusive(branches, &at)?;
                let lowered = openai_branches(cx, value, &at, depth)?;
                out.insert("anyOf".into(), lowered);
            }
            "pattern" => {
                out.insert(keyword.clone(), expect_string(cx, value, &at)?.into());
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => {
                out.insert(keyword.clone(), expect_number(cx, value, &at)?);
            }
            "minItems" | "maxItems" | "minLength" | "maxLength" => {
                out.insert(keyword.clone(), expect_count(cx, value, &at)?);
            }
            "format" => {
                let format = expect_string(cx, value, &at)?;
                if OPENAI_FORMATS.contains(&format) {
                    out.insert(keyword.clone(), value.clone());
                } else if !NUMERIC_FORMATS.contains(&format) {
                    return Err(cx.error(
                        &at,
                        format!(
                            "OpenAI strict mode does not support format `{format}` (only {})",
                            OPENAI_FORMATS.join(", ")
                        ),
                    ));
                }
            }
            "uniqueItems" if value == &Value::Bool(false) => {}
            _ => return Err(cx.refuse(&at, keyword)),
        }
    }
    if types.contains(&"array") && !node.contains_key("items") {
        return Err(cx.error(
            path,
            "an array without `items` accepts any elements, which OpenAI strict mode cannot express",
        ));
    }
    let object_like = types.contains(&"object")
        || ["properties", "required", "additionalProperties"]
            .iter()
            .any(|k| node.contains_key(*k));
    if object_like {
        openai_object(cx, node, path, depth, &mut out)?;
    }
    Ok(Value::Object(out))
}

/// Keywords of a branch (or of the object around it) that [`openai_distribute`] can merge.
const DISTRIBUTABLE: [&str; 5] = ["type", "properties", "required", "description", "title"];

/// Strict mode has no `unevaluatedProperties`. The canonical schema uses it for an object beside
/// `oneOf`/`anyOf` (a flattened enum), closed as a whole; the same meaning is one closed object
/// per branch, with the outer members added to each: `{"oneOf": [{outer + branch, closed}, ..]}`.
/// Anything that does not merge that simply is refused.
fn openai_distribute(
    cx: &Lowering,
    node: &Map<String, Value>,
    path: &str,
) -> Result<Value, DialectError> {
    let at = pointer_push(path, "unevaluatedProperties");
    let cannot = |reason: &str| {
        cx.error(
            &at,
            format!(
                "OpenAI strict mode has no `unevaluatedProperties`, and this object cannot be rewritten as closed objects: {reason}"
            ),
        )
    };
    if node.get("unevaluatedProperties") != Some(&Value::Bool(false)) {
        return Err(cannot("only `false` can be rewritten"));
    }
    let combinators: Vec<&str> = ["oneOf", "anyOf"]
        .into_iter()
        .filter(|k| node.contains_key(*k))
        .collect();
    let [combinator] = combinators.as_slice() else {
        return Err(cannot(
            "it needs exactly one `oneOf` or `anyOf` beside its properties",
        ));
    };
    let mergeable = |part: &Map<String, Value>, extra: &[&str]| {
        part.iter().all(|(key, value)| {
            (DISTRIBUTABLE.contains(&key.as_str())
                || DROPPED_ANNOTATIONS.contains(&key.as_str())
                || extra.contains(&key.as_str()))
                && (key != "type" || value == "object")
        })
    };
    if !mergeable(node, &["unevaluatedProperties", combinator]) {
        return Err(cannot(
            "it has keywords other than properties and one combinator",
        ));
    }
    let Some(Value::Array(branches)) = node.get(*combinator) else {
        return Err(cx.malformed(&pointer_push(path, combinator), "an array of schemas"));
    };
    let mut merged_branches = Vec::with_capacity(branches.len());
    for branch in branches {
        let Some(branch) = branch.as_object().filter(|b| mergeable(b, &[])) else {
            return Err(cannot("a branch is not a plain object"));
        };
        let mut merged = Map::new();
        merged.insert("type".into(), Value::from("object"));
        let mut properties = Map::new();
        let mut required: Vec<Value> = Vec::new();
        for part in [node, branch] {
            if let Some(Value::Object(own)) = part.get("properties") {
                for (name, schema) in own {
                    if properties.insert(name.clone(), schema.clone()).is_some() {
                        return Err(cannot(&format!(
                            "the member `{name}` is declared both outside and in a branch"
                        )));
                    }
                }
            }
            if let Some(Value::Array(names)) = part.get("required") {
                for name in names {
                    if !required.contains(name) {
                        required.push(name.clone());
                    }
                }
            }
        }
        for annotation in ["description", "title"] {
            if let Some(text) = branch.get(annotation) {
                merged.insert(annotation.into(), text.clone());
            }
        }
        merged.insert("properties".into(), Value::Object(properties));
        merged.insert("required".into(), Value::Array(required));
        merged.insert("additionalProperties".into(), Value::Bool(false));
        merged_branches.push(Value::Object(merged));
    }
    let mut out = Map::new();
    for annotation in ["description", "title"] {
        if let Some(text) = node.get(annotation) {
            out.insert(annotation.into(), text.clone());
        }
    }
    out.insert((*combinator).into(), Value::Array(merged_branches));
    Ok(Value::Object(out))
}

fn openai_branches(
    cx: &mut Lowering,
    value: &Value,
    path: &str,
    depth: usize,
) -> Result<Value, DialectError> {
    let branches = expect_array(cx, value, path)?;
    let mut lowered = Vec::with_capacity(branches.len());
    for (i, branch) in branches.iter().enumerate() {
        lowered.push(openai_schema(
            cx,
            branch,
            &pointer_push(path, &i.to_string()),
            depth + 1,
        )?);
    }
    Ok(Value::Array(lowered))
}

/// Strict mode requires `additionalProperties: false` and every property in
/// `required`. A property the canonical schema leaves optional is therefore
/// made nullable, so the model can still say "no value".
fn openai_object(
    cx: &mut Lowering,
    node: &Map<String, Value>,
    path: &str,
    depth: usize,
    out: &mut Map<String, Value>,
) -> Result<(), DialectError> {
    let empty = Map::new();
    let properties = match node.get("properties") {
        None => &empty,
        Some(Value::Object(properties)) => properties,
        Some(_) => {
            return Err(cx.malformed(&pointer_push(path, "properties"), "an object of schemas"));
        }
    };
    match node.get("additionalProperties") {
        Some(Value::Bool(false)) => {}
        Some(_) => {
            return Err(cx.error(
                &pointer_push(path, "additionalProperties"),
                "OpenAI strict mode requires `additionalProperties: false`; an open object or map cannot be strict",
            ));
        }
        // An object that declares nothing about its properties is what
        // schemars emits for a struct without fields (a tool without
        // arguments): no name in it means anything, so closing it loses
        // nothing. Open maps say so explicitly (`additionalProperties: true`
        // or a schema) and are refused above.
        None if !node.contains_key("properties") => {}
        None => {
            return Err(cx.error(
                path,
                "the object does not set `additionalProperties: false`, so it accepts extra properties; OpenAI strict mode requires closed objects, and closing it would change its meaning",
            ));
        }
    }
    let required = parse_required(cx, node, properties, path)?;
    let properties_path = pointer_push(path, "properties");
    let mut lowered = Map::new();
    for (name, schema) in properties {
        let at = pointer_push(&properties_path, name);
        let property = if required.contains(name.as_str()) {
            openai_schema(cx, schema, &at, depth + 1)?
        } else {
            match schema.as_object().filter(|node| node.contains_key("$ref")) {
                // `{"anyOf":[{"$ref":..},{"type":"null"}]}` keeps the reference
                // instead of inlining it to carry the annotations.
                Some(reference) => openai_optional_ref(cx, reference, &at, depth + 1)?,
                None => openai_nullable(openai_schema(cx, schema, &at, depth + 1)?),
            }
        };
        lowered.insert(name.clone(), property);
    }
    let mut names: Vec<&String> = properties.keys().collect();
    names.sort();
    out.insert(
        "required".into(),
        Value::Array(names.into_iter().map(|n| Value::from(n.as_str())).collect()),
    );
    out.insert("properties".into(), Value::Object(lowered));
    out.insert("additionalProperties".into(), Value::Bool(false));
    Ok(())
}

/// The parts of a `$ref` node that OpenAI strict mode can carry: the
/// reference, its target and pointer, and its annotations.
struct OpenAiRef<'v> {
    reference: String,
    target: &'v Value,
    pointer: String,
    annotations: Map<String, Value>,
}

fn openai_ref_parts<'v>(
    cx: &Lowering<'v>,
    node: &Map<String, Value>,
    path: &str,
) -> Result<OpenAiRef<'v>, DialectError> {
    let at = pointer_push(path, "$ref");
    let reference = match node.get("$ref") {
        Some(Value::String(reference)) => reference.clone(),
        _ => return Err(cx.malformed(&at, "a reference string")),
    };
    let (target, pointer) = resolve_ref(cx.root, &reference).map_err(|r| cx.error(&at, r))?;
    // The output keeps `$defs` in place but may restructure everything else
    // (nullable wrappers, `oneOf` to `anyOf`), so only the root and whole
    // definitions stay addressable.
    let segments: Vec<&str> = pointer.split('/').collect();
    if !(pointer.is_empty() || (segments.len() == 3 && segments[1] == "$defs")) {
        return Err(cx.error(
            &at,
            format!(
                "`{reference}` points inside the schema; the OpenAI strict lowering keeps only `#` and `#/$defs/<name>` addressable"
            ),
        ));
    }
    let annotations = cx.ref_annotations(node, path)?;
    Ok(OpenAiRef {
        reference,
        target,
        pointer,
        annotations,
    })
}

/// A required `$ref`. Strict mode rejects keywords beside `$ref` ("$ref
/// cannot have keywords {'description'}"), so a reference that carries a
/// description or title is replaced by the lowered definition with those
/// annotations on top, as OpenAI's own SDK does. A reference back into a
/// schema being lowered cannot be inlined; it loses its annotations instead,
/// which changes nothing that is validated.
fn openai_ref(
    cx: &mut Lowering,
    node: &Map<String, Value>,
    path: &str,
    depth: usize,
) -> Result<Value, DialectError> {
    let parts = openai_ref_parts(cx, node, path)?;
    let bare = || {
        let mut bare = Map::new();
        bare.insert("$ref".into(), Value::from(parts.reference.as_str()));
        Value::Object(bare)
    };
    if parts.annotations.is_empty() || cx.open.contains(&parts.pointer) {
        return Ok(bare());
    }
    cx.expand(&pointer_push(path, "$ref"))?;
    cx.open.push(parts.pointer.clone());
    let lowered = openai_schema(cx, parts.target, &parts.pointer, depth + 1);
    cx.open.pop();
    let Value::Object(mut inlined) = lowered? else {
        return Ok(bare());
    };
    if inlined.contains_key("$ref") {
        // The definition is itself a bare reference: carry the annotations
        // one step further.
        inlined.extend(parts.annotations);
        return openai_ref(cx, &inlined, &parts.pointer, depth + 1);
    }
    inlined.extend(parts.annotations);
    Ok(Value::Object(inlined))
}

/// An optional `$ref` property: `{"anyOf":[{"$ref":..},{"type":"null"}]}`
/// with the annotations on the `anyOf`, where strict mode accepts them.
fn openai_optional_ref(
    cx: &mut Lowering,
    node: &Map<String, Value>,
    path: &str,
    depth: usize,
) -> Result<Value, DialectError> {
    if depth > MAX_DEPTH {
        return Err(cx.error(
            path,
            format!("schema is nested more than {MAX_DEPTH} levels deep"),
        ));
    }
    let parts = openai_ref_parts(cx, node, path)?;
    let mut reference = Map::new();
    reference.insert("$ref".into(), Value::from(parts.reference));
    let mut out = parts.annotations;
    out.insert(
        "anyOf".into(),
        Value::Array(vec![Value::Object(reference), null_schema()]),
    );
    Ok(Value::Object(out))
}

fn null_schema() -> Value {
    let mut null = Map::new();
    null.insert("type".into(), Value::from("null"));
    Value::Object(null)
}

/// Makes a lowered schema also accept `null`, in the form strict mode
/// documents: `"type": [T, "null"]` (with `null` added to an `enum`, which
/// would otherwise still reject it), a `null` branch on an `anyOf`, or an
/// `anyOf` wrapper for anything else (`$ref`, `const`, ...).
fn openai_nullable(schema: Value) -> Value {
    let Value::Object(mut node) = schema else {
        return schema;
    };
    if accepts_null(&node) {
        return Value::Object(node);
    }
    let plain_type = node.contains_key("type")
        && !["$ref", "anyOf", "const"]
            .iter()
            .any(|k| node.contains_key(*k));
    if plain_type {
        match node.get_mut("type") {
            Some(Value::Array(names)) => names.push(Value::from("null")),
            Some(name) => *name = Value::Array(vec![name.take(), Value::from("null")]),
            None => {}
        }
        if let Some(Value::Array(values)) = node.get_mut("enum") {
            values.push(Value::Null);
        }
        return Value::Object(node);
    }
    let only_any_of = node
        .keys()
        .all(|k| k == "anyOf" || KEPT_ANNOTATIONS.contains(&k.as_str()));
    if only_any_of && let Some(Value::Array(branches)) = node.get_mut("anyOf") {
        branches.push(null_schema());
        return Value::Object(node);
    }
    let mut wrapper = Map::new();
    for annotation in KEPT_ANNOTATIONS {
        if let Some(value) = node.remove(annotation) {
            wrapper.insert(annotation.into(), value);
        }
    }
    wrapper.insert(
        "anyOf".into(),
        Value::Array(vec![Value::Object(node), null_schema()]),
    );
    Value::Object(wrapper)
}

/// Whether a lowered schema certainly accepts `null` (false when unsure,
/// which only costs a redundant `null` branch).
fn accepts_null(node: &Map<String, Value>) -> bool {
    if node.contains_key("$ref") {
        return false;
    }
    let mut constrained = false;
    if let Some(types) = node.get("type") {
        constrained = true;
        let null = match types {
            Value::String(name) => name == "null",
            Value::Array(names) => names.iter().any(|n| n == "null"),
            _ => false,
        };
        if !null {
            return false;
        }
    }
    if let Some(values) = node.get("enum") {
        constrained = true;
        if !values
            .as_array()
            .is_some_and(|v| v.iter().any(Value::is_null))
        {
            return false;
        }
    }
    if let Some(value) = node.get("const") {
        constrained = true;
        if !value.is_null() {
            return false;
        }
    }
    if let Some(branches) = node.get("anyOf") {
        constrained = true;
        let any = branches.as_array().is_some_and(|branches| {
            branches
                .iter()
                .any(|b| b.as_object().is_some_and(accepts_null))
        });
        if !any {
            return false;
        }
    }
    constrained
}

// ---------------------------------------------------------------------------
// Gemini
// ---------------------------------------------------------------------------

/// Lowers one schema to Gemini's `Schema` (an OpenAPI 3.0 subset): no
/// `$ref`, nullability as `nullable`, string-only enums.
fn gemini_schema(
    cx: &mut Lowering,
    schema: &Value,
    path: &str,
    depth: usize,
) -> Result<Map<String, Value>, DialectError> {
    let node = cx.schema_object(schema, path, depth)?;
    if node.contains_key("$ref") {
        return gemini_ref(cx, node, path, depth);
    }
    let branches_keyword = match (node.contains_key("anyOf"), node.contains_key("oneOf")) {
        (true, true) => return Err(cx.one_of_next_to_any_of(&pointer_push(path, "oneOf"))),
        (true, false) => Some("anyOf"),
        (false, true) => Some("oneOf"),
        (false, false) => None,
    };
    if let Some(keyword) = branches_keyword {
        let at = pointer_push(path, keyword);
        let branches = expect_array(cx, node.get(keyword).unwrap_or(&Value::Null), &at)?;
        if keyword == "oneOf" {
            cx.check_exclusive(branches, &at)?;
        }
        if branches.iter().any(is_null_branch) {
            return gemini_nullable_branches(cx, node, keyword, branches, path, depth);
        }
    }

    let types = match node.get("type") {
        Some(value) => Some(parse_types(cx, value, &pointer_push(path, "type"))?),
        None => None,
    };
    let null_typed = types.as_ref().is_some_and(|t| t.contains(&"null"));
    let mut non_null_types = types.iter().flatten().copied().filter(|t| *t != "null");
    let single_type = non_null_types.next();
    if non_null_types.next().is_some() {
        return Err(cx.error(
            &pointer_push(path, "type"),
            "Gemini has no type unions other than `[T, \"null\"]`",
        ));
    }
    if types.is_some() && single_type.is_none() {
        return Err(cx.error(
            &pointer_push(path, "type"),
            "Gemini cannot express a schema that accepts only `null`",
        ));
    }

    // `const` becomes a one-value `enum`; Gemini enums hold strings only, and
    // a `null` among the values means "nullable".
    let values = match (node.get("const"), node.get("enum")) {
        (Some(_), Some(_)) => {
            return Err(cx.error(
                &pointer_push(path, "const"),
                "Gemini cannot express `const` next to `enum`",
            ));
        }
        (Some(value), None) => Some(vec![(pointer_push(path, "const"), value)]),
        (None, Some(values)) => {
            let at = pointer_push(path, "enum");
            let values = expect_array(cx, values, &at)?;
            Some(
                values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (pointer_push(&at, &i.to_string()), v))
                    .collect(),
            )
        }
        (None, None) => None,
    };
    let mut enum_strings = Vec::new();
    let mut enum_null = false;
    for (at, value) in values.iter().flatten() {
        match value {
            Value::Null => enum_null = true,
            Value::String(s) => enum_strings.push(Value::from(s.as_str())),
            _ => {
                return Err(cx.error(
                    at,
                    "Gemini enums hold strings only, and this value is not a string",
                ));
            }
        }
    }
    if values.is_some() && enum_strings.is_empty() {
        return Err(cx.error(
            path,
            "Gemini cannot express a schema that accepts only `null`",
        ));
    }
    let out_type = match (single_type, values.is_some()) {
        (Some(t), _) => Some(t),
        // Every allowed non-null value is a string.
        (None, true) => Some("string"),
        (None, false) if branches_keyword.is_some() => None,
        (None, false) => {
            return Err(cx.error(
                path,
                "the schema declares no `type`, so it accepts any value, which Gemini cannot express",
            ));
        }
    };
    if values.is_some() && out_type != Some("string") {
        return Err(cx.error(
            path,
            "Gemini enums hold strings only, and this schema's type is not `string`",
        ));
    }
    let nullable = (types.is_none() || null_typed)
        && (values.is_none() || enum_null)
        && (null_typed || enum_null);

    let mut out = Map::new();
    if let Some(t) = out_type {
        out.insert("type".into(), Value::from(t));
    }
    if nullable {
        out.insert("nullable".into(), Value::Bool(true));
    }
    if values.is_some() {
        out.insert("enum".into(), Value::Array(enum_strings));
    }
    for (keyword, value) in node {
        let at = pointer_push(path, keyword);
        match keyword.as_str() {
            "type" | "enum" | "const" => {}
            "description" | "title" => {
                out.insert(keyword.clone(), expect_string(cx, value, &at)?.into());
            }
            k if DROPPED_ANNOTATIONS.contains(&k) => {}
            "$schema" if path.is_empty() => {}
            // Every reference is inlined, so definitions have no use left.
            "$defs" => {}
            "properties" => {
                let Value::Object(properties) = value else {
                    return Err(cx.malformed(&at, "an object of schemas"));
                };
                let mut lowered = Map::new();
                for (name, schema) in properties {
                    let property = gemini_schema(cx, schema, &pointer_push(&at, name), depth + 1)?;
                    lowered.insert(name.clone(), Value::Object(property));
                }
                out.insert(keyword.clone(), Value::Object(lowered));
            }
            "required" => {
                let empty = Map::new();
                let properties = node
                    .get("properties")
                    .and_then(Value::as_object)
                    .unwrap_or(&empty);
                parse_required(cx, node, properties, path)?;
                out.insert(keyword.clone(), value.clone());
            }
            // Gemini has no `additionalProperties`; `false` is dropped, and the
            // executor still rejects extra properties against the canonical
            // schema. An open map cannot be expressed at all. The same holds
            // for `unevaluatedProperties: false` (an object beside `oneOf`).
            "additionalProperties" | "unevaluatedProperties" => {
                if value != &Value::Bool(false) {
                    return Err(cx.error(
                        &at,
                        format!("Gemini has no `{keyword}`, so an open object or map cannot be expressed"),
                    ));
                }
            }
            "items" => {
                if value.is_array() {
                    return Err(cx.tuple_items(&at));
                }
                let items = gemini_schema(cx, value, &at, depth + 1)?;
                out.insert(keyword.clone(), Value::Object(items));
            }
            "anyOf" | "oneOf" => {
                let branches = expect_array(cx, value, &at)?;
                let mut lowered = Vec::with_capacity(branches.len());
                for (i, branch) in branches.iter().enumerate() {
                    let branch =
                        gemini_schema(cx, branch, &pointer_push(&at, &i.to_string()), depth + 1)?;
                    lowered.push(Value::Object(branch));
                }
                out.insert("anyOf".into(), Value::Array(lowered));
            }
            "pattern" => {
                out.insert(keyword.clone(), expect_string(cx, value, &at)?.into());
            }
            "minimum" | "maximum" => {
                out.insert(keyword.clone(), expect_number(cx, value, &at)?);
            }
            "minItems" | "maxItems" | "minLength" | "maxLength" => {
                out.insert(keyword.clone(), expect_count(cx, value, &at)?);
            }
            // Gemini knows a handful of formats and is not documented to accept
            // others. Draft 2020-12 makes `format` an annotation unless a
            // validator opts into asserting it, so dropping the rest changes
            // no validation.
            "format" => {
                let format = expect_string(cx, value, &at)?;
                if GEMINI_FORMATS.contains(&format) {
                    out.insert(keyword.clone(), value.clone());
                }
            }
            "propertyOrdering" => {
                let names = expect_array(cx, value, &at)?;
                if !names.iter().all(Value::is_string) {
                    return Err(cx.malformed(&at, "an array of property names"));
                }
                out.insert(keyword.clone(), value.clone());
            }
            "uniqueItems" if value == &Value::Bool(false) => {}
            _ => return Err(cx.refuse(&at, keyword)),
        }
    }
    if out_type == Some("array") && !node.contains_key("items") {
        return Err(cx.error(
            path,
            "an array without `items` accepts any elements, which Gemini cannot express",
        ));
    }
    Ok(out)
}

/// Whether a branch is exactly `{"type": "null"}` (annotations aside).
fn is_null_branch(branch: &Value) -> bool {
    let Some(node) = branch.as_object() else {
        return false;
    };
    let null_type = match node.get("type") {
        Some(Value::String(name)) => name == "null",
        Some(Value::Array(names)) => names.len() == 1 && names[0] == "null",
        _ => false,
    };
    null_type && node.keys().all(|k| k == "type" || is_annotation(k))
}

/// `anyOf` (or exclusive `oneOf`) with `{"type":"null"}` branches: Gemini has
/// no null type, so the null branches become `nullable: true` on the others.
/// With one other branch (`Option<T>` in schemars) that branch is the result.
fn gemini_nullable_branches(
    cx: &mut Lowering,
    node: &Map<String, Value>,
    keyword: &str,
    branches: &[Value],
    path: &str,
    depth: usize,
) -> Result<Map<String, Value>, DialectError> {
    let at = pointer_push(path, keyword);
    if let Some(sibling) = node.keys().find(|k| *k != keyword && !is_annotation(k)) {
        return Err(cx.error(
            &pointer_push(path, sibling),
            format!("Gemini cannot express `{sibling}` next to a nullable `{keyword}`"),
        ));
    }
    let mut lowered = Vec::new();
    for (i, branch) in branches.iter().enumerate() {
        if is_null_branch(branch) {
            continue;
        }
        let branch_path = pointer_push(&at, &i.to_string());
        let mut branch = gemini_schema(cx, branch, &branch_path, depth + 1)?;
        gemini_set_nullable(cx, &mut branch, &branch_path)?;
        lowered.push(branch);
    }
    let mut out = if lowered.len() == 1 {
        lowered.pop().unwrap_or_default()
    } else if lowered.is_empty() {
        return Err(cx.error(
            &at,
            "Gemini cannot express a schema that accepts only `null`",
        ));
    } else {
        let mut out = Map::new();
        out.insert(
            "anyOf".into(),
            Value::Array(lowered.into_iter().map(Value::Object).collect()),
        );
        out
    };
    // The annotations of the `anyOf` describe the property; they take
    // precedence over the branch's own.
    for annotation in KEPT_ANNOTATIONS {
        if let Some(value) = node.get(annotation) {
            let value = expect_string(cx, value, &pointer_push(path, annotation))?;
            out.insert(annotation.into(), value.into());
        }
    }
    Ok(out)
}

/// Adds `nullable: true` to a lowered schema, pushing it into the branches
/// of a bare `anyOf` (`anyOf[A∪null, B∪null]` is `anyOf[A, B] ∪ null`).
fn gemini_set_nullable(
    cx: &Lowering,
    node: &mut Map<String, Value>,
    path: &str,
) -> Result<(), DialectError> {
    let typed = node.contains_key("type") || node.contains_key("enum");
    match node.get_mut("anyOf") {
        Some(Value::Array(branches)) if !typed => {
            for branch in branches {
                if let Value::Object(branch) = branch {
                    gemini_set_nullable(cx, branch, path)?;
                }
            }
            Ok(())
        }
        Some(_) => Err(cx.error(
            path,
            "Gemini cannot make a schema that combines `type` and `anyOf` nullable",
        )),
        None => {
            node.insert("nullable".into(), Value::Bool(true));
            Ok(())
        }
    }
}

/// Gemini resolves no `$ref`: the definition is inlined, with the
/// reference's annotations on top. A recursive reference cannot be inlined.
fn gemini_ref(
    cx: &mut Lowering,
    node: &Map<String, Value>,
    path: &str,
    depth: usize,
) -> Result<Map<String, Value>, DialectError> {
    let at = pointer_push(path, "$ref");
    let Some(Value::String(reference)) = node.get("$ref") else {
        return Err(cx.malformed(&at, "a reference string"));
    };
    let (target, pointer) = resolve_ref(cx.root, reference).map_err(|r| cx.error(&at, r))?;
    let annotations = cx.ref_annotations(node, path)?;
    if cx.open.contains(&pointer) {
        return Err(cx.error(
            &at,
            format!(
                "`{reference}` is recursive (it refers back into `#{pointer}`): Gemini does not support `$ref`, and a recursive schema cannot be inlined"
            ),
        ));
    }
    cx.expand(&at)?;
    cx.open.push(pointer.clone());
    let lowered = gemini_schema(cx, target, &pointer, depth + 1);
    cx.open.pop();
    let mut lowered = lowered?;
    lowered.extend(annotations);
    Ok(lowered)
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemars::JsonSchema;
    use serde_json::json;

    const NAME: &str = "tool";
    const DESCRIPTION: &str = "Does things.";

    /// The canonical schema of `T`, made the way Aptix makes it: schemars
    /// draft 2020-12 without meta schema, `additionalProperties: false` on
    /// every object with `properties`, no root `title`.
    fn canonical<T: JsonSchema>() -> Value {
        let settings = schemars::generate::SchemaSettings::draft2020_12()
            .with(|s| s.meta_schema = None)
            .with_transform(schemars::transform::RecursiveTransform(
                |schema: &mut schemars::Schema| {
                    if schema.get("properties").is_some()
                        && schema.get("additionalProperties").is_none()
                    {
                        schema.insert("additionalProperties".into(), false.into());
                    }
                },
            ));
        let mut root = settings
            .into_generator()
            .into_root_schema_for::<T>()
            .to_value();
        if let Some(root) = root.as_object_mut() {
            root.remove("title");
            root.remove("$schema");
        }
        root
    }

    fn ok(dialect: Dialect, parameters: &Value) -> Value {
        match lower(dialect, NAME, DESCRIPTION, parameters) {
            Ok(tool) => tool,
            Err(error) => panic!("unexpected error: {error}"),
        }
    }

    fn err(dialect: Dialect, parameters: &Value) -> DialectError {
        match lower(dialect, NAME, DESCRIPTION, parameters) {
            Ok(tool) => panic!("expected an error, got {tool}"),
            Err(error) => error,
        }
    }

    fn error(dialect: Dialect, path: &str, reason: &str) -> DialectError {
        DialectError {
            tool: NAME.into(),
            dialect,
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// The parameters (or input schema) of a lowered tool.
    fn schema_of(dialect: Dialect, parameters: &Value) -> Value {
        let tool = ok(dialect, parameters);
        let key = match dialect {
            Dialect::OpenAiStrict | Dialect::Gemini => "parameters",
            Dialect::Anthropic => "input_schema",
            Dialect::Mcp => "inputSchema",
        };
        tool[key].clone()
    }

    /// A root object with one required property `x`.
    fn with_property(schema: Value) -> Value {
        json!({
            "type": "object",
            "properties": {"x": schema},
            "required": ["x"],
            "additionalProperties": false
        })
    }

    fn refusal(dialect: Dialect, path: &str, keyword: &str) -> DialectError {
        error(
            dialect,
            path,
            &format!(
                "{} does not support `{keyword}`, and dropping it would change which arguments are valid",
                dialect.provider()
            ),
        )
    }

    /// Weather lookup arguments.
    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Weather {
        /// City name.
        city: String,
        /// Days ahead.
        days: u8,
        units: Option<String>,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct NoArgs {}

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Point {
        x: f64,
        y: i32,
    }

    fn seven() -> u32 {
        7
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Shape {
        /// Where.
        at: Point,
        corner: Option<Point>,
        #[serde(default = "seven")]
        n: u32,
        #[serde(default)]
        tags: Vec<String>,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    enum Color {
        Red,
        Green,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Opts {
        name: Option<String>,
        count: Option<u32>,
        color: Option<Color>,
        point: Option<Point>,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Node {
        name: String,
        children: Vec<Node>,
        next: Option<Box<Node>>,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Tree {
        label: String,
        kids: Vec<Tree>,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Forest {
        trees: Vec<Tree>,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    enum Cmd {
        Stop,
        Move { dx: i32 },
        Say(String),
    }

    #[derive(JsonSchema)]
    #[serde(tag = "kind")]
    #[allow(dead_code)]
    enum Figure {
        Circle { r: f64 },
        Square { side: f64 },
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Paint {
        color: Color,
        alt: Option<Color>,
        cmd: Cmd,
        figure: Figure,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    enum Level {
        /// Low.
        Low,
        /// High.
        High,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Pick {
        level: Option<Level>,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Collections {
        map: std::collections::HashMap<String, u8>,
        set: std::collections::BTreeSet<String>,
        pair: (i32, String),
        any: serde_json::Value,
    }

    // ---- Dialect names -------------------------------------------------

    #[test]
    fn dialect_names_round_trip() {
        assert_eq!(
            Dialect::ALL,
            [
                Dialect::OpenAiStrict,
                Dialect::Anthropic,
                Dialect::Gemini,
                Dialect::Mcp
            ]
        );
        let names: Vec<&str> = Dialect::ALL.iter().map(|d| d.as_str()).collect();
        assert_eq!(names, ["openai_strict", "anthropic", "gemini", "mcp"]);
        for dialect in Dialect::ALL {
            assert_eq!(dialect.as_str().parse::<Dialect>(), Ok(dialect));
            assert_eq!(dialect.to_string(), dialect.as_str());
        }
        assert_eq!("openai".parse::<Dialect>(), Ok(Dialect::OpenAiStrict));
        assert_eq!(
            "OpenAI".parse::<Dialect>(),
            Err(ParseDialectError {
                input: "OpenAI".into()
            })
        );
        assert_eq!(
            ParseDialectError { input: "x".into() }.to_string(),
            "unknown dialect `x`; expected one of openai_strict, openai, anthropic, gemini, mcp"
        );
    }

    #[test]
    fn error_message_names_tool_dialect_and_path() {
        let e = error(Dialect::Gemini, "/properties/when/pattern", "because");
        assert_eq!(
            e.to_string(),
            "tool `tool` cannot be expressed in the gemini dialect at `/properties/when/pattern`: because"
        );
    }

    // ---- A simple struct in every dialect -------------------------------

    fn weather_canonical() -> Value {
        json!({
            "description": "Weather lookup arguments.",
            "type": "object",
            "properties": {
                "city": {"description": "City name.", "type": "string"},
                "days": {
                    "description": "Days ahead.",
                    "type": "integer",
                    "format": "uint8",
                    "minimum": 0,
                    "maximum": 255
                },
                "units": {"type": ["string", "null"]}
            },
            "required": ["city", "days"],
            "additionalProperties": false
        })
    }

    #[test]
    fn samples_have_the_canonical_shape() {
        assert_eq!(canonical::<Weather>(), weather_canonical());
    }

    #[test]
    fn simple_struct_openai_strict() {
        assert_eq!(
            ok(Dialect::OpenAiStrict, &weather_canonical()),
            json!({
                "type": "function",
                "name": "tool",
                "description": "Does things.",
                "strict": true,
                "parameters": {
                    "description": "Weather lookup arguments.",
                    "type": "object",
                    "properties": {
                        "city": {"description": "City name.", "type": "string"},
                        "days": {
                            "description": "Days ahead.",
                            "type": "integer",
                            "minimum": 0,
                            "maximum": 255
                        },
                        "units": {"type": ["string", "null"]}
                    },
                    "required": ["city", "days", "units"],
                    "additionalProperties": false
                }
            })
        );
    }

    #[test]
    fn simple_struct_anthropic_passes_through() {
        assert_eq!(
            ok(Dialect::Anthropic, &weather_canonical()),
            json!({
                "name": "tool",
                "description": "Does things.",
                "input_schema": weather_canonical()
            })
        );
    }

    #[test]
    fn simple_struct_mcp_passes_through() {
        assert_eq!(
            ok(Dialect::Mcp, &weather_canonical()),
            json!({
                "name": "tool",
                "description": "Does things.",
                "inputSchema": weather_canonical()
            })
        );
    }

    #[test]
    fn simple_struct_gemini() {
        assert_eq!(
            ok(Dialect::Gemini, &weather_canonical()),
            json!({
                "name": "tool",
                "description": "Does things.",
                "parameters": {
                    "description": "Weather lookup arguments.",
                    "type": "object",
                    "properties": {
                        "city": {"description": "City name.", "type": "string"},
                        "days": {
                            "description": "Days ahead.",
                            "type": "integer",
                            "minimum": 0,
                            "maximum": 255
                        },
                        "units": {"type": "string", "nullable": true}
                    },
                    "required": ["city", "days"]
                }
            })
        );
    }

    #[test]
    fn tool_without_arguments() {
        let parameters = canonical::<NoArgs>();
        assert_eq!(parameters, json!({"type": "object"}));
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &parameters),
            json!({
                "type": "object",
                "properties": {},
                "required": [],
                "additionalProperties": false
            })
        );
        // Gemini rejects an OBJECT with empty `properties`: no parameters at all.
        assert_eq!(
            ok(Dialect::Gemini, &parameters),
            json!({"name": "tool", "description": "Does things."})
        );
        assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
        assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
    }

    // ---- Option fields --------------------------------------------------

    #[test]
    fn option_fields() {
        let parameters = canonical::<Opts>();
        let point = json!({
            "type": "object",
            "properties": {
                "x": {"type": "number", "format": "double"},
                "y": {"type": "integer", "format": "int32"}
            },
            "required": ["x", "y"],
            "additionalProperties": false
        });
        assert_eq!(
            parameters,
            json!({
                "$defs": {
                    "Color": {"type": "string", "enum": ["Red", "Green"]},
                    "Point": point
                },
                "type": "object",
                "properties": {
                    "name": {"type": ["string", "null"]},
                    "count": {"type": ["integer", "null"], "format": "uint32", "minimum": 0},
                    "color": {"anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}]},
                    "point": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]}
                },
                "additionalProperties": false
            })
        );
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &parameters),
            json!({
                "$defs": {
                    "Color": {"type": "string", "enum": ["Red", "Green"]},
                    "Point": {
                        "type": "object",
                        "properties": {"x": {"type": "number"}, "y": {"type": "integer"}},
                        "required": ["x", "y"],
                        "additionalProperties": false
                    }
                },
                "type": "object",
                "properties": {
                    "name": {"type": ["string", "null"]},
                    "count": {"type": ["integer", "null"], "minimum": 0},
                    "color": {"anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}]},
                    "point": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]}
                },
                "required": ["color", "count", "name", "point"],
                "additionalProperties": false
            })
        );
        assert_eq!(
            schema_of(Dialect::Gemini, &parameters),
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "nullable": true},
                    "count": {"type": "integer", "nullable": true, "minimum": 0},
                    "color": {"type": "string", "enum": ["Red", "Green"], "nullable": true},
                    "point": {
                        "type": "object",
                        "nullable": true,
                        "properties": {
                            "x": {"type": "number", "format": "double"},
                            "y": {"type": "integer", "format": "int32"}
                        },
                        "required": ["x", "y"]
                    }
                }
            })
        );
        assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
        assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
    }

    #[test]
    fn optional_enum_gains_null_in_type_and_enum() {
        let parameters = json!({
            "type": "object",
            "properties": {"mode": {"type": "string", "enum": ["fast", "slow"]}},
            "additionalProperties": false
        });
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &parameters),
            json!({
                "type": "object",
                "properties": {
                    "mode": {"type": ["string", "null"], "enum": ["fast", "slow", null]}
                },
                "required": ["mode"],
                "additionalProperties": false
            })
        );
        assert_eq!(
            schema_of(Dialect::Gemini, &parameters),
            json!({
                "type": "object",
                "properties": {"mode": {"type": "string", "enum": ["fast", "slow"]}}
            })
        );
    }

    #[test]
    fn optional_const_and_any_of_become_nullable_with_any_of() {
        let parameters = json!({
            "type": "object",
            "properties": {
                "kind": {"description": "K.", "type": "string", "const": "x"},
                "value": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
            },
            "additionalProperties": false
        });
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &parameters),
            json!({
                "type": "object",
                "properties": {
                    "kind": {
                        "description": "K.",
                        "anyOf": [{"type": "string", "const": "x"}, {"type": "null"}]
                    },
                    "value": {
                        "anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]
                    }
                },
                "required": ["kind", "value"],
                "additionalProperties": false
            })
        );
        assert_eq!(
            schema_of(Dialect::Gemini, &parameters),
            json!({
                "type": "object",
                "properties": {
                    "kind": {"description": "K.", "type": "string", "enum": ["x"]},
                    "value": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
                }
            })
        );
    }

    #[test]
    fn gemini_nullable_any_of_with_several_branches() {
        let parameters = with_property(json!({
            "description": "V.",
            "anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]
        }));
        assert_eq!(
            schema_of(Dialect::Gemini, &parameters),
            json!({
                "type": "object",
                "properties": {
                    "x": {
                        "description": "V.",
                        "anyOf": [
                            {"type": "string", "nullable": true},
                            {"type": "integer", "nullable": true}
                        ]
                    }
                },
                "required": ["x"]
            })
        );
    }

    // ---- Nested structs via $ref, defaults ------------------------------

    #[test]
    fn nested_struct_via_ref_with_defaults() {
        let parameters = canonical::<Shape>();
        let point = json!({
            "type": "object",
            "properties": {
                "x": {"type": "number", "format": "double"},
                "y": {"type": "integer", "format": "int32"}
            },
            "required": ["x", "y"],
            "additionalProperties": false
        });
        assert_eq!(
            parameters,
            json!({
                "$defs": {"Point": point},
                "type": "object",
                "properties": {
                    "at": {"$ref": "#/$defs/Point", "description": "Where."},
                    "corner": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]},
                    "n": {"type": "integer", "format": "uint32", "minimum": 0, "default": 7},
                    "tags": {"type": "array", "items": {"type": "string"}, "default": []}
                },
                "required": ["at"],
                "additionalProperties": false
            })
        );
        let strict_point = json!({
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "integer"}},
            "required": ["x", "y"],
            "additionalProperties": false
        });
        // OpenAI rejects keywords beside `$ref`, so the described reference is
        // inlined; the optional one keeps its `$ref` inside the nullable `anyOf`.
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &parameters),
            json!({
                "$defs": {"Point": strict_point},
                "type": "object",
                "properties": {
                    "at": {
                        "description": "Where.",
                        "type": "object",
                        "properties": {"x": {"type": "number"}, "y": {"type": "integer"}},
                        "required": ["x", "y"],
                        "additionalProperties": false
                    },
                    "corner": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]},
                    "n": {"type": ["integer", "null"], "minimum": 0},
                    "tags": {"type": ["array", "null"], "items": {"type": "string"}}
                },
                "required": ["at", "corner", "n", "tags"],
                "additionalProperties": false
            })
        );
        let gemini_point = json!({
            "x": {"type": "number", "format": "double"},
            "y": {"type": "integer", "format": "int32"}
        });
        assert_eq!(
            schema_of(Dialect::Gemini, &parameters),
            json!({
                "type": "object",
                "properties": {
                    "at": {
                        "description": "Where.",
                        "type": "object",
                        "properties": gemini_point,
                        "required": ["x", "y"]
                    },
                    "corner": {
                        "type": "object",
                        "nullable": true,
                        "properties": gemini_point,
                        "required": ["x", "y"]
                    },
                    "n": {"type": "integer", "minimum": 0},
                    "tags": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["at"]
            })
        );
        // Defaults are meaning for Anthropic and MCP clients: kept.
        assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
        assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
    }

    #[test]
    fn openai_inlines_through_an_alias_definition() {
        let parameters = json!({
            "$defs": {
                "Id": {"$ref": "#/$defs/Uuid"},
                "Uuid": {"type": "string", "format": "uuid"}
            },
            "type": "object",
            "properties": {"id": {"$ref": "#/$defs/Id", "description": "The id."}},
            "required": ["id"],
            "additionalProperties": false
        });
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &parameters),
            json!({
                "$defs": {
                    "Id": {"$ref": "#/$defs/Uuid"},
                    "Uuid": {"type": "string", "format": "uuid"}
                },
                "type": "object",
                "properties": {
                    "id": {"type": "string", "format": "uuid", "description": "The id."}
                },
                "required": ["id"],
                "additionalProperties": false
            })
        );
    }

    // ---- Recursion ------------------------------------------------------

    #[test]
    fn recursion_through_root() {
        let parameters = canonical::<Node>();
        assert_eq!(
            parameters,
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#"}},
                    "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}
                },
                "required": ["name", "children"],
                "additionalProperties": false
            })
        );
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &parameters),
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#"}},
                    "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}
                },
                "required": ["children", "name", "next"],
                "additionalProperties": false
            })
        );
        assert_eq!(
            err(Dialect::Gemini, &parameters),
            error(
                Dialect::Gemini,
                "/properties/children/items/$ref",
                "`#` is recursive (it refers back into `#`): Gemini does not support `$ref`, and a recursive schema cannot be inlined"
            )
        );
        assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
        assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
    }

    #[test]
    fn recursion_through_a_definition() {
        let parameters = canonical::<Forest>();
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &parameters),
            json!({
                "$defs": {
                    "Tree": {
                        "type": "object",
                        "properties": {
                            "label": {"type": "string"},
                            "kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}
                        },
                        "required": ["kids", "label"],
                        "additionalProperties": false
                    }
                },
                "type": "object",
                "properties": {
                    "trees": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}
                },
                "required": ["trees"],
                "additionalProperties": false
            })
        );
        assert_eq!(
            err(Dialect::Gemini, &parameters),
            error(
                Dialect::Gemini,
                "/$defs/Tree/properties/kids/items/$ref",
                "`#/$defs/Tree` is recursive (it refers back into `#/$defs/Tree`): Gemini does not support `$ref`, and a recursive schema cannot be inlined"
            )
        );
    }

    #[test]
    fn openai_drops_annotations_of_a_reference_back_into_an_open_schema() {
        let parameters = json!({
            "type": "object",
            "properties": {"parent": {"$ref": "#", "description": "Parent."}},
            "required": ["parent"],
            "additionalProperties": false
        });
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &parameters),
            json!({
                "type": "object",
                "properties": {"parent": {"$ref": "#"}},
                "required": ["parent"],
                "additionalProperties": false
            })
        );
    }

    // ---- Enums ----------------------------------------------------------

    #[test]
    fn enums_unit_externally_and_internally_tagged() {
        let parameters = canonical::<Paint>();
        let canonical_defs = json!({
            "Cmd": {"oneOf": [
                {"type": "string", "enum": ["Stop"]},
                {
                    "type": "object",
                    "properties": {"Move": {
                        "type": "object",
                        "properties": {"dx": {"type": "integer", "format": "int32"}},
                        "required": ["dx"],
                        "additionalProperties": false
                    }},
                    "required": ["Move"],
                    "additionalProperties": false
                },
                {
                    "type": "object",
                    "properties": {"Say": {"type": "string"}},
                    "required": ["Say"],
                    "additionalProperties": false
                }
            ]},
            "Color": {"type": "string", "enum": ["Red", "Green"]},
            "Figure": {"oneOf": [
                {
                    "type": "object",
                    "properties": {
                        "kind": {"type": "string", "const": "Circle"},
                        "r": {"type": "number", "format": "double"}
                    },
                    "required": ["kind", "r"],
                    "additionalProperties": false
                },
                {
                    "type": "object",
                    "properties": {
                        "kind": {"type": "string", "const": "Square"},
                        "side": {"type": "number", "format": "double"}
                    },
                    "required": ["kind", "side"],
                    "additionalProperties": false
                }
            ]}
        });
        assert_eq!(
            parameters,
            json!({
                "$defs": canonical_defs,
                "type": "object",
                "properties": {
                    "color": {"$ref": "#/$defs/Color"},
                    "alt": {"anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}]},
                    "cmd": {"$ref": "#/$defs/Cmd"},
                    "figure": {"$ref": "#/$defs/Figure"}
                },
                "required": ["color", "cmd", "figure"],
                "additionalProperties": false
            })
        );
        // Both `oneOf`s are provably exclusive (distinct types, a key the other
        // closed object forbids, distinct `const` tags): they become `anyOf`.
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &parameters),
            json!({
                "$defs": {
                    "Cmd": {"anyOf": [
                        {"type": "string", "enum": ["Stop"]},
                        {
                            "type": "object",
                            "properties": {"Move": {
                                "type": "object",
                                "properties": {"dx": {"type": "integer"}},
                                "required": ["dx"],
                                "additionalProperties": false
                            }},
                            "required": ["Move"],
                            "additionalProperties": false
                        },
                        {
                            "type": "object",
                            "properties": {"Say": {"type": "string"}},
                            "required": ["Say"],
                            "additionalProperties": false
                        }
                    ]},
                    "Color": {"type": "string", "enum": ["Red", "Green"]},
                    "Figure": {"anyOf": [
                        {
                            "type": "object",
                            "properties": {
                                "kind": {"type": "string", "const": "Circle"},
                                "r": {"type": "number"}
                            },
                            "required": ["kind", "r"],
                            "additionalProperties": false
                        },
                        {
                            "type": "object",
                            "properties": {
                                "kind": {"type": "string", "const": "Square"},
                                "side": {"type": "number"}
                            },
                            "required": ["kind", "side"],
                            "additionalProperties": false
                        }
                    ]}
                },
                "type": "object",
                "properties": {
                    "color": {"$ref": "#/$defs/Color"},
                    "alt": {"anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}]},
                    "cmd": {"$ref": "#/$defs/Cmd"},
                    "figure": {"$ref": "#/$defs/Figure"}
                },
                "required": ["alt", "cmd", "color", "figure"],
                "additionalProperties": false
            })
        );
        assert_eq!(
            schema_of(Dialect::Gemini, &parameters),
            json!({
                "type": "object",
                "properties": {
                    "color": {"type": "string", "enum": ["Red", "Green"]},
                    "alt": {"type": "string", "enum": ["Red", "Green"], "nullable": true},
                    "cmd": {"anyOf": [
                        {"type": "string", "enum": ["Stop"]},
                        {
                            "type": "object",
                            "properties": {"Move": {
                                "type": "object",
                                "properties": {"dx": {"type": "integer", "format": "int32"}},
                                "required": ["dx"]
                            }},
                            "required": ["Move"]
                        },
                        {
                            "type": "object",
                            "properties": {"Say": {"type": "string"}},
                            "required": ["Say"]
                        }
                    ]},
                    "figure": {"anyOf": [
                        {
                            "type": "object",
                            "properties": {
                                "kind": {"type": "string", "enum": ["Circle"]},
                                "r": {"type": "number", "format": "double"}
                            },
                            "required": ["kind", "r"]
                        },
                        {
                            "type": "object",
                            "properties": {
                                "kind": {"type": "string", "enum": ["Square"]},
                                "side": {"type": "number", "format": "double"}
                            },
                            "required": ["kind", "side"]
                        }
                    ]}
                },
                "required": ["color", "cmd", "figure"]
            })
        );
        assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
        assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
    }

    #[test]
    fn documented_unit_variants_one_of_const() {
        let parameters = canonical::<Pick>();
        let level = json!({"oneOf": [
            {"description": "Low.", "type": "string", "const": "Low"},
            {"description": "High.", "type": "string", "const": "High"}
        ]});
        assert_eq!(
            parameters,
            json!({
                "$defs": {"Level": level},
                "type": "object",
                "properties": {
                    "level": {"anyOf": [{"$ref": "#/$defs/Level"}, {"type": "null"}]}
                },
                "additionalProperties": false
            })
        );
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &parameters),
            json!({
                "$defs": {"Level": {"anyOf": [
                    {"description": "Low.", "type": "string", "const": "Low"},
                    {"description": "High.", "type": "string", "const": "High"}
                ]}},
                "type": "object",
                "properties": {
                    "level": {"anyOf": [{"$ref": "#/$defs/Level"}, {"type": "null"}]}
                },
                "required": ["level"],
                "additionalProperties": false
            })
        );
        // `nullable` is pushed into each branch of the inlined `anyOf`.
        assert_eq!(
            schema_of(Dialect::Gemini, &parameters),
            json!({
                "type": "object",
                "properties": {"level": {"anyOf": [
                    {"description": "Low.", "type": "string", "enum": ["Low"], "nullable": true},
                    {"description": "High.", "type": "string", "enum": ["High"], "nullable": true}
                ]}}
            })
        );
    }

    #[test]
    fn overlapping_one_of_is_refused() {
        let parameters = with_property(json!({
            "oneOf": [{"type": "string"}, {"type": "string", "minLength": 3}]
        }));
        for dialect in [Dialect::OpenAiStrict, Dialect::Gemini] {
            assert_eq!(
                err(dialect, &parameters),
                error(
                    dialect,
                    "/properties/x/oneOf",
                    &format!(
                        "{} does not support `oneOf`, and branches 0 and 1 are not provably mutually exclusive, so it cannot be rewritten as `anyOf`",
                        dialect.provider()
                    )
                )
            );
        }
        assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
    }

    #[test]
    fn one_of_exclusive_by_enum_values_and_value_types() {
        let parameters = with_property(json!({"oneOf": [
            {"enum": ["a", "b"]},
            {"enum": ["c", 1]},
            {"type": "boolean"},
            {"const": 1.5}
        ]}));
        // `1.5` matches neither a string enum nor `boolean`; `1` and `1.5`
        // differ; OpenAI keeps untyped `enum`/`const`.
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &parameters)["properties"]["x"],
            json!({"anyOf": [
                {"enum": ["a", "b"]},
                {"enum": ["c", 1]},
                {"type": "boolean"},
                {"const": 1.5}
            ]})
        );
        let equal_numbers = with_property(json!({"oneOf": [{"const": 1}, {"const": 1.0}]}));
        assert_eq!(
            err(Dialect::OpenAiStrict, &equal_numbers).path,
            "/properties/x/oneOf"
        );
    }

    // ---- Refused keywords -----------------------------------------------

    #[test]
    fn openai_refuses_unsupported_keywords() {
        let cases = [
            (
                "allOf",
                json!({"type": "string", "allOf": [{"minLength": 1}]}),
            ),
            ("not", json!({"type": "string", "not": {"const": "a"}})),
            ("if", json!({"type": "string", "if": {"minLength": 1}})),
            ("then", json!({"type": "string", "then": {"minLength": 1}})),
            ("else", json!({"type": "string", "else": {"minLength": 1}})),
            (
                "dependentRequired",
                json!({"type": "object", "additionalProperties": false, "dependentRequired": {}}),
            ),
            (
                "dependentSchemas",
                json!({"type": "object", "additionalProperties": false, "dependentSchemas": {}}),
            ),
            (
                "patternProperties",
                json!({"type": "object", "additionalProperties": false, "patternProperties": {"^a": {"type": "string"}}}),
            ),
            (
                "unevaluatedProperties",
                json!({"type": "object", "unevaluatedProperties": false}),
            ),
            (
                "propertyNames",
                json!({"type": "object", "additionalProperties": false, "propertyNames": {"pattern": "^a"}}),
            ),
            (
                "contains",
                json!({"type": "array", "items": {"type": "string"}, "contains": {"const": "a"}}),
            ),
            (
                "prefixItems",
                json!({"type": "array", "prefixItems": [{"type": "string"}]}),
            ),
            (
                "uniqueItems",
                json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}),
            ),
            (
                "minProperties",
                json!({"type": "object", "additionalProperties": false, "minProperties": 1}),
            ),
            ("nullable", json!({"type": "string", "nullable": true})),
            ("x-custom", json!({"type": "string", "x-custom": 1})),
            ("$id", json!({"$id": "urn:x", "type": "string"})),
            ("$defs", json!({"$defs": {}, "type": "string"})),
        ];
        for (keyword, schema) in cases {
            assert_eq!(
                err(Dialect::OpenAiStrict, &with_property(schema)),
                refusal(
                    Dialect::OpenAiStrict,
                    &format!("/properties/x/{keyword}"),
                    keyword
                ),
                "{keyword}"
            );
        }
    }

    #[test]
    fn gemini_refuses_unsupported_keywords() {
        let cases = [
            (
                "exclusiveMinimum",
                json!({"type": "integer", "exclusiveMinimum": 0}),
            ),
            (
                "exclusiveMaximum",
                json!({"type": "integer", "exclusiveMaximum": 9}),
            ),
            ("multipleOf", json!({"type": "integer", "multipleOf": 2})),
            (
                "uniqueItems",
                json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}),
            ),
            (
                "allOf",
                json!({"type": "string", "allOf": [{"minLength": 1}]}),
            ),
            ("not", json!({"type": "string", "not": {"const": "a"}})),
            ("if", json!({"type": "string", "if": {"minLength": 1}})),
            (
                "patternProperties",
                json!({"type": "object", "patternProperties": {"^a": {"type": "string"}}}),
            ),
            (
                "prefixItems",
                json!({"type": "array", "prefixItems": [{"type": "string"}]}),
            ),
            (
                "dependentRequired",
                json!({"type": "object", "dependentRequired": {}}),
            ),
            ("x-custom", json!({"type": "string", "x-custom": 1})),
            ("$id", json!({"$id": "urn:x", "type": "string"})),
        ];
        for (keyword, schema) in cases {
            assert_eq!(
                err(Dialect::Gemini, &with_property(schema)),
                refusal(
                    Dialect::Gemini,
                    &format!("/properties/x/{keyword}"),
                    keyword
                ),
                "{keyword}"
            );
        }
    }

    #[test]
    fn open_objects_and_maps_are_refused() {
        let parameters = canonical::<Collections>();
        assert_eq!(
            err(Dialect::OpenAiStrict, &parameters),
            error(
                Dialect::OpenAiStrict,
                "/properties/any",
                "the schema `true` accepts any value, which OpenAI strict mode cannot express"
            )
        );
        let map =
            with_property(json!({"type": "object", "additionalProperties": {"type": "string"}}));
        assert_eq!(
            err(Dialect::OpenAiStrict, &map),
            error(
                Dialect::OpenAiStrict,
                "/properties/x/additionalProperties",
                "OpenAI strict mode requires `additionalProperties: false`; an open object or map cannot be strict"
            )
        );
        assert_eq!(
            err(Dialect::Gemini, &map),
            error(
                Dialect::Gemini,
                "/properties/x/additionalProperties",
                "Gemini has no `additionalProperties`, so an open object or map cannot be expressed"
            )
        );
        let open = with_property(json!({"type": "object", "additionalProperties": true}));
        assert_eq!(
            err(Dialect::OpenAiStrict, &open).path,
            "/properties/x/additionalProperties"
        );
        assert_eq!(
            err(Dialect::Gemini, &open).path,
            "/properties/x/additionalProperties"
        );
        // Properties without `additionalProperties: false`: open, so not strict.
        let unclosed = json!({
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "required": ["a"]
        });
        assert_eq!(
            err(Dialect::OpenAiStrict, &unclosed),
            error(
                Dialect::OpenAiStrict,
                "",
                "the object does not set `additionalProperties: false`, so it accepts extra properties; OpenAI strict mode requires closed objects, and closing it would change its meaning"
            )
        );
        assert_eq!(
            schema_of(Dialect::Gemini, &unclosed),
            json!({
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "required": ["a"]
            })
        );
        // Sets carry `uniqueItems`, tuples `prefixItems`: both refused.
        let set = with_property(canonical::<Collections>()["properties"]["set"].clone());
        assert_eq!(
            err(Dialect::OpenAiStrict, &set),
            refusal(
                Dialect::OpenAiStrict,
                "/properties/x/uniqueItems",
                "uniqueItems"
            )
        );
        let pair = with_property(canonical::<Collections>()["properties"]["pair"].clone());
        assert_eq!(
            err(Dialect::Gemini, &pair),
            refusal(Dialect::Gemini, "/properties/x/prefixItems", "prefixItems")
        );
        assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
        assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
    }

    #[test]
    fn unconstrained_schemas_are_refused() {
        let untyped = with_property(json!({"description": "anything"}));
        assert_eq!(
            err(Dialect::OpenAiStrict, &untyped),
            error(
                Dialect::OpenAiStrict,
                "/properties/x",
                "the schema declares no `type` (nor `enum`, `const` or `anyOf`), so it accepts any value, which OpenAI strict mode cannot express"
            )
        );
        assert_eq!(
            err(Dialect::Gemini, &untyped),
            error(
                Dialect::Gemini,
                "/properties/x",
                "the schema declares no `type`, so it accepts any value, which Gemini cannot express"
            )
        );
        let nothing = with_property(json!(false));
        assert_eq!(
            err(Dialect::Gemini, &nothing),
            error(
                Dialect::Gemini,
                "/properties/x",
                "the schema `false` accepts no value, which Gemini cannot express"
            )
        );
        let array = with_property(json!({"type": "array"}));
        assert_eq!(
            err(Dialect::OpenAiStrict, &array),
            error(
                Dialect::OpenAiStrict,
                "/properties/x",
                "an array without `items` accepts any elements, which OpenAI strict mode cannot express"
            )
        );
        assert_eq!(
            err(Dialect::Gemini, &array),
            error(
                Dialect::Gemini,
                "/properties/x",
                "an array without `items` accepts any elements, which Gemini cannot express"
            )
        );
        assert_eq!(schema_of(Dialect::Mcp, &untyped), untyped);
    }

    #[test]
    fn ref_with_a_constraining_sibling_is_refused() {
        // What schemars emits for a newtype variant of an internally tagged enum.
        let parameters = json!({
            "$defs": {"P": {
                "type": "object",
                "properties": {"x": {"type": "number"}},
                "required": ["x"],
                "additionalProperties": false
            }},
            "type": "object",
            "properties": {"p": {
                "$ref": "#/$defs/P",
                "type": "object",
                "required": ["x"]
            }},
            "required": ["p"],
            "additionalProperties": false
        });
        for dialect in [Dialect::OpenAiStrict, Dialect::Gemini] {
            assert_eq!(
                err(dialect, &parameters),
                error(
                    dialect,
                    "/properties/p/required",
                    &format!(
                        "`required` next to `$ref` constrains the referenced schema; {} accepts no keywords beside `$ref`, and merging it into the referenced schema could change its meaning",
                        dialect.provider()
                    )
                )
            );
        }
    }

    #[test]
    fn required_names_must_be_declared() {
        let parameters = json!({
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "required": ["a", "b"],
            "additionalProperties": false
        });
        for dialect in [Dialect::OpenAiStrict, Dialect::Gemini] {
            assert_eq!(
                err(dialect, &parameters),
                error(
                    dialect,
                    "/required/1",
                    &format!(
                        "`b` is required but not declared in `properties`, which {} cannot express",
                        dialect.provider()
                    )
                )
            );
        }
    }

    #[test]
    fn gemini_type_unions_null_only_and_non_string_enums() {
        let union = with_property(json!({"type": ["string", "integer"]}));
        assert_eq!(
            err(Dialect::Gemini, &union),
            error(
                Dialect::Gemini,
                "/properties/x/type",
                "Gemini has no type unions other than `[T, \"null\"]`"
            )
        );
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &union)["properties"]["x"],
            json!({"type": ["string", "integer"]})
        );
        let null = with_property(json!({"type": "null"}));
        assert_eq!(
            err(Dialect::Gemini, &null),
            error(
                Dialect::Gemini,
                "/properties/x/type",
                "Gemini cannot express a schema that accepts only `null`"
            )
        );
        let numbers = with_property(json!({"type": "integer", "enum": [1, 2]}));
        assert_eq!(
            err(Dialect::Gemini, &numbers),
            error(
                Dialect::Gemini,
                "/properties/x/enum/0",
                "Gemini enums hold strings only, and this value is not a string"
            )
        );
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &numbers)["properties"]["x"],
            json!({"type": "integer", "enum": [1, 2]})
        );
        // An enum without `null` excludes it even if the type allows it.
        let closed_enum = with_property(json!({"type": ["string", "null"], "enum": ["a"]}));
        assert_eq!(
            schema_of(Dialect::Gemini, &closed_enum)["properties"]["x"],
            json!({"type": "string", "enum": ["a"]})
        );
        let null_enum = with_property(json!({"type": ["string", "null"], "enum": ["a", null]}));
        assert_eq!(
            schema_of(Dialect::Gemini, &null_enum)["properties"]["x"],
            json!({"type": "string", "enum": ["a"], "nullable": true})
        );
    }

    // ---- Formats and annotations ----------------------------------------

    #[test]
    fn formats() {
        let parameters = json!({
            "type": "object",
            "properties": {
                "when": {"type": "string", "format": "date-time"},
                "big": {"type": "integer", "format": "int64"},
                "small": {"type": "integer", "format": "uint32", "minimum": 0},
                "ratio": {"type": "number", "format": "float"}
            },
            "required": ["when", "big", "small", "ratio"],
            "additionalProperties": false
        });
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &parameters),
            json!({
                "type": "object",
                "properties": {
                    "when": {"type": "string", "format": "date-time"},
                    "big": {"type": "integer"},
                    "small": {"type": "integer", "minimum": 0},
                    "ratio": {"type": "number"}
                },
                "required": ["big", "ratio", "small", "when"],
                "additionalProperties": false
            })
        );
        assert_eq!(
            schema_of(Dialect::Gemini, &parameters),
            json!({
                "type": "object",
                "properties": {
                    "when": {"type": "string", "format": "date-time"},
                    "big": {"type": "integer", "format": "int64"},
                    "small": {"type": "integer", "minimum": 0},
                    "ratio": {"type": "number", "format": "float"}
                },
                "required": ["when", "big", "small", "ratio"]
            })
        );
        let email = with_property(json!({"type": "string", "format": "email"}));
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &email)["properties"]["x"],
            json!({"type": "string", "format": "email"})
        );
        assert_eq!(
            schema_of(Dialect::Gemini, &email)["properties"]["x"],
            json!({"type": "string"})
        );
        let uri = with_property(json!({"type": "string", "format": "uri"}));
        assert_eq!(
            err(Dialect::OpenAiStrict, &uri),
            error(
                Dialect::OpenAiStrict,
                "/properties/x/format",
                "OpenAI strict mode does not support format `uri` (only date-time, time, date, duration, email, hostname, ipv4, ipv6, uuid)"
            )
        );
    }

    #[test]
    fn supported_constraints_are_kept() {
        let parameters = with_property(json!({
            "title": "T",
            "type": "string",
            "minLength": 1,
            "maxLength": 5,
            "pattern": "^a"
        }));
        let expected = json!({
            "title": "T",
            "type": "string",
            "minLength": 1,
            "maxLength": 5,
            "pattern": "^a"
        });
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &parameters)["properties"]["x"],
            expected
        );
        assert_eq!(
            schema_of(Dialect::Gemini, &parameters)["properties"]["x"],
            expected
        );
        let numbers = with_property(json!({
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1,
            "multipleOf": 0.5
        }));
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &numbers)["properties"]["x"],
            json!({"type": "number", "exclusiveMinimum": 0, "maximum": 1, "multipleOf": 0.5})
        );
        let items = with_property(json!({
            "type": "array",
            "items": {"type": "integer"},
            "minItems": 1,
            "maxItems": 3,
            "uniqueItems": false
        }));
        let expected = json!({
            "type": "array",
            "items": {"type": "integer"},
            "minItems": 1,
            "maxItems": 3
        });
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &items)["properties"]["x"],
            expected
        );
        assert_eq!(
            schema_of(Dialect::Gemini, &items)["properties"]["x"],
            expected
        );
    }

    #[test]
    fn annotations_are_dropped_from_lowered_dialects_only() {
        let parameters = with_property(json!({
            "type": "string",
            "default": "a",
            "examples": ["a"],
            "deprecated": true,
            "readOnly": true,
            "writeOnly": false,
            "$comment": "internal"
        }));
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &parameters)["properties"]["x"],
            json!({"type": "string"})
        );
        assert_eq!(
            schema_of(Dialect::Gemini, &parameters)["properties"]["x"],
            json!({"type": "string"})
        );
        assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
        assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
    }

    #[test]
    fn unknown_keywords_are_kept_by_anthropic_and_mcp() {
        let parameters = with_property(json!({"type": "string", "x-custom": {"a": 1}}));
        assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
        assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
    }

    // ---- References -----------------------------------------------------

    #[test]
    fn dangling_and_non_local_references() {
        let dangling = with_property(json!({"$ref": "#/$defs/Missing"}));
        let remote = with_property(json!({"$ref": "https://example.com/s.json"}));
        let anchor = with_property(json!({"$ref": "#thing"}));
        for dialect in Dialect::ALL {
            assert_eq!(
                err(dialect, &dangling),
                error(
                    dialect,
                    "/properties/x/$ref",
                    "`#/$defs/Missing` does not resolve to anything in the parameters"
                )
            );
            assert_eq!(
                err(dialect, &remote),
                error(
                    dialect,
                    "/properties/x/$ref",
                    "`https://example.com/s.json` is not a local reference; only `#...` references into the tool's own parameters can be resolved"
                )
            );
            assert_eq!(
                err(dialect, &anchor),
                error(
                    dialect,
                    "/properties/x/$ref",
                    "`#thing` names an anchor, and only JSON-pointer references are supported"
                )
            );
        }
        let not_a_string = with_property(json!({"$ref": 1}));
        assert_eq!(
            err(Dialect::Mcp, &not_a_string),
            error(
                Dialect::Mcp,
                "/properties/x/$ref",
                "malformed schema: expected a reference string"
            )
        );
    }

    #[test]
    fn reference_cycles_without_a_schema_are_errors() {
        let parameters = json!({
            "$defs": {
                "A": {"$ref": "#/$defs/B"},
                "B": {"$ref": "#/$defs/A"}
            },
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/A"}},
            "required": ["p"],
            "additionalProperties": false
        });
        for dialect in Dialect::ALL {
            assert_eq!(
                err(dialect, &parameters),
                error(
                    dialect,
                    "/$defs/A/$ref",
                    "`#/$defs/B` leads into a cycle of references that never reaches a schema"
                )
            );
        }
    }

    #[test]
    fn escaped_and_percent_encoded_references() {
        let parameters = json!({
            "$defs": {
                "Pair<A, B>": {"type": "string"},
                "a/b": {"type": "integer"}
            },
            "type": "object",
            "properties": {
                "p": {"$ref": "#/$defs/Pair%3CA,%20B%3E"},
                "q": {"$ref": "#/$defs/a~1b"}
            },
            "required": ["p", "q"],
            "additionalProperties": false
        });
        assert_eq!(
            schema_of(Dialect::Gemini, &parameters),
            json!({
                "type": "object",
                "properties": {"p": {"type": "string"}, "q": {"type": "integer"}},
                "required": ["p", "q"]
            })
        );
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &parameters),
            json!({
                "$defs": {
                    "Pair<A, B>": {"type": "string"},
                    "a/b": {"type": "integer"}
                },
                "type": "object",
                "properties": {
                    "p": {"$ref": "#/$defs/Pair%3CA,%20B%3E"},
                    "q": {"$ref": "#/$defs/a~1b"}
                },
                "required": ["p", "q"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn openai_keeps_only_root_and_definition_references() {
        let parameters = json!({
            "type": "object",
            "properties": {
                "a": {"type": "string"},
                "b": {"$ref": "#/properties/a"}
            },
            "required": ["a", "b"],
            "additionalProperties": false
        });
        assert_eq!(
            err(Dialect::OpenAiStrict, &parameters),
            error(
                Dialect::OpenAiStrict,
                "/properties/b/$ref",
                "`#/properties/a` points inside the schema; the OpenAI strict lowering keeps only `#` and `#/$defs/<name>` addressable"
            )
        );
        assert_eq!(
            schema_of(Dialect::Gemini, &parameters),
            json!({
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "required": ["a", "b"]
            })
        );
        assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
    }

    #[test]
    fn exponential_inlining_is_bounded() {
        let mut defs = Map::new();
        for i in 0..20 {
            let next = format!("#/$defs/D{}", i + 1);
            defs.insert(
                format!("D{i}"),
                json!({
                    "type": "object",
                    "properties": {"a": {"$ref": next}, "b": {"$ref": next}},
                    "required": ["a", "b"],
                    "additionalProperties": false
                }),
            );
        }
        defs.insert("D20".into(), json!({"type": "string"}));
        let parameters = json!({
            "$defs": defs,
            "type": "object",
            "properties": {"d": {"$ref": "#/$defs/D0"}},
            "required": ["d"],
            "additionalProperties": false
        });
        assert_eq!(
            err(Dialect::Gemini, &parameters),
            error(
                Dialect::Gemini,
                "/$defs/D18/properties/b/$ref",
                "inlining `$ref`s would expand more than 1024 references"
            )
        );
        // OpenAI keeps the references: nothing to expand.
        assert_eq!(
            schema_of(Dialect::OpenAiStrict, &parameters)["properties"]["d"],
            json!({"$ref": "#/$defs/D0"})
        );
    }

    // ---- Malformed and non-object input ---------------------------------

    #[test]
    fn non_object_parameters_are_refused_by_every_dialect() {
        for dialect in Dialect::ALL {
            for parameters in [
                json!(true),
                json!(false),
                json!(null),
                json!("x"),
                json!([1]),
            ] {
                assert_eq!(
                    err(dialect, &parameters),
                    error(
                        dialect,
                        "",
                        "tool parameters must be a JSON Schema object with `\"type\": \"object\"`"
                    )
                );
            }
            assert_eq!(
                err(dialect, &json!({"type": "string"})),
                error(
                    dialect,
                    "/type",
                    "tool parameters must have `\"type\": \"object\"`: arguments are always a JSON object"
                )
            );
            assert_eq!(
                err(dialect, &json!({})),
                error(
                    dialect,
                    "",
                    "tool parameters must have `\"type\": \"object\"`: arguments are always a JSON object"
                )
            );
        }
    }

    #[test]
    fn anthropic_refuses_top_level_composition() {
        let parameters = json!({
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}]
        });
        assert_eq!(
            err(Dialect::Anthropic, &parameters),
            error(
                Dialect::Anthropic,
                "/anyOf",
                "Anthropic does not accept `anyOf` at the top level of `input_schema`"
            )
        );
        assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
    }

    #[test]
    fn malformed_keywords_are_errors_not_panics() {
        let cases = [
            (json!({"type": 1}), "/properties/x/type"),
            (json!({"type": "text"}), "/properties/x/type"),
            (json!({"type": []}), "/properties/x/type"),
            (
                json!({"type": "string", "description": 1}),
                "/properties/x/description",
            ),
            (
                json!({"type": "string", "minLength": -1}),
                "/properties/x/minLength",
            ),
            (
                json!({"type": "number", "maximum": "9"}),
                "/properties/x/maximum",
            ),
            (json!({"enum": []}), "/properties/x/enum"),
            (json!({"anyOf": {}}), "/properties/x/anyOf"),
            (json!(7), "/properties/x"),
        ];
        for (schema, path) in cases {
            let parameters = with_property(schema);
            for dialect in [Dialect::OpenAiStrict, Dialect::Gemini] {
                assert_eq!(
                    err(dialect, &parameters).path,
                    path,
                    "{dialect} {parameters}"
                );
            }
        }
        let bad_properties =
            json!({"type": "object", "properties": [], "additionalProperties": false});
        assert_eq!(
            err(Dialect::OpenAiStrict, &bad_properties).path,
            "/properties"
        );
        assert_eq!(err(Dialect::Gemini, &bad_properties).path, "/properties");
        let bad_required =
            json!({"type": "object", "required": "a", "additionalProperties": false});
        assert_eq!(err(Dialect::OpenAiStrict, &bad_required).path, "/required");
    }

    #[test]
    fn structural_refusals() {
        let tuple = with_property(json!({"type": "array", "items": [{"type": "string"}]}));
        for dialect in [Dialect::OpenAiStrict, Dialect::Gemini] {
            assert_eq!(
                err(dialect, &tuple),
                error(
                    dialect,
                    "/properties/x/items",
                    &format!(
                        "{} does not support `items` as an array (tuple validation)",
                        dialect.provider()
                    )
                )
            );
        }
        let both = with_property(json!({
            "anyOf": [{"type": "string"}],
            "oneOf": [{"type": "integer"}]
        }));
        for dialect in [Dialect::OpenAiStrict, Dialect::Gemini] {
            assert_eq!(
                err(dialect, &both),
                error(
                    dialect,
                    "/properties/x/oneOf",
                    &format!(
                        "{} cannot express `oneOf` next to `anyOf`: both would have to become the one `anyOf`",
                        dialect.provider()
                    )
                )
            );
        }
        let const_and_enum = with_property(json!({"type": "string", "const": "a", "enum": ["a"]}));
        assert_eq!(
            err(Dialect::Gemini, &const_and_enum),
            error(
                Dialect::Gemini,
                "/properties/x/const",
                "Gemini cannot express `const` next to `enum`"
            )
        );
        let root_any_of = json!({
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "additionalProperties": false,
            "anyOf": [{"required": ["a"]}]
        });
        assert_eq!(
            err(Dialect::OpenAiStrict, &root_any_of),
            error(
                Dialect::OpenAiStrict,
                "/anyOf",
                "OpenAI strict mode does not accept `anyOf` at the root of `parameters`"
            )
        );
    }

    /// Arbitrary keyword/value pairs, in properties and at the root: every
    /// dialect answers with a definition or an error, never a panic.
    #[test]
    fn arbitrary_input_never_panics() {
        let keywords = [
            "type",
            "properties",
            "required",
            "additionalProperties",
            "items",
            "enum",
            "const",
            "anyOf",
            "oneOf",
            "allOf",
            "not",
            "$ref",
            "$defs",
            "format",
            "pattern",
            "minimum",
            "minLength",
            "description",
            "title",
            "default",
            "uniqueItems",
            "prefixItems",
            "propertyOrdering",
            "nullable",
            "x-other",
        ];
        let values = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(-1),
            json!(1.5),
            json!("s"),
            json!("#"),
            json!("#/$defs"),
            json!("#/%FF"),
            json!("#/%"),
            json!([]),
            json!([null]),
            json!([{"type": "null"}]),
            json!(["string", "null"]),
            json!({}),
            json!({"type": "string"}),
            json!({"$ref": "#"}),
        ];
        let mut answers = 0;
        for keyword in keywords {
            for value in &values {
                let mut node = Map::new();
                node.insert(keyword.into(), value.clone());
                let mut typed = node.clone();
                typed.insert("type".into(), json!("object"));
                for parameters in [
                    with_property(Value::Object(node)),
                    with_property(Value::Object(typed.clone())),
                    // The keyword at the root, next to `"type": "object"`.
                    Value::Object(typed),
                ] {
                    for dialect in Dialect::ALL {
                        match lower(dialect, NAME, DESCRIPTION, &parameters) {
                            Ok(tool) => assert_eq!(tool["name"], json!(NAME)),
                            Err(e) => {
                                assert_eq!((e.tool.as_str(), e.dialect), (NAME, dialect));
                            }
                        }
                        answers += 1;
                    }
                }
            }
        }
        assert_eq!(answers, keywords.len() * values.len() * 3 * 4);
    }

    #[test]
    fn deep_nesting_is_an_error() {
        let mut schema = json!({"type": "string"});
        for _ in 0..200 {
            schema = json!({"type": "array", "items": schema});
        }
        let parameters = json!({
            "type": "object",
            "properties": {"deep": schema},
            "required": ["deep"],
            "additionalProperties": false
        });
        let path = format!("/properties/deep{}", "/items".repeat(128));
        for dialect in Dialect::ALL {
            assert_eq!(
                err(dialect, &parameters),
                error(dialect, &path, "schema is nested more than 128 levels deep")
            );
        }
    }

    #[test]
    fn lowering_is_pure_and_deterministic() {
        for parameters in [
            canonical::<Weather>(),
            canonical::<Shape>(),
            canonical::<Paint>(),
        ] {
            let before = parameters.clone();
            for dialect in Dialect::ALL {
                let first = lower(dialect, NAME, DESCRIPTION, &parameters);
                let second = lower(dialect, NAME, DESCRIPTION, &parameters);
                assert_eq!(first, second);
                assert_eq!(
                    first.map(|tool| tool.to_string()),
                    second.map(|tool| tool.to_string())
                );
            }
            assert_eq!(parameters, before);
        }
    }
}
