//! Argument validation: the model's raw argument string in, typed arguments
//! or a correctable rejection out.
//!
//! Three layers give one answer. [`fused`] validates while it parses into
//! the arguments type, in one pass. Where it is unsure, [`fast`] checks the
//! raw text against the compiled schema without building a
//! `serde_json::Value`, then a typed parse follows. Anything neither can
//! vouch for goes down the full path: parse to a `Value`, validate with `jsonschema`, and
//! collect every violation with its JSON path, so the model can fix all its
//! mistakes in one retry.

pub mod fast;
pub mod fused;
mod pattern;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::ErrorCode;
use fast::FastValidator;
use fused::FusedValidator;

/// Validates raw argument strings against one tool's canonical schema.
pub struct ArgsValidator {
    schema: Value,
    full: jsonschema::Validator,
    fused: Option<FusedValidator>,
    fast: Option<FastValidator>,
}

impl std::fmt::Debug for ArgsValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgsValidator")
            .field("fast_path", &self.fast.is_some())
            .finish()
    }
}

/// Why arguments were refused, in terms the model can act on.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// `invalid_json`, `not_object` or `invalid_arguments`.
    pub code: ErrorCode,
    /// A message for the model: every problem, each with where and what was expected.
    pub message: String,
    /// The same problems, structured: `[{"path": "/x", "message": "..."}]`.
    pub details: Option<Value>,
}

impl ArgsValidator {
    /// Compiles `schema` (a canonical parameters schema). The error is
    /// jsonschema's message for a schema it cannot compile.
    pub fn new(schema: &Value) -> Result<Self, String> {
        let full = jsonschema::draft202012::new(schema).map_err(|error| error.to_string())?;
        Ok(ArgsValidator {
            schema: schema.clone(),
            full,
            fused: FusedValidator::compile(schema),
            fast: FastValidator::compile(schema),
        })
    }

    /// Whether raw arguments can be checked without building a `Value`.
    pub fn has_fast_path(&self) -> bool {
        self.fused.is_some() || self.fast.is_some()
    }

    /// Validates `raw` and parses it into `A`.
    ///
    /// An empty or all-whitespace string counts as `{}`: some models send
    /// nothing at all for a tool without parameters.
    pub fn parse<A: DeserializeOwned>(&self, raw: &str) -> Result<A, Rejection> {
        // Stops at the first non-blank byte: the first, for any real object.
        let raw = if raw.bytes().all(|byte| byte.is_ascii_whitespace()) {
            "{}"
        } else {
            raw
        };
        // One pass that validates while it parses; it answers only when it
        // is sure, so a `None` just means "ask the next layer".
        if let Some(args) = self.fused.as_ref().and_then(|fused| fused.parse::<A>(raw)) {
            return Ok(args);
        }
        if let Some(fast) = &self.fast
            && fast.is_valid(raw)
            && let Ok(args) = serde_json::from_str::<A>(raw)
        {
            return Ok(args);
        }
        self.parse_full(raw)
    }

    /// The full path: one `Value` parse, every violation reported.
    fn parse_full<A: DeserializeOwned>(&self, raw: &str) -> Result<A, Rejection> {
        let mut value: Value =
            serde_json::from_str(raw).map_err(|error| invalid_json(raw, &error))?;
        if !value.is_object() {
            return Err(not_object(&value));
        }
        if !self.full.is_valid(&value) {
            // OpenAI's strict mode makes every optional property required and
            // nullable, so a model sends `null` for "not given". Read it so.
            let mut stripped = value.clone();
            if strip_optional_nulls(&mut stripped, &self.schema, &self.schema, 0)
                && self.full.is_valid(&stripped)
            {
                value = stripped;
            } else {
                let violations = self
                    .full
                    .iter_errors(&value)
                    .map(|error| (error.instance_path().as_str().to_owned(), error.to_string()))
                    .collect();
                return Err(invalid_arguments(violations));
            }
        }
        // The schema accepts it; the Rust type may still be stricter (a float
        // where an integer is declared, a custom `Deserialize`).
        serde_path_to_error::deserialize(&value).map_err(|error| {
            let path = pointer_of(error.path());
            invalid_arguments(vec![(path, error.inner().to_string())])
        })
    }
}

