//! Secret-looking names: which argument and output fields a tool must
//! declare with `redact` or `log_fields` before it may be built.
//!
//! The macro applies the same name rule at compile time to the fields it
//! can see (the struct form); [`undeclared_secrets`] covers what it cannot
//! see (the arguments type of the function form, nested and output types)
//! when the catalog is built. The macro crate cannot depend on this one, so
//! it keeps its own copy of the rule; a test compiles that copy here and
//! checks that both give the same answers.

use serde_json::Value;

use crate::definition::ToolDefinition;
use crate::meta::{Redaction, SourceLocation, pointer_tokens as tokens};

/// A field whose name looks secret that the tool's redaction does not hide.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tool `{tool}` ({source_location}): {side} field `{pointer}` looks like a secret, and {}, so its value would be shown in agent events; {}",
    self.why(),
    self.fix()
)]
pub struct UndeclaredSecret {
    /// The tool's name.
    pub tool: String,
    /// `argument`, `output` or `partial` (the declared `partial = T` type).
    pub side: &'static str,
    /// Where the field is: a JSON pointer to it, or to the array it is in
    /// (a pointer names one element; hiding the array hides them all), or
    /// to where a recursive type refers to itself (its every level is
    /// under that pointer).
    pub pointer: String,
    /// Where the tool was declared.
    pub source_location: String,
    /// The tool's `redact` pointers (none: it declares neither `redact`
    /// nor `log_fields`), or its `log_fields` pointers with `shown` set.
    pub declared: Vec<String>,
    /// Whether `declared` are `log_fields` (and one of them shows the
    /// field through a parent) rather than `redact` pointers.
    pub shown: bool,
}

impl UndeclaredSecret {
    fn fix(&self) -> String {
        let pointer = &self.pointer;
        match (self.declared.is_empty(), self.shown) {
            (true, false) => format!(
                "add `redact = [\"{pointer}\"]` to #[agent_tool] to hide it, `log_fields = [...]` to list the only values that may be shown, or `redact = []` if nothing here is secret"
            ),
            (_, false) => format!(
                "add \"{pointer}\" to `redact` to hide it, or list the only values that may be shown with `log_fields = [...]` instead"
            ),
            (_, true) => format!(
                "list the fields beside `{pointer}` in `log_fields` instead of their parent"
            ),
        }
    }

    fn why(&self) -> String {
        match (self.declared.is_empty(), self.shown) {
            (true, false) => "the tool declares neither `redact` nor `log_fields`".to_owned(),
            (_, false) => format!(
                "the tool's `redact = {:?}` does not cover it",
                self.declared
            ),
            (_, true) => format!(
                "the tool's `log_fields = {:?}` shows it through a parent",
                self.declared
            ),
        }
    }
}

/// The argument and output fields of `definition` whose names look secret
/// (see [`looks_secret`]) and whose values its redaction would show:
/// every one when the tool declares neither `redact` nor `log_fields`;
/// under `redact = [...]`, those at or under none of its pointers
/// (`redact = []` declares that nothing is secret); under `log_fields =
/// [...]`, those shown only because a parent of theirs is listed. Nested
/// fields are included (through `$defs` and `$ref`), boolean fields are
/// not (a flag holds no secret).
///
/// The macro reports the top-level fields of a struct-form tool at compile
/// time; this covers what it cannot see: the arguments type of the
/// function form, nested types, and output types.
pub fn undeclared_secrets(definition: &ToolDefinition) -> Vec<UndeclaredSecret> {
    let redaction = definition.redaction();
    let (declared, shown): (&[&str], bool) = match redaction {
        // An explicit "nothing here is secret".
        Redaction::Deny([]) => return Vec::new(),
        Redaction::Undeclared => (&[], false),
        Redaction::Deny(pointers) => (pointers, false),
        Redaction::Allow(pointers) => (pointers, true),
    };
    let source: SourceLocation = definition.source();
    let mut found = Vec::new();
    let sides = [
        ("argument", Some(definition.parameters())),
        ("output", Some(definition.output_schema())),
        ("partial", definition.partial_schema()),
    ];
    for (side, schema) in sides {
        let Some(schema) = schema else { continue };
        for pointer in secret_fields(schema) {
            let hidden = match redaction {
                Redaction::Undeclared => false,
                Redaction::Deny(pointers) => covered(&pointer, pointers),
                // Shown only when listed itself, or under a listed secret.
                Redaction::Allow(pointers) => {
                    !covered(&pointer, pointers) || listed(&pointer, pointers)
                }
            };
            if hidden {
                continue;
            }
            let problem = UndeclaredSecret {
                tool: definition.name().to_owned(),
                side,
                pointer,
                source_location: source.to_string(),
                declared: declared.iter().map(|p| (*p).to_owned()).collect(),
                shown,
            };
            if !found.contains(&problem) {
                found.push(problem);
            }
        }
    }
    found
}

