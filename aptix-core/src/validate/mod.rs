//! Argument validation: the model's raw argument string in, typed arguments
//! or a correctable rejection out.
//!
//! Two layers give one answer. The fused validator checks the raw text against the schema
//! while it parses it into the arguments type, in one pass, and answers only when it is sure
//! the document is valid. Anything it cannot vouch for (an invalid document, or a schema or type
//! it declines) goes down the exact path: parse to a `Value`, validate with `jsonschema`, and
//! list the violations with their JSON paths (the first [`MAX_VIOLATIONS`], and a count of the
//! rest), so the model can fix its mistakes in one retry without a huge document becoming a
//! huge message. `jsonschema` is the reference: the fused layer's `Some` is exactly its answer
//! plus `serde_json`'s typed parse, and it writes every message. A member name repeated in one
//! object is refused by both layers.

mod fused;
pub(crate) mod patterns;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::OnceLock;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor,
};
use serde_json::{Map, Value, json};

use crate::error::ErrorCode;
use fused::FusedValidator;

/// Most violations one rejection lists; the rest are only counted.
pub const MAX_VIOLATIONS: usize = 20;

/// Schema work done on this thread (tests count it): subschemas compiled while checking
/// `null` members, and patterns compiled by the fused validator.
#[cfg(test)]
pub(crate) mod compilations {
    use std::cell::Cell;

    thread_local! {
        static COUNT: Cell<usize> = const { Cell::new(0) };
    }

    /// One more on this thread.
    pub(crate) fn add() {
        COUNT.set(COUNT.get() + 1);
    }

    /// Back to 0 on this thread.
    pub(crate) fn reset() {
        COUNT.set(0);
    }

    /// How many on this thread.
    pub(crate) fn count() -> usize {
        COUNT.get()
    }
}

/// Validates raw argument strings against one tool's canonical schema.
pub struct ArgsValidator {
    /// Built the first time a document fails only for `null` members: deciding it compiles a
    /// schema per optional property, too much for every tool at catalog build.
    nulls: OnceLock<NullPlan>,
    /// The schema, for building [`ArgsValidator::full`] when first needed.
    schema: Value,
    /// `jsonschema`'s validator, built when the exact path first runs: building one checks the
    /// schema against the draft 2020-12 meta-schema, whose own validator `jsonschema` compiles
    /// on first use, which costs a process milliseconds. A schema the fused validator compiles
    /// is well-formed (it takes only keywords it knows, with values of their meta-schema types),
    /// so only the schemas it declines have theirs built, and refused, up front.
    full: OnceLock<Result<jsonschema::Validator, String>>,
    fused: Option<FusedValidator>,
}

impl std::fmt::Debug for ArgsValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgsValidator")
            .field("fast_path", &self.fused.is_some())
            .finish()
    }
}

/// Why arguments were refused, in terms the model can act on.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// `invalid_json`, `not_object` or `invalid_arguments`; `internal` for a schema that
    /// cannot be used.
    pub code: ErrorCode,
    /// A message for the model: the problems (at most [`MAX_VIOLATIONS`], then a count), each
    /// with where and what was expected.
    pub message: String,
    /// The same problems, structured: `[{"path": "/x", "message": "..."}]`.
    pub details: Option<Value>,
}

impl ArgsValidator {
    /// Compiles `schema` (a canonical parameters schema). The error is
    /// jsonschema's message for a schema it cannot compile, or names a `pattern` outside the
    /// bounds on patterns (one the linear-time `regex` engine cannot run, or too large).
    pub fn new(schema: &Value) -> Result<Self, String> {
        let fused = FusedValidator::compile(schema);
        let full = OnceLock::new();
        if fused.is_none() {
            let built = patterns::reference_validator(schema)?;
            let _ = full.set(Ok(built));
        }
        Ok(ArgsValidator {
            nulls: OnceLock::new(),
            schema: schema.clone(),
            full,
            fused,
        })
    }

    /// Whether raw arguments can be checked without building a `Value`.
    pub fn has_fast_path(&self) -> bool {
        self.fused.is_some()
    }

