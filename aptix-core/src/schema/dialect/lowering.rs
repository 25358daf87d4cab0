//! What every lowering shares: the walk's state, its limits and errors,
//! JSON pointers and `$ref` resolution, and the reading of keywords.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::{Map, Value};

use super::exclusive::{all_disjoint_at_once, disjoint};
use super::{Dialect, DialectError};

/// Deepest schema nesting followed (inlined references count), so that no
/// input can exhaust the stack.
pub(super) const MAX_DEPTH: usize = 128;

/// Most `$ref`s inlined for one tool. Inlining a DAG of definitions can grow
/// exponentially; no real tool comes near this.
pub(super) const MAX_EXPANSIONS: usize = 1024;

/// Fewest bytes of canonical schema the lowering of one tool may copy (`$ref`s inlined, an
/// object written out once per branch), whatever the size of its schema.
pub(super) const MIN_COPY_BYTES: usize = 256 << 10;

/// Otherwise, how many times the size of its canonical schema the lowering of one tool may
/// copy: a schema within an MCP server's listing limits cannot lower to a tool spec much larger
/// than itself, which is sent with every model request.
pub(super) const COPY_FACTOR: usize = 4;

/// Most steps (comparisons of two subschemas) spent proving the branches of a tool's `oneOf`s
/// mutually exclusive; past it a proof is not found.
/// The shapes serde's enums take are proven in one pass
/// ([`all_disjoint_at_once`]), whatever their number of variants.
pub(super) const MAX_PROOF_STEPS: usize = 20_000;

/// Annotations that every dialect here can carry, kept as they are.
pub(super) const KEPT_ANNOTATIONS: [&str; 2] = ["description", "title"];