/// Whether `pointer` is at or under one of `pointers`.
fn covered(pointer: &str, pointers: &[&str]) -> bool {
    let pointer = tokens(pointer);
    pointers
        .iter()
        .any(|cover| pointer.starts_with(&tokens(cover)))
}

/// Whether `pointer` is itself one of `pointers`.
fn listed(pointer: &str, pointers: &[&str]) -> bool {
    let pointer = tokens(pointer);
    pointers.iter().any(|listed| tokens(listed) == pointer)
}

/// Whether any field of `schema` looks secret (the rule of
/// [`undeclared_secrets`], whatever the tool declares): another MCP
/// server's tool, whose fields nobody here can declare, then shows no values.
#[cfg(feature = "mcp-client")]
pub(crate) fn has_secret_field(schema: &Value) -> bool {
    !secret_fields(schema).is_empty()
}

/// Most secret-looking places one schema is searched for: past it the
/// whole value (`""`) is reported, which hiding hides everything.
const MAX_FOUND: usize = 256;

/// Most `$ref`s followed one inside another; deeper, the whole value is
/// reported, as past [`MAX_FOUND`].
const MAX_REF_DEPTH: usize = 64;

/// The pointers of `schema`'s secret-looking fields (see
/// [`Walk`]): linear in the schema, whatever its `$ref`s.
fn secret_fields(schema: &Value) -> Vec<String> {
    let mut walk = Walk {
        root: schema,
        memo: std::collections::HashMap::new(),
        in_progress: Vec::new(),
        overflow: false,
    };
    let mut found = Vec::new();
    walk.node(schema, &mut String::new(), false, 0, &mut found);
    if walk.overflow {
        return vec![String::new()];
    }
    // A reference back into a type being walked is reported where it
    // stands when that type holds a secret: every level of it is there.
    let mut pointers: Vec<String> = Vec::new();
    for finding in found {
        let pointer = match finding {
            Found::Field(pointer) => pointer,
            Found::Cycle(pointer, target) if walk.holds_secret(&target) => pointer,
            Found::Cycle(..) => continue,
        };
        if !pointers.contains(&pointer) {
            pointers.push(pointer);
        }
    }
    pointers
}

/// A place a secret-looking value is found, relative to where the walk of
/// a schema started.
#[derive(Debug, Clone)]
enum Found {
    /// A secret-looking field, or the array it is in.
    Field(String),
    /// A reference back into the definition named, which was being walked
    /// (a recursive type): secret when that definition holds a secret.
    Cycle(String, String),
}

impl Found {
    fn under(&self, prefix: &str) -> Found {
        match self {
            Found::Field(pointer) => Found::Field(format!("{prefix}{pointer}")),
            Found::Cycle(pointer, target) => {
                Found::Cycle(format!("{prefix}{pointer}"), target.clone())
            }
        }
    }
}

