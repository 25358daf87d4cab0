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
use crate::meta::SourceLocation;

/// A field whose name looks secret in a tool that declares no redaction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tool `{tool}` ({source_location}): {side} field `{pointer}` looks like a secret, and the tool declares neither `redact` nor `log_fields`, so its value would be shown in agent events; add `redact = [\"{pointer}\"]` to #[agent_tool] to hide it, `log_fields = [...]` to list the only values that may be shown, or `redact = []` if nothing here is secret"
)]
pub struct UndeclaredSecret {
    /// The tool's name.
    pub tool: String,
    /// `argument`, `output` or `partial` (the declared `partial = T` type).
    pub side: &'static str,
    /// Where the field is: a JSON pointer to it, or to the array it is in
    /// (a pointer names one element; hiding the array hides them all).
    pub pointer: String,
    /// Where the tool was declared.
    pub source_location: String,
}

/// The argument and output fields of `definition` whose names look secret
/// (see [`looks_secret`]) when the tool declares neither `redact` nor
/// `log_fields`; empty otherwise. Nested fields are included (through
/// `$defs` and `$ref`), boolean fields are not (a flag holds no secret).
///
/// The macro reports the top-level fields of a struct-form tool at compile
/// time; this covers what it cannot see: the arguments type of the
/// function form, nested types, and output types.
pub fn undeclared_secrets(definition: &ToolDefinition) -> Vec<UndeclaredSecret> {
    if definition.redaction().is_declared() {
        return Vec::new();
    }
    let source: SourceLocation = definition.source();
    let mut found = Vec::new();
    let sides = [
        ("argument", Some(definition.parameters())),
        ("output", Some(definition.output_schema())),
        ("partial", definition.partial_schema()),
    ];
    for (side, schema) in sides {
        let Some(schema) = schema else { continue };
        let mut pointers = Vec::new();
        secret_fields(schema, schema, &mut String::new(), None, 0, &mut pointers);
        for pointer in pointers {
            let problem = UndeclaredSecret {
                tool: definition.name().to_owned(),
                side,
                pointer,
                source_location: source.to_string(),
            };
            if !found.contains(&problem) {
                found.push(problem);
            }
        }
    }
    found
}

/// Whether any field of `schema` looks secret (the rule of
/// [`undeclared_secrets`], whatever the tool declares): another MCP
/// server's tool, whose fields nobody here can declare, then shows no values.
#[cfg(feature = "mcp-client")]
pub(crate) fn has_secret_field(schema: &Value) -> bool {
    let mut found = Vec::new();
    secret_fields(schema, schema, &mut String::new(), None, 0, &mut found);
    !found.is_empty()
}

/// Walks `schema` (resolving local `$ref`s against `root`), pushing the
/// pointer of every secret-looking field; `array` is the pointer of the
/// innermost enclosing array, reported instead of an element's field.
fn secret_fields(
    schema: &Value,
    root: &Value,
    path: &mut String,
    array: Option<&str>,
    depth: usize,
    found: &mut Vec<String>,
) {
    // Recursive types refer back to themselves; their fields repeat.
    if depth > 16 {
        return;
    }
    let Value::Object(schema) = schema else {
        return;
    };
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let target = if reference == "#" {
            Some(root)
        } else {
            reference
                .strip_prefix("#/$defs/")
                .and_then(|name| root.get("$defs").and_then(|defs| defs.get(name)))
        };
        if let Some(target) = target {
            secret_fields(target, root, path, array, depth + 1, found);
        }
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
            if looks_secret(name) && !is_boolean(property, root) {
                found.push(array.map_or_else(|| path.clone(), str::to_owned));
            }
            secret_fields(property, root, path, array, depth + 1, found);
            path.truncate(before);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            for branch in branches {
                secret_fields(branch, root, path, array, depth + 1, found);
            }
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(inner) = schema.get(key) {
            let here = path.clone();
            let array = if key == "items" {
                Some(array.unwrap_or(here.as_str()))
            } else {
                array
            };
            let mut inner_path = format!("{here}/0");
            secret_fields(inner, root, &mut inner_path, array, depth + 1, found);
        }
    }
    if let Some(Value::Array(items)) = schema.get("prefixItems") {
        for (index, item) in items.iter().enumerate() {
            let mut inner_path = format!("{path}/{index}");
            secret_fields(item, root, &mut inner_path, array, depth + 1, found);
        }
    }
}

fn is_boolean(schema: &Value, root: &Value) -> bool {
    let schema = match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => match reference
            .strip_prefix("#/$defs/")
            .and_then(|name| root.get("$defs").and_then(|defs| defs.get(name)))
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