/// Annotations that never affect validation and that the lowered dialects
/// (OpenAI strict, Gemini) do not accept: dropped.
pub(super) const DROPPED_ANNOTATIONS: [&str; 6] = [
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
pub(super) const NUMERIC_FORMATS: [&str; 14] = [
    "int8", "int16", "int32", "int64", "int128", "int", "uint8", "uint16", "uint32", "uint64",
    "uint128", "uint", "float", "double",
];

/// String formats OpenAI strict mode supports.
pub(super) const OPENAI_FORMATS: [&str; 9] = [
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
pub(super) const GEMINI_FORMATS: [&str; 6] =
    ["int32", "int64", "float", "double", "enum", "date-time"];

/// JSON Schema's type names.
pub(super) const TYPE_NAMES: [&str; 7] = [
    "null", "boolean", "object", "array", "number", "integer", "string",
];

pub(super) struct Lowering<'a> {
    pub(super) dialect: Dialect,
    pub(super) root: &'a Value,
    /// Canonical pointers of the schemas whose bodies are being lowered,
    /// outermost first. Inlining one of these again would never end.
    pub(super) open: Vec<String>,
    /// `$ref`s inlined so far.
    expansions: usize,
    /// Bytes of canonical schema copied so far, and the bound (measured when first needed).
    copied: usize,
    copy_limit: Option<usize>,
    /// The size of each definition copied, measured once.
    sizes: HashMap<String, usize>,
    /// Steps left for proving branches exclusive.
    proof_steps: usize,
}

impl<'a> Lowering<'a> {
    /// A lowering of the parameters schema `root` to `dialect`.
    pub(super) fn new(dialect: Dialect, root: &'a Value) -> Self {
        Lowering {
            dialect,
            root,
            open: vec![String::new()],
            expansions: 0,
            copied: 0,
            copy_limit: None,
            sizes: HashMap::new(),
            proof_steps: MAX_PROOF_STEPS,
        }
    }

    /// The most bytes of canonical schema this lowering may copy: [`COPY_FACTOR`] times the
    /// schema, at least [`MIN_COPY_BYTES`].
    fn copy_limit(&mut self) -> usize {
        let root = self.root;
        *self.copy_limit.get_or_insert_with(|| {
            (COPY_FACTOR.saturating_mul(json_size(root))).max(MIN_COPY_BYTES)
        })
    }

    /// The size of the schema at `pointer`, as JSON text (about), measured once.
    pub(super) fn size_of(&mut self, pointer: &str, target: &Value) -> usize {
        if let Some(known) = self.sizes.get(pointer) {
            return *known;
        }
        let size = json_size(target);
        self.sizes.insert(pointer.to_owned(), size);
        size
    }

    /// Counts `bytes` more of canonical schema copied; false, and nothing counted, when that
    /// would pass [`Lowering::copy_limit`].
    pub(super) fn try_copy(&mut self, bytes: usize) -> bool {
        let limit = self.copy_limit();
        match self.copied.checked_add(bytes) {
            Some(copied) if copied <= limit => {
                self.copied = copied;
                true
            }
            _ => false,
        }
    }

    /// [`Lowering::try_copy`], or the error that names the bound.
    pub(super) fn copy(&mut self, bytes: usize, path: &str) -> Result<(), DialectError> {
        if self.try_copy(bytes) {
            return Ok(());
        }
        let limit = self.copy_limit();
        Err(self.error(
            path,
            format!(
                "{} needs the schema copied here, and the lowering of one tool may copy at most {limit} bytes of it ({COPY_FACTOR} times the schema, at least {} KiB), so that its tool spec stays near the size of its schema",
                self.dialect.provider(),
                MIN_COPY_BYTES >> 10
            ),
        ))
    }

    pub(super) fn error(&self, path: &str, reason: impl Into<String>) -> DialectError {
        DialectError {
            tool: String::new(),
            dialect: self.dialect,
            path: path.to_owned(),
            reason: reason.into(),
        }
    }

    pub(super) fn tuple_items(&self, path: &str) -> DialectError {
        self.error(
            path,
            format!(
                "{} does not support `items` as an array (tuple validation)",
                self.dialect.provider()
            ),
        )
    }

    pub(super) fn one_of_next_to_any_of(&self, path: &str) -> DialectError {
        self.error(
            path,
            format!(
                "{} cannot express `oneOf` next to `anyOf`: both would have to become the one `anyOf`",
                self.dialect.provider()
            ),
        )
    }

    /// A keyword the dialect cannot express and that cannot be dropped.
    pub(super) fn refuse(&self, path: &str, keyword: &str) -> DialectError {
        self.error(
            path,
            format!(
                "{} does not support `{keyword}`, and dropping it would change which arguments are valid",
                self.dialect.provider()
            ),
        )
    }

    pub(super) fn malformed(&self, path: &str, expected: &str) -> DialectError {
        self.error(path, format!("malformed schema: expected {expected}"))
    }

    /// Every provider wants an object schema at the root of a tool's
    /// parameters: arguments are always a JSON object.
    pub(super) fn check_root(&self) -> Result<&'a Map<String, Value>, DialectError> {
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
    pub(super) fn schema_object<'v>(
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
    pub(super) fn expand(&mut self, path: &str) -> Result<(), DialectError> {
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
    pub(super) fn ref_annotations(
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
    pub(super) fn check_exclusive(
        &mut self,
        branches: &[Value],
        path: &str,
    ) -> Result<(), DialectError> {
        if all_disjoint_at_once(self.root, branches) {
            return Ok(());
        }
        for (i, a) in branches.iter().enumerate() {
            for (j, b) in branches.iter().enumerate().skip(i + 1) {
                if !disjoint(self.root, a, b, 0, &mut self.proof_steps) {
                    let within = if self.proof_steps == 0 {
                        format!(" within {MAX_PROOF_STEPS} steps")
                    } else {
                        String::new()
                    };
                    return Err(self.error(
                        path,
                        format!(
                            "{} does not support `oneOf`, and branches {i} and {j} are not provably mutually exclusive{within}, so it cannot be rewritten as `anyOf`",
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
pub(super) fn pointer_push(path: &str, token: &str) -> String {
    let mut out = String::with_capacity(path.len() + token.len() + 1);
    out.push_str(path);
    out.push('/');
    if !token.contains(['~', '/']) {
        out.push_str(token);
        return out;
    }
    for c in token.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}

/// About the length of `value` as JSON text: strings without their escapes, numbers as 8.
/// Linear in `value`, with no allocation.
pub(super) fn json_size(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(text) => text.len() + 2,
        Value::Array(items) => items
            .iter()
            .fold(2, |size, item| size.saturating_add(json_size(item) + 1)),
        Value::Object(members) => members.iter().fold(2, |size, (name, member)| {
            size.saturating_add(name.len() + 4 + json_size(member))
        }),
    }
}

/// Percent-decodes a URI fragment. A `%` not followed by two hex digits is
/// kept literally, as schemars does; `None` if the result is not UTF-8.
pub(super) fn percent_decode(fragment: &str) -> Option<String> {
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
pub(super) fn resolve_ref<'r>(
    root: &'r Value,
    reference: &str,
) -> Result<(&'r Value, String), String> {
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
pub(super) fn is_bare_ref(node: &Map<String, Value>) -> bool {
    node.contains_key("$ref")
        && node.keys().all(|k| {
            k == "$ref"
                || KEPT_ANNOTATIONS.contains(&k.as_str())
                || DROPPED_ANNOTATIONS.contains(&k.as_str())
        })
}

pub(super) fn is_annotation(keyword: &str) -> bool {
    KEPT_ANNOTATIONS.contains(&keyword) || DROPPED_ANNOTATIONS.contains(&keyword)
}

pub(super) fn expect_string<'v>(
    cx: &Lowering,
    value: &'v Value,
    path: &str,
) -> Result<&'v str, DialectError> {
    value.as_str().ok_or_else(|| cx.malformed(path, "a string"))
}

pub(super) fn expect_array<'v>(
    cx: &Lowering,
    value: &'v Value,
    path: &str,
) -> Result<&'v Vec<Value>, DialectError> {
    match value {
        Value::Array(items) if !items.is_empty() => Ok(items),
        _ => Err(cx.malformed(path, "a non-empty array")),
    }
}

pub(super) fn expect_number(
    cx: &Lowering,
    value: &Value,
    path: &str,
) -> Result<Value, DialectError> {
    if value.is_number() {
        Ok(value.clone())
    } else {
        Err(cx.malformed(path, "a number"))
    }
}

pub(super) fn expect_count(
    cx: &Lowering,
    value: &Value,
    path: &str,
) -> Result<Value, DialectError> {
    if value.is_u64() {
        Ok(value.clone())
    } else {
        Err(cx.malformed(path, "a non-negative integer"))
    }
}

/// The type names of a `type` keyword, validated.
pub(super) fn parse_types<'v>(
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
pub(super) fn parse_required<'v>(
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
pub(super) fn check_references(
    cx: &Lowering,
    schema: &Value,
    path: &str,
    depth: usize,
    verified: &mut HashSet<String>,
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
            "$ref" => check_reference(cx, value, &at, verified)?,
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
                        check_references(
                            cx,
                            item,
                            &pointer_push(&at, &i.to_string()),
                            depth + 1,
                            verified,
                        )?;
                    }
                }
                _ => check_references(cx, value, &at, depth + 1, verified)?,
            },
            "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                if let Value::Array(items) = value {
                    for (i, item) in items.iter().enumerate() {
                        check_references(
                            cx,
                            item,
                            &pointer_push(&at, &i.to_string()),
                            depth + 1,
                            verified,
                        )?;
                    }
                }
            }
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas"
            | "dependencies" => {
                if let Value::Object(schemas) = value {
                    for (name, sub) in schemas {
                        check_references(cx, sub, &pointer_push(&at, name), depth + 1, verified)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// One `$ref`: it resolves, and the bare references it leads through end at a schema.
/// `verified` holds the pointers already known to end at one, so that a long chain is
/// followed once, not once per reference into it.
pub(super) fn check_reference(
    cx: &Lowering,
    value: &Value,
    at: &str,
    verified: &mut HashSet<String>,
) -> Result<(), DialectError> {
    let Value::String(reference) = value else {
        return Err(cx.malformed(at, "a reference string"));
    };
    let (mut target, pointer) = resolve_ref(cx.root, reference).map_err(|r| cx.error(at, r))?;
    if verified.contains(&pointer) {
        return Ok(());
    }
    let mut seen = BTreeSet::from([pointer]);
    while let Some(node) = target.as_object().filter(|node| is_bare_ref(node)) {
        let Some(Value::String(next)) = node.get("$ref") else {
            // A malformed `$ref` in the target is reported where it stands.
            break;
        };
        let Ok((next_target, next_pointer)) = resolve_ref(cx.root, next) else {
            break;
        };
        if verified.contains(&next_pointer) {
            break;
        }
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
    verified.extend(seen);
    Ok(())
}