/// One search of a schema for secret-looking fields. Each `$defs` entry is
/// walked once, and what it holds (relative to it) is remembered and
/// placed under every `$ref` to it, so a schema whose references fan out
/// costs what its text does, not what its paths do.
struct Walk<'a> {
    root: &'a Value,
    /// What each definition holds, by name and by whether it is met inside
    /// an array (where a find is reported as the array).
    memo: std::collections::HashMap<String, Vec<Found>>,
    /// The definitions being walked, innermost last.
    in_progress: Vec<String>,
    /// Too much found, or references too deep: report the whole value.
    overflow: bool,
}

impl Walk<'_> {
    /// Walks `schema` at `path`; `in_array` when an enclosing array is
    /// reported instead of what is found inside it (the caller does).
    fn node(
        &mut self,
        schema: &Value,
        path: &mut String,
        in_array: bool,
        depth: usize,
        found: &mut Vec<Found>,
    ) {
        if self.overflow {
            return;
        }
        if found.len() > MAX_FOUND || depth > MAX_REF_DEPTH {
            self.overflow = true;
            return;
        }
        let Value::Object(schema) = schema else {
            return;
        };
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            self.reference(reference, path, in_array, depth, found);
        }
        if let Some(Value::Object(properties)) = schema.get("properties") {
            for (name, property) in properties {
                let before = path.len();
                path.push('/');
                if name.contains(['~', '/']) {
                    path.push_str(&name.replace('~', "~0").replace('/', "~1"));
                } else {
                    path.push_str(name);
                }
                if looks_secret(name) && !is_boolean(property, self.root) {
                    found.push(Found::Field(path.clone()));
                }
                self.node(property, path, in_array, depth, found);
                path.truncate(before);
            }
        }
        // Every keyword whose subschemas describe this same value.
        for key in ["anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(branches)) = schema.get(key) {
                for branch in branches {
                    self.node(branch, path, in_array, depth, found);
                }
            }
        }
        for key in ["if", "then", "else", "not"] {
            if let Some(branch) = schema.get(key) {
                self.node(branch, path, in_array, depth, found);
            }
        }
        for key in ["dependentSchemas", "dependencies"] {
            if let Some(Value::Object(branches)) = schema.get(key) {
                // `dependencies` may also list names: those are no schema.
                for branch in branches.values().filter(|branch| branch.is_object()) {
                    self.node(branch, path, in_array, depth, found);
                }
            }
        }
        // Members whose names are not listed: the value's own, one step down.
        for key in ["additionalProperties", "unevaluatedProperties"] {
            if let Some(inner) = schema.get(key) {
                self.element(inner, path, "/0", in_array, depth, found);
            }
        }
        if let Some(Value::Object(patterns)) = schema.get("patternProperties") {
            for (pattern, inner) in patterns {
                // The member's name is not known, only a pattern of it: a
                // pattern that reads as a secret name makes the whole
                // object secret.
                if looks_secret(pattern) && !is_boolean(inner, self.root) {
                    found.push(Found::Field(path.clone()));
                }
                self.element(inner, path, "/0", in_array, depth, found);
            }
        }
        // Elements of an array: reported as the array.
        for key in ["items", "contains", "unevaluatedItems"] {
            if let Some(inner) = schema.get(key) {
                self.element(inner, path, "/0", true, depth, found);
            }
        }
        if let Some(Value::Array(items)) = schema.get("prefixItems") {
            for (index, item) in items.iter().enumerate() {
                self.element(item, path, &format!("/{index}"), true, depth, found);
            }
        }
    }

    /// An element of an array (or a value of a map) at `path` + `step`:
    /// inside an array, whatever is found is reported as the array itself
    /// (hiding the array hides every element).
    fn element(
        &mut self,
        inner: &Value,
        path: &mut String,
        step: &str,
        array: bool,
        depth: usize,
        found: &mut Vec<Found>,
    ) {
        if !array {
            let before = path.len();
            path.push_str(step);
            self.node(inner, path, false, depth, found);
            path.truncate(before);
            return;
        }
        let mut inside = Vec::new();
        self.node(inner, &mut String::new(), true, depth, &mut inside);
        if inside
            .iter()
            .any(|finding| matches!(finding, Found::Field(_)))
        {
            found.push(Found::Field(path.clone()));
            return;
        }
        // Only references back into types being walked: the array is
        // secret if one of them is.
        let mut targets: Vec<String> = Vec::new();
        for finding in inside {
            if let Found::Cycle(_, target) = finding
                && !targets.contains(&target)
            {
                targets.push(target);
            }
        }
        found.extend(
            targets
                .into_iter()
                .map(|target| Found::Cycle(path.clone(), target)),
        );
    }

    /// A `$ref` at `path`: what its target holds, walked once.
    fn reference(
        &mut self,
        reference: &str,
        path: &str,
        in_array: bool,
        depth: usize,
        found: &mut Vec<Found>,
    ) {
        // Any local reference, by its JSON pointer: `#/$defs/..`,
        // draft-07's `#/definitions/..`, `#/properties/..`, `#` itself.
        let Some(pointer) = reference.strip_prefix('#') else {
            return;
        };
        let name = reference.to_owned();
        if self.in_progress.contains(&name) {
            found.push(Found::Cycle(path.to_owned(), name));
            return;
        }
        let inside = match self.memo.get(&name) {
            Some(inside) => inside.clone(),
            None => {
                let Some(target) = self.root.pointer(pointer) else {
                    return;
                };
                self.in_progress.push(name.clone());
                let mut inside = Vec::new();
                self.node(target, &mut String::new(), false, depth + 1, &mut inside);
                self.in_progress.pop();
                self.memo.insert(name.clone(), inside.clone());
                inside
            }
        };
        if in_array {
            // The caller reports the array: where inside it does not matter.
            found.extend(inside);
            if found.len() > MAX_FOUND {
                self.overflow = true;
            }
            return;
        }
        found.extend(inside.iter().map(|finding| finding.under(path)));
        if found.len() > MAX_FOUND {
            self.overflow = true;
        }
    }

    /// Whether the definition `name` holds a secret-looking field, itself
    /// or through the definitions it refers back to.
    fn holds_secret(&self, name: &str) -> bool {
        let mut seen = vec![name.to_owned()];
        let mut next = vec![name.to_owned()];
        while let Some(name) = next.pop() {
            for finding in self.memo.get(&name).into_iter().flatten() {
                match finding {
                    Found::Field(_) => return true,
                    Found::Cycle(_, target) if !seen.contains(target) => {
                        seen.push(target.clone());
                        next.push(target.clone());
                    }
                    Found::Cycle(..) => {}
                }
            }
        }
        false
    }
}