fn invalid_json(raw: &str, error: &serde_json::Error) -> Rejection {
    let text = error.to_string();
    let reason = text.split(" at line ").next().unwrap_or(&text);
    let offset = char_offset(raw, error.line(), error.column());
    let total = raw.chars().count();
    let start = offset.saturating_sub(24);
    let before: String = raw.chars().skip(start).take(offset - start).collect();
    let ellipsis = if start > 0 { "…" } else { "" };
    let message = format!(
        "The arguments are not valid JSON: {reason} at character {offset} of {total} (after `{ellipsis}{before}`). Send one JSON object with the tool's parameters."
    );
    Rejection {
        code: ErrorCode::InvalidJson,
        message,
        details: Some(json!({ "offset": offset, "reason": reason })),
    }
}

/// serde_json reports 1-based lines and columns (columns in bytes); the model
/// thinks in characters of one string, so report a character offset.
fn char_offset(raw: &str, line: usize, column: usize) -> usize {
    let mut byte = 0;
    for (index, text) in raw.split_inclusive('\n').enumerate() {
        if index + 1 == line {
            byte += column.min(text.len());
            break;
        }
        byte += text.len();
    }
    let byte = byte.min(raw.len());
    raw.char_indices().take_while(|(i, _)| *i < byte).count()
}

fn not_object(value: &Value) -> Rejection {
    let found = match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    Rejection {
        code: ErrorCode::NotObject,
        message: format!(
            "The arguments must be a JSON object whose members are the tool's parameters, not {found}."
        ),
        details: Some(json!({ "found": found })),
    }
}

fn invalid_arguments(violations: Vec<(String, String)>) -> Rejection {
    let mut message = String::from("The arguments do not match the tool's parameters:");
    for (path, problem) in &violations {
        let at = if path.is_empty() {
            "the top level"
        } else {
            path
        };
        message.push_str(&format!("\n- at {at}: {problem}"));
    }
    message.push_str("\nFix every listed problem and call the tool again.");
    let details = violations
        .into_iter()
        .map(|(path, message)| json!({ "path": path, "message": message }))
        .collect();
    Rejection {
        code: ErrorCode::InvalidArguments,
        message,
        details: Some(Value::Array(details)),
    }
}

/// serde_path_to_error's path (`a.b[0]`) as a JSON pointer (`/a/b/0`),
/// the notation every other violation uses.
fn pointer_of(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut pointer = String::new();
    for segment in path.iter() {
        pointer.push('/');
        match segment {
            Segment::Seq { index } => pointer.push_str(&index.to_string()),
            Segment::Map { key } => pointer.push_str(&key.replace('~', "~0").replace('/', "~1")),
            Segment::Enum { variant } => pointer.push_str(variant),
            Segment::Unknown => pointer.push('?'),
        }
    }
    pointer
}

/// Removes `null` members whose property is optional and does not accept
/// `null` itself; returns whether anything was removed. Follows local
/// `$ref`s, objects and arrays; bounded in depth like serde_json's parser.
fn strip_optional_nulls(value: &mut Value, schema: &Value, root: &Value, depth: usize) -> bool {
    if depth > 128 {
        return false;
    }
    let schema = match schema.get("$ref").and_then(Value::as_str) {
        Some("#") => root,
        Some(reference) => match reference
            .strip_prefix("#/$defs/")
            .and_then(|name| root.get("$defs").and_then(|defs| defs.get(name)))
        {
            Some(target) => target,
            None => return false,
        },
        None => schema,
    };
    let mut removed = false;
    match value {
        Value::Object(members) => {
            let Some(Value::Object(properties)) = schema.get("properties") else {
                return false;
            };
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|names| names.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            members.retain(|name, member| {
                let drop = member.is_null()
                    && !required.contains(&name.as_str())
                    && properties.get(name).is_some_and(|p| !accepts_null(p, root));
                removed |= drop;
                !drop
            });
            for (name, member) in members.iter_mut() {
                if let Some(property) = properties.get(name) {
                    removed |= strip_optional_nulls(member, property, root, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    removed |= strip_optional_nulls(item, item_schema, root, depth + 1);
                }
            }
        }
        _ => {}
    }
    removed
}

fn accepts_null(schema: &Value, root: &Value) -> bool {
    jsonschema::draft202012::new(&with_defs(schema, root))
        .map(|validator| validator.is_valid(&Value::Null))
        .unwrap_or(true)
}

/// A subschema made self-contained by carrying the root's `$defs`.
fn with_defs(schema: &Value, root: &Value) -> Value {
    match (schema, root.get("$defs")) {
        (Value::Object(map), Some(defs)) => {
            let mut map = map.clone();
            map.insert("$defs".into(), defs.clone());
            Value::Object(map)
        }
        _ => schema.clone(),
    }
}