    /// Validates `raw` and parses it into `A`.
    ///
    /// An empty or all-whitespace string counts as `{}`: some models send
    /// nothing at all for a tool without parameters.
    #[inline]
    pub fn parse<A: DeserializeOwned>(&self, raw: &str) -> Result<A, Rejection> {
        // Stops at the first byte of any document.
        let raw = if raw.bytes().all(|byte| byte.is_ascii_whitespace()) {
            "{}"
        } else {
            raw
        };
        // One pass that validates while it parses; it answers only when it
        // is sure, so a `None` just means "ask the exact path".
        if let Some(fused) = &self.fused
            && let Some(args) = fused.parse::<A>(raw)
        {
            return Ok(args);
        }
        // Apart from the typed parse: every arguments type shares one copy.
        typed(&self.declined(raw)?)
    }

    /// What the fused validator did not vouch for, by the exact path: the
    /// text the typed parse reads.
    fn declined<'r>(&self, raw: &'r str) -> Result<Cow<'r, str>, Rejection> {
        Ok(match self.full_checked(raw)? {
            // `null`s read as absent were taken out: the type reads what was checked.
            (value, true) => Cow::Owned(value.to_string()),
            // The text itself, as `serde_json::from_str` reads it.
            (_, false) => Cow::Borrowed(raw),
        })
    }

    /// The exact path: the document as a `Value` the schema accepts, and whether `null` members
    /// were taken out of it.
    fn full_checked(&self, raw: &str) -> Result<(Value, bool), Rejection> {
        let value = parse_value(raw)?;
        if !value.is_object() {
            return Err(not_object(&value));
        }
        let full = match self
            .full
            .get_or_init(|| patterns::reference_validator(&self.schema))
        {
            Ok(full) => full,
            Err(error) => return Err(unusable_schema(error)),
        };
        if full.is_valid(&value) {
            return Ok((value, false));
        }
        // OpenAI's strict mode makes every optional property required and
        // nullable, so a model sends `null` for "not given". Read it so.
        let mut stripped = value.clone();
        let nulls = self.nulls.get_or_init(|| NullPlan::build(&self.schema));
        if nulls.strip(&mut stripped, 0, 0) && full.is_valid(&stripped) {
            return Ok((stripped, true));
        }
        let mut errors = full.iter_errors(&value);
        let violations = errors
            .by_ref()
            .take(MAX_VIOLATIONS)
            .map(|error| {
                let path = error.instance_path().as_str().to_owned();
                (path, shortened(error.to_string()))
            })
            .collect();
        let more = errors.count();
        Err(invalid_arguments(violations, more))
    }
}

/// `text`, which the schema accepts, parsed into `A`: the Rust type may still be stricter (a
/// float where an integer is declared, a custom `Deserialize`). It is read through the
/// deserializer the fast path uses (see [`FusedValidator::parse_open`]).
fn typed<A: DeserializeOwned>(text: &str) -> Result<A, Rejection> {
    let trace = RefCell::new(Vec::new());
    FusedValidator::parse_open(text, &trace)
        .map_err(|error| type_refused(trace.into_inner(), &error))
}

/// The refusal of a typed parse; `trace` is the path to the refused value, innermost first.
fn type_refused(trace: Vec<String>, error: &serde_json::Error) -> Rejection {
    let mut pointer = String::new();
    for segment in trace.iter().rev() {
        pointer.push('/');
        pointer.push_str(&segment.replace('~', "~0").replace('/', "~1"));
    }
    // The path names the place; a position would be in a text the model never saw when `null`
    // members were taken out, and is dropped always, so that one refusal reads the same.
    let message = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    let message = message.strip_suffix(&position).unwrap_or(&message);
    invalid_arguments(vec![(pointer, shortened(message.to_owned()))], 0)
}

/// `raw` as a `Value`, refusing duplicate member names: a `Value` would keep the last one,
/// while a typed parse may read both (an untagged enum buffers them and picks another variant),
/// so the tool would not get what was validated and shown to an approver.
fn parse_value(raw: &str) -> Result<Value, Rejection> {
    let duplicate = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_str(raw);
    let parsed = StrictValue {
        duplicate: &duplicate,
    }
    .deserialize(&mut deserializer)
    .and_then(|value| deserializer.end().map(|()| value));
    parsed.map_err(|error| match duplicate.into_inner() {
        Some(duplicate) => duplicate.rejection(),
        None => invalid_json(raw, &error),
    })
}