fn is_boolean(schema: &Value, root: &Value) -> bool {
    let schema = match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => match reference
            .strip_prefix('#')
            .and_then(|pointer| root.pointer(pointer))
        {
            Some(target) => target,
            None => return false,
        },
        None => schema,
    };
    match schema.get("type") {
        Some(Value::String(kind)) => kind == "boolean",
        Some(Value::Array(kinds)) => kinds.iter().all(|kind| kind == "boolean" || kind == "null"),
        _ => false,
    }
}

/// Words that name a secret wherever they appear in a field name.
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "pwd",
    "secret",
    "secrets",
    "apikey",
    "apikeys",
    "privatekey",
    "credential",
    "credentials",
    "authorization",
    "bearer",
    "otp",
    "cvv",
    "cvc",
];

/// Words before `key`/`keys` that make it a secret key (`api_key`,
/// `privateKey`); a bare `key` is usually a lookup key.
const KEY_QUALIFIERS: &[&str] = &[
    "api",
    "private",
    "access",
    "signing",
    "encryption",
    "master",
    "session",
    "ssh",
];

/// Words after `auth` that make it the credential (`auth_header`).
const AUTH_CREDENTIALS: &[&str] = &["header", "key", "code", "string", "value"];

/// Words after `token` that make it a measure or a kind, not a credential
/// (`token_count`, `token_type`).
const TOKEN_MEASURES: &[&str] = &[
    "count", "counts", "limit", "limits", "budget", "usage", "len", "length", "type", "kind", "id",
    "ids", "index", "estimate", "cost", "size", "total",
];

/// Words before `token` that make it a cursor or a count, not a
/// credential (`page_token`, `max_token`).
const TOKEN_NOT_CREDENTIAL: &[&str] = &[
    "page",
    "pagination",
    "continuation",
    "sync",
    "cancellation",
    "next",
    "max",
    "min",
    "num",
    "stop",
    "end",
    "start",
];

/// Words before a plural `tokens` that make them credentials
/// (`access_tokens`); a bare `tokens` counts model tokens.
const TOKENS_CREDENTIAL: &[&str] = &[
    "access", "refresh", "auth", "api", "bearer", "session", "id", "csrf", "oauth",
];

/// Whether a field called `name` looks like it holds a secret. The name is
/// split into words (snake_case, camelCase, kebab-case, SCREAMING_CASE);
/// it looks secret when a word is one of `password`, `passwd`,
/// `passphrase`, `passcode`, `pwd`, `secret(s)`, `apikey(s)`,
/// `privatekey`, `credential(s)`, `authorization`, `bearer`, `otp`, `cvv`,
/// `cvc`; or `key(s)` follows `api`, `private`, `access`, `signing`,
/// `encryption`, `master`, `session` or `ssh`; or `auth` ends the name or
/// precedes `header`, `key`, `code`, `string` or `value`; or `token` is a
/// whole word not followed by a measure (`count`, `limit`, `type`, `id`,
/// ...) nor preceded by `page`, `next`, `continuation`, `max`, ...; or
/// `tokens` follows `access`, `refresh`, `auth`, `api`, `id`, ... So
/// `access_token` and `apiKey` look secret; `max_tokens`, `token_count`,
/// `page_token` and `sort_key` do not.
///
/// The macro applies the same rule (`aptix-macros/src/secret.rs`); a test
/// keeps the two equal.
pub fn looks_secret(name: &str) -> bool {
    // Every rule needs a word containing one of these; an ASCII name whose
    // letters, in any case, contain none of them cannot match, and most
    // names are such. (Not for other names: lowercasing can turn a
    // non-ASCII letter into an ASCII one, the Kelvin sign into `k`.)
    may_look_secret(name) && by_words(name)
}

/// False only for names that [`by_words`] cannot find secret: an ASCII
/// name none of whose substrings is, in any case, a stem of
/// [`stems_starting_with`].
fn may_look_secret(name: &str) -> bool {
    if !name.is_ascii() {
        return true;
    }
    let bytes = name.as_bytes();
    (0..bytes.len()).any(|at| {
        let rest = bytes.get(at..).unwrap_or_default();
        let first = rest.first().map_or(0, u8::to_ascii_lowercase);
        stems_starting_with(first).iter().any(|stem| {
            rest.get(..stem.len())
                .is_some_and(|part| part.eq_ignore_ascii_case(stem.as_bytes()))
        })
    })
}

/// A part of every word a rule of [`looks_secret`] matches, by its first
/// letter: `pass` of `password`, `passwd`, `passphrase` and `passcode`,
/// `key` of `apikey`, `privatekey` and `key(s)`, `cred` of
/// `credential(s)`, `auth` of `authorization` and `auth`, `token` of
/// `token(s)`; the other words are stems of their own.
fn stems_starting_with(letter: u8) -> &'static [&'static str] {
    match letter {
        b'a' => &["auth"],
        b'b' => &["bearer"],
        b'c' => &["cred", "cvv", "cvc"],
        b'k' => &["key"],
        b'o' => &["otp"],
        b'p' => &["pass", "pwd"],
        b's' => &["secret"],
        b't' => &["token"],
        _ => &[],
    }
}