/// The arguments object `raw` with the members `names` taken out: meta
/// fields (see [`crate::schema::meta_fields`]) are not parameters, so they
/// are taken out before the rest is validated. Refused like any arguments
/// when `raw` is no JSON object or repeats a member name. A blank string
/// reads as `{}`, as in [`ArgsValidator::parse`].
pub(crate) fn take_members(raw: &str, names: &[&str]) -> Result<Taken, Rejection> {
    let raw = if raw.bytes().all(|byte| byte.is_ascii_whitespace()) {
        "{}"
    } else {
        raw
    };
    match parse_value(raw)? {
        Value::Object(mut members) => {
            let taken = names.iter().map(|name| members.remove(*name)).collect();
            Ok(Taken {
                rest: members,
                taken,
            })
        }
        other => Err(not_object(&other)),
    }
}

/// What [`take_members`] took out of an arguments object.
pub(crate) struct Taken {
    /// The other members: the arguments to validate.
    pub(crate) rest: Map<String, Value>,
    /// The members asked for, in the order asked, where present.
    pub(crate) taken: Vec<Option<Value>>,
}

/// `rejection` with `more` problems of other parts of the call (a latent
/// tool's `_output`) listed after its own, when it lists problems; a
/// rejection of another kind (the text is no JSON) stays as it is.
pub(crate) fn with_violations(rejection: Rejection, more: Vec<(String, String)>) -> Rejection {
    if more.is_empty() {
        return rejection;
    }
    if rejection.code != ErrorCode::InvalidArguments {
        return rejection;
    }
    let mut violations: Vec<(String, String)> = rejection
        .details
        .as_ref()
        .and_then(Value::as_array)
        .map(|listed| {
            listed
                .iter()
                .map(|item| {
                    let text = |key: &str| {
                        item.get(key)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned()
                    };
                    (text("path"), text("message"))
                })
                .collect()
        })
        .unwrap_or_default();
    violations.extend(more);
    violations_rejection(violations)
}

/// A rejection listing `violations` (the first [`MAX_VIOLATIONS`], and a count of the rest).
pub(crate) fn violations_rejection(mut violations: Vec<(String, String)>) -> Rejection {
    let more = violations.len().saturating_sub(MAX_VIOLATIONS);
    violations.truncate(MAX_VIOLATIONS);
    let violations = violations
        .into_iter()
        .map(|(path, problem)| (path, shortened(problem)))
        .collect();
    invalid_arguments(violations, more)
}

/// A member name met twice in one object, and where (innermost segment first, filled in as the
/// error travels up).
#[derive(Debug)]
pub(crate) struct Duplicate {
    name: String,
    reversed_path: Vec<String>,
}

impl Duplicate {
    fn rejection(self) -> Rejection {
        let mut path = String::new();
        for segment in self.reversed_path.iter().rev() {
            path.push('/');
            path.push_str(&segment.replace('~', "~0").replace('/', "~1"));
        }
        let name = shortened(self.name);
        let problem = format!(
            "the member `{name}` appears more than once in this object; send each member once"
        );
        invalid_arguments(vec![(path, problem)], 0)
    }
}

/// Builds a `Value` as `serde_json`'s own visitor does, except that a duplicate member name is
/// an error (recorded in `duplicate`, so that the caller can tell it from malformed JSON).
#[derive(Clone, Copy)]
pub(crate) struct StrictValue<'a> {
    pub(crate) duplicate: &'a RefCell<Option<Duplicate>>,
}

impl StrictValue<'_> {
    /// Adds `segment` to the path of a duplicate found below it, if that is why reading failed.
    fn locate(self, segment: String) {
        if let Some(duplicate) = self.duplicate.borrow_mut().as_mut() {
            duplicate.reversed_path.push(segment);
        }
    }
}

impl<'de> DeserializeSeed<'de> for StrictValue<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue<'_> {
    type Value = Value;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            match seq.next_element_seed(self) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => return Ok(Value::Array(items)),
                Err(error) => {
                    self.locate(items.len().to_string());
                    return Err(error);
                }
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        let mut first = true;
        while let Some(name) = map.next_key::<String>()? {
            // With `serde_json/raw_value`, a `Value` reads an object whose first member has this
            // name as the JSON text in the member's string.
            if first && name == RAW_TOKEN {
                let text: String = map.next_value()?;
                let mut inner = serde_json::Deserializer::from_str(&text);
                let value = self
                    .deserialize(&mut inner)
                    .and_then(|value| inner.end().map(|()| value))
                    .map_err(de::Error::custom)?;
                return Ok(value);
            }
            first = false;
            if members.contains_key(&name) {
                *self.duplicate.borrow_mut() = Some(Duplicate {
                    name,
                    reversed_path: Vec::new(),
                });
                return Err(de::Error::custom("duplicate member name"));
            }
            match map.next_value_seed(self) {
                Ok(value) => {
                    members.insert(name, value);
                }
                Err(error) => {
                    self.locate(name);
                    return Err(error);
                }
            }
        }
        Ok(Value::Object(members))
    }
}

/// The member name `serde_json` (with `raw_value`, on in Aptix's workspace) reserves for raw
/// values.
pub(crate) const RAW_TOKEN: &str = "$serde_json::private::RawValue";

/// Longest problem description, in characters: jsonschema's messages quote the offending
/// value, which can be most of the document.
const MAX_PROBLEM_CHARS: usize = 400;

fn shortened(mut problem: String) -> String {
    if let Some((cut, _)) = problem.char_indices().nth(MAX_PROBLEM_CHARS) {
        problem.truncate(cut);
        problem.push('…');
    }
    problem
}