/// The rule of [`looks_secret`], word by word.
fn by_words(name: &str) -> bool {
    let words = words(name);
    let at = |index: Option<usize>| index.and_then(|i| words.get(i)).map(String::as_str);
    words.iter().enumerate().any(|(i, word)| {
        let before = at(i.checked_sub(1));
        let after = at(Some(i + 1));
        match word.as_str() {
            word if SECRET_WORDS.contains(&word) => true,
            "key" | "keys" => before.is_some_and(|b| KEY_QUALIFIERS.contains(&b)),
            "auth" => after.is_none_or(|a| AUTH_CREDENTIALS.contains(&a)),
            "token" => {
                !after.is_some_and(|a| TOKEN_MEASURES.contains(&a))
                    && !before.is_some_and(|b| TOKEN_NOT_CREDENTIAL.contains(&b))
            }
            "tokens" => before.is_some_and(|b| TOKENS_CREDENTIAL.contains(&b)),
            _ => false,
        }
    })
}

/// `x-apiKey_2` → `["x", "api", "key", "2"]`: words split at non-alphanumeric
/// characters, at lower-to-upper and letter-to-digit changes, and before the
/// last capital of an acronym (`APIKey` → `api`, `key`); lowercased.
fn words(name: &str) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let mut words = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        if let (false, Some(&prev)) = (
            current.is_empty(),
            i.checked_sub(1).and_then(|p| chars.get(p)),
        ) {
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let boundary = (c.is_uppercase() && (prev.is_lowercase() || prev.is_numeric()))
                || (c.is_uppercase() && prev.is_uppercase() && next_lower)
                || (c.is_numeric() != prev.is_numeric());
            if boundary {
                words.push(std::mem::take(&mut current));
            }
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// The macro's copy of the name rule, compiled here to compare.
#[cfg(test)]
#[path = "../../aptix-macros/src/secret.rs"]
#[allow(dead_code)]
mod macro_rule;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Review 2026-11-26, N2: `$defs` levels whose properties all refer to
    /// the next level name `fan_out^levels` paths in a few kilobytes; the
    /// walk that followed each path ran for ever. Each definition is walked
    /// once now, and what it holds is placed under each reference to it,
    /// up to a bound past which the whole value counts as secret.
    #[test]
    fn a_schema_whose_references_fan_out_is_walked_once_per_definition() {
        let bomb = |levels: usize, fan_out: usize, leaf: Value| {
            let mut defs = serde_json::Map::new();
            for level in 0..levels {
                let properties: serde_json::Map<String, Value> = (0..fan_out)
                    .map(|index| {
                        let target = if level + 1 < levels {
                            json!({ "$ref": format!("#/$defs/l{}", level + 1) })
                        } else {
                            leaf.clone()
                        };
                        (format!("p{index}"), target)
                    })
                    .collect();
                defs.insert(
                    format!("l{level}"),
                    json!({ "type": "object", "properties": properties }),
                );
            }
            json!({ "type": "object", "properties": { "root": { "$ref": "#/$defs/l0" } }, "$defs": defs })
        };
        // 40^8 paths, no secret: nothing found, at once.
        assert!(secret_fields(&bomb(8, 40, json!({ "type": "string" }))).is_empty());
        // 40^8 paths to a secret: more than can be listed, so the whole
        // value is reported.
        let secret_leaf =
            json!({ "type": "object", "properties": { "api_key": { "type": "string" } } });
        assert_eq!(secret_fields(&bomb(8, 40, secret_leaf.clone())), [""]);
        // A few paths are listed each.
        assert_eq!(
            secret_fields(&bomb(2, 2, secret_leaf)),
            [
                "/root/p0/p0/api_key",
                "/root/p0/p1/api_key",
                "/root/p1/p0/api_key",
                "/root/p1/p1/api_key"
            ]
        );
        // A chain of references deeper than can be followed is secret.
        let mut defs = serde_json::Map::new();
        for level in 0..200 {
            defs.insert(
                format!("l{level}"),
                json!({ "$ref": format!("#/$defs/l{}", level + 1) }),
            );
        }
        defs.insert("l200".into(), json!({ "type": "string" }));
        let chain = json!({ "type": "object", "properties": { "x": { "$ref": "#/$defs/l0" } }, "$defs": defs });
        assert_eq!(secret_fields(&chain), [""]);
    }

    #[test]
    fn a_recursive_type_is_secret_where_it_refers_to_itself() {
        // `Node { password, next: Option<Box<Node>> }`: every level's
        // password is under `/next`.
        let node = json!({
            "$ref": "#/$defs/Node",
            "$defs": { "Node": { "type": "object", "properties": {
                "password": { "type": "string" },
                "next": { "anyOf": [{ "$ref": "#/$defs/Node" }, { "type": "null" }] }
            } } }
        });
        assert_eq!(secret_fields(&node), ["/next", "/password"]);
        // `Tree { name, children: Vec<Tree> }`: nothing secret anywhere.
        let tree = json!({
            "$ref": "#/$defs/Tree",
            "$defs": { "Tree": { "type": "object", "properties": {
                "name": { "type": "string" },
                "children": { "type": "array", "items": { "$ref": "#/$defs/Tree" } }
            } } }
        });
        assert!(secret_fields(&tree).is_empty());
        // An array of secrets is reported as the array.
        let keys = json!({ "type": "object", "properties": { "keys": {
            "type": "array",
            "items": { "type": "object", "properties": { "api_key": { "type": "string" } } }
        } } });
        assert_eq!(secret_fields(&keys), ["/keys"]);
    }

    /// Every word a rule matches holds a stem of the filter, so a word added
    /// to a rule without a stem fails here, not silently in the filter.
    #[test]
    fn every_rule_word_holds_a_stem() {
        let rule_words = SECRET_WORDS
            .iter()
            .chain(&["key", "keys", "auth", "token", "tokens"]);
        for word in rule_words {
            assert!(may_look_secret(word), "{word} holds no stem of the filter");
        }
    }

    #[test]
    fn the_stem_filter_passes_every_secret_name() {
        // Names built from the rule's words and others, in every casing and
        // joined every way the word split knows.
        let parts = [
            "api",
            "API",
            "Api",
            "key",
            "KEY",
            "Key",
            "keys",
            "auth",
            "AUTH",
            "Auth",
            "token",
            "Token",
            "TOKENS",
            "password",
            "Passwd",
            "PASSPHRASE",
            "passcode",
            "pwd",
            "Secret",
            "secrets",
            "apikey",
            "ApiKeys",
            "PrivateKey",
            "credential",
            "Credentials",
            "Authorization",
            "bearer",
            "OTP",
            "cvv",
            "Cvc",
            "access",
            "private",
            "ssh",
            "header",
            "count",
            "page",
            "max",
            "refresh",
            "id",
            "2",
            "x",
            "name",
            "city",
            "user",
        ];
        let joins = ["", "_", "-", ".", " "];
        let mut secret = 0;
        for a in parts {
            for b in parts {
                for c in ["", "header", "Value", "count", "X"] {
                    for join in joins {
                        let name = [a, b, c].join(join);
                        if by_words(&name) {
                            secret += 1;
                            assert!(may_look_secret(&name), "{name}");
                        }
                    }
                }
            }
        }
        assert!(secret > 1000, "{secret}");
        assert!(!looks_secret("conversation_id"));
        assert!(
            looks_secret("api_\u{212A}ey"),
            "the Kelvin sign lowercases to `k`"
        );
    }

    #[test]
    fn the_name_rule_is_the_macros() {
        let names = [
            "password",
            "userPassword",
            "api_key",
            "APIKey",
            "x-api-key",
            "apikey",
            "token",
            "access_token",
            "max_tokens",
            "tokens",
            "token_count",
            "page_token",
            "nextPageToken",
            "key",
            "sort_key",
            "private_key",
            "auth",
            "auth_method",
            "author",
            "secret",
            "client_secret",
            "credentials",
            "otp",
            "city",
            "tokenizer",
            "OAuth2Token",
            "refresh_tokens",
            "passage",
            "bearer",
            "ssh_key",
            "auth_header",
        ];
        for name in names {
            assert_eq!(
                looks_secret(name),
                macro_rule::looks_secret(name),
                "the two rules disagree on {name}"
            );
        }
        assert!(looks_secret("access_token") && !looks_secret("max_tokens"));
    }
}