/// The refusal of arguments that are not JSON. It names the place (a
/// character offset) and serde_json's reason, never the text: the model
/// has what it sent, while envelopes reach events, logs and stores, where
/// a value the model wrote (a password, a token) must not be quoted (seed
/// 002 §7). Only the syntax reasons, which are fixed phrases, are passed
/// on; any other is replaced by a generic one, so nothing the text holds
/// can reach the message through the reason either.
fn invalid_json(raw: &str, error: &serde_json::Error) -> Rejection {
    use serde_json::error::Category;
    let reason = match error.classify() {
        Category::Syntax | Category::Eof => {
            let text = error.to_string();
            text.split(" at line ").next().unwrap_or(&text).to_owned()
        }
        Category::Data | Category::Io => "not a JSON text".to_owned(),
    };
    let offset = char_offset(raw, error.line(), error.column());
    let total = raw.chars().count();
    let message = format!(
        "The arguments are not valid JSON: {reason} at character {offset} of {total}. Send one JSON object with the tool's parameters."
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

/// The schema `jsonschema` refused when the exact path first needed it. The fused validator
/// compiles only well-formed schemas, and any other is refused when the validator is built, so
/// this is not expected; it is an internal error, not the model's.
fn unusable_schema(error: &str) -> Rejection {
    Rejection {
        code: ErrorCode::Internal,
        message: format!("The tool's parameter schema cannot be used: {error}"),
        details: None,
    }
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

/// `more` counts the violations left out of the list (see [`MAX_VIOLATIONS`]).
fn invalid_arguments(violations: Vec<(String, String)>, more: usize) -> Rejection {
    let mut message = String::from("The arguments do not match the tool's parameters:");
    for (path, problem) in &violations {
        let at = if path.is_empty() {
            "the top level"
        } else {
            path
        };
        message.push_str(&format!("\n- at {at}: {problem}"));
    }
    if more > 0 {
        message.push_str(&format!(
            "\n- and {more} more problems not listed here, many of them likely like those above."
        ));
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

/// Where a `null` member can be read as "absent": for each schema location the validator can
/// reach, which optional members do not accept `null` themselves. Decided by reading the
/// keywords that apply to `null` (see [`NullAnswers`]), with each `$ref` resolved once, so the
/// plan costs work linear in the schema; it is made once per validator, the first time a
/// document needs it, never per member of a document.
#[derive(Debug, Default)]
struct NullPlan {
    /// Node 0 is the root; empty when no object or array schema has anything to strip.
    nodes: Vec<PlanNode>,
}

#[derive(Debug, Default)]
struct PlanNode {
    members: std::collections::HashMap<String, PlanMember>,
    items: Option<usize>,
}

#[derive(Debug)]
struct PlanMember {
    /// Optional, and its schema refuses `null`.
    drop_null: bool,
    /// The plan of the member's own schema, if it has members or items.
    next: Option<usize>,
}

/// Deepest schema nesting the plan follows, like serde_json's parser for documents.
const MAX_PLAN_DEPTH: usize = 128;

impl NullPlan {
    fn build(root: &Value) -> NullPlan {
        let mut plan = NullPlan::default();
        let mut refs = std::collections::HashMap::new();
        let mut nulls = NullAnswers::default();
        plan.node(root, root, &mut refs, &mut nulls, 0);
        plan
    }

    /// The plan node of `schema`, following local `$ref`s (each definition planned once, so
    /// recursive types terminate).
    fn node<'s>(
        &mut self,
        schema: &'s Value,
        root: &'s Value,
        refs: &mut std::collections::HashMap<&'s str, Option<usize>>,
        nulls: &mut NullAnswers<'s>,
        depth: usize,
    ) -> Option<usize> {
        if depth > MAX_PLAN_DEPTH {
            return None;
        }
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            if let Some(known) = refs.get(reference) {
                return *known;
            }
            let target = resolve_local(reference, root)?;
            // Reserved before descending, so a recursive reference finds it.
            let id = self.nodes.len();
            self.nodes.push(PlanNode::default());
            refs.insert(reference, Some(id));
            self.fill(id, target, root, refs, nulls, depth);
            return Some(id);
        }
        if schema.get("properties").is_none() && schema.get("items").is_none() {
            return None;
        }
        let id = self.nodes.len();
        self.nodes.push(PlanNode::default());
        self.fill(id, schema, root, refs, nulls, depth);
        Some(id)
    }

    fn fill<'s>(
        &mut self,
        id: usize,
        schema: &'s Value,
        root: &'s Value,
        refs: &mut std::collections::HashMap<&'s str, Option<usize>>,
        nulls: &mut NullAnswers<'s>,
        depth: usize,
    ) {
        if depth == 0 {
            refs.insert("#", Some(id));
        }
        let mut node = PlanNode::default();
        if let Some(Value::Object(properties)) = schema.get("properties") {
            let required: std::collections::HashSet<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|names| names.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for (name, property) in properties {
                let drop_null = !required.contains(name.as_str())
                    && nulls.accepts(property, root, 0) == Some(false);
                let next = self.node(property, root, refs, nulls, depth + 1);
                if drop_null || next.is_some() {
                    node.members
                        .insert(name.clone(), PlanMember { drop_null, next });
                }
            }
        }
        if let Some(items) = schema.get("items") {
            node.items = self.node(items, root, refs, nulls, depth + 1);
        }
        if let Some(slot) = self.nodes.get_mut(id) {
            *slot = node;
        }
    }

    /// Removes the `null` members the plan marks as droppable; returns whether anything was
    /// removed.
    fn strip(&self, value: &mut Value, id: usize, depth: usize) -> bool {
        let Some(node) = self.nodes.get(id) else {
            return false;
        };
        if depth > MAX_PLAN_DEPTH {
            return false;
        }
        let mut removed = false;
        match value {
            Value::Object(members) => {
                members.retain(|name, member| {
                    let drop = member.is_null()
                        && node.members.get(name).is_some_and(|plan| plan.drop_null);
                    removed |= drop;
                    !drop
                });
                for (name, member) in members.iter_mut() {
                    if let Some(next) = node.members.get(name).and_then(|plan| plan.next) {
                        removed |= self.strip(member, next, depth + 1);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(next) = node.items {
                    for item in items {
                        removed |= self.strip(item, next, depth + 1);
                    }
                }
            }
            _ => {}
        }
        removed
    }
}

/// The schema a local `$ref` (`#` or `#/$defs/<name>`) points to.
fn resolve_local<'s>(reference: &str, root: &'s Value) -> Option<&'s Value> {
    match reference {
        "#" => Some(root),
        _ => reference
            .strip_prefix("#/$defs/")
            .and_then(|name| root.get("$defs").and_then(|defs| defs.get(name))),
    }
}

/// Whether schemas accept `null`, decided from the keywords that apply to `null` and nothing
/// else: `type`, `enum`, `const`, `$ref`, `allOf`, `anyOf`, `oneOf`, `not` and
/// `if`/`then`/`else` (every other keyword constrains only strings, numbers, arrays or
/// objects). `None` where that is not certain (a reference it cannot resolve, a cycle, a
/// keyword like `$dynamicRef`): such a member is never dropped, and the document is refused as
/// the model sent it. Each definition is decided once.
#[derive(Default)]
struct NullAnswers<'s> {
    /// The answers for `$ref`s; `None` inside while one is being decided, so that a cycle
    /// answers "not certain".
    refs: std::collections::HashMap<&'s str, Option<bool>>,
}

impl<'s> NullAnswers<'s> {
    fn accepts(&mut self, schema: &'s Value, root: &'s Value, depth: usize) -> Option<bool> {
        if depth > MAX_PLAN_DEPTH {
            return None;
        }
        let node = match schema {
            Value::Bool(accepts) => return Some(*accepts),
            Value::Object(node) => node,
            _ => return None,
        };
        // Every keyword must accept `null`: false as soon as one refuses it.
        let mut answer = Some(true);
        let mut and = |part: Option<bool>| {
            answer = match (answer, part) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            };
        };
        for (keyword, value) in node {
            match keyword.as_str() {
                "type" => and(match value {
                    Value::String(name) => Some(name == "null"),
                    Value::Array(names) => Some(names.iter().any(|name| name == "null")),
                    _ => None,
                }),
                "enum" => and(value.as_array().map(|values| values.contains(&Value::Null))),
                "const" => and(Some(value.is_null())),
                "$ref" => {
                    let part = match value.as_str() {
                        Some(reference) => self.reference(reference, root, depth),
                        None => None,
                    };
                    and(part);
                }
                "allOf" => {
                    let mut all = Some(true);
                    for branch in value.as_array().into_iter().flatten() {
                        all = match (all, self.accepts(branch, root, depth + 1)) {
                            (Some(false), _) | (_, Some(false)) => Some(false),
                            (Some(true), Some(true)) => Some(true),
                            _ => None,
                        };
                    }
                    and(value.as_array().and(all));
                }
                "anyOf" | "oneOf" => {
                    let Some(branches) = value.as_array() else {
                        and(None);
                        continue;
                    };
                    let (mut yes, mut unsure) = (0usize, 0usize);
                    for branch in branches {
                        match self.accepts(branch, root, depth + 1) {
                            Some(true) => yes += 1,
                            Some(false) => {}
                            None => unsure += 1,
                        }
                    }
                    and(if keyword == "anyOf" {
                        match (yes, unsure) {
                            (0, 0) => Some(false),
                            (0, _) => None,
                            _ => Some(true),
                        }
                    } else {
                        // Exactly one branch.
                        match (yes, unsure) {
                            (2.., _) => Some(false),
                            (1, 0) => Some(true),
                            (0, 0) => Some(false),
                            _ => None,
                        }
                    });
                }
                "not" => {
                    let part = self.accepts(value, root, depth + 1).map(|accepts| !accepts);
                    and(part);
                }
                "if" => {
                    let branch = match self.accepts(value, root, depth + 1) {
                        Some(true) => node.get("then"),
                        Some(false) => node.get("else"),
                        None => {
                            and(None);
                            continue;
                        }
                    };
                    let part = match branch {
                        Some(branch) => self.accepts(branch, root, depth + 1),
                        None => Some(true),
                    };
                    and(part);
                }
                "$dynamicRef" | "$recursiveRef" => and(None),
                _ => {}
            }
        }
        answer
    }

    fn reference(&mut self, reference: &'s str, root: &'s Value, depth: usize) -> Option<bool> {
        if let Some(known) = self.refs.get(reference) {
            return *known;
        }
        let target = resolve_local(reference, root)?;
        self.refs.insert(reference, None);
        let answer = self.accepts(target, root, depth + 1);
        self.refs.insert(reference, answer);
        answer
    }
}
