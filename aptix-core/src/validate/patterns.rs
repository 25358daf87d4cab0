//! Bounds on the `pattern`s of a schema, which may come from another MCP server.
//!
//! Every pattern runs on the linear-time `regex` engine, in both layers: the fused validator
//! compiles its subset of ECMA-262 with the `regex` crate, and `jsonschema` is built with
//! [`jsonschema::PatternOptions::regex`], so a pattern only a backtracking engine runs
//! (lookaround, backreferences) is refused when the schema is compiled, instead of costing up
//! to a million backtracking steps per string of every document checked against it.
//!
//! A pattern compiles to at most [`MAX_PATTERN_BYTES`] of automaton (the `regex` crate's
//! `size_limit`; its own default is 10 MiB), and the distinct patterns of one schema to at
//! most [`MAX_SCHEMA_PATTERN_BYTES`] together. The `regex` crate does not say how large a
//! compiled pattern is, so each is compiled with the smallest of a few growing size limits it
//! fits in, and counted at that limit. Compiling takes time in proportion to the size reached,
//! so the trials cost a fraction more than the one compilation, and the compilations of one
//! schema take time and memory in proportion to its budget.

use std::collections::HashSet;

use serde_json::{Value, json};

/// Largest automaton one pattern may compile to, in bytes.
pub(crate) const MAX_PATTERN_BYTES: usize = 2 << 20;

/// Most the distinct patterns of one schema may compile to together, in bytes, each counted
/// at the smallest of the size limits tried that it fits in (4 KiB, 32 KiB, 256 KiB, 2 MiB).
pub(crate) const MAX_SCHEMA_PATTERN_BYTES: usize = 8 << 20;

/// The size limits a pattern is compiled with, smallest first.
const TIERS: [usize; 4] = [4 << 10, 32 << 10, 256 << 10, MAX_PATTERN_BYTES];

/// Deepest schema nesting [`check_patterns`] follows.
const MAX_DEPTH: usize = 128;

/// Longest quote of a refused pattern in a message, in characters.
const MAX_QUOTE: usize = 80;

/// Why a pattern cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PatternError {
    /// No size limit up to [`MAX_PATTERN_BYTES`] compiles it.
    #[error(
        "it is not a regular expression that the linear-time `regex` engine compiles within {} MiB (lookaround and backreferences are not supported)",
        MAX_PATTERN_BYTES >> 20
    )]
    Refused,
    /// The schema's patterns would compile to more than [`MAX_SCHEMA_PATTERN_BYTES`].
    #[error(
        "the schema's patterns would compile to more than {} MiB together",
        MAX_SCHEMA_PATTERN_BYTES >> 20
    )]
    OverBudget,
}

/// What the patterns of one schema may still compile to.
#[derive(Debug)]
pub(crate) struct PatternBudget {
    left: usize,
}

impl Default for PatternBudget {
    fn default() -> Self {
        PatternBudget {
            left: MAX_SCHEMA_PATTERN_BYTES,
        }
    }
}

impl PatternBudget {
    /// `build(size_limit)` with each size limit in turn, smallest first, until one compiles;
    /// that limit is charged. No limit larger than what is left is tried.
    pub(crate) fn compile<R, E>(
        &mut self,
        mut build: impl FnMut(usize) -> Result<R, E>,
    ) -> Result<R, PatternError> {
        for limit in TIERS {
            if limit > self.left {
                return Err(PatternError::OverBudget);
            }
            #[cfg(test)]
            super::compilations::add();
            if let Ok(built) = build(limit) {
                self.left -= limit;
                return Ok(built);
            }
        }
        Err(PatternError::Refused)
    }
}

/// `jsonschema`'s options for every validator Aptix builds: draft 2020-12, patterns on the
/// linear-time `regex` engine with [`MAX_PATTERN_BYTES`] per pattern.
fn options(size_limit: usize) -> jsonschema::ValidationOptions<'static> {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .with_pattern_options(jsonschema::PatternOptions::regex().size_limit(size_limit))
}

/// `jsonschema`'s validator of `schema` (draft 2020-12), once its patterns are known to fit
/// the bounds of this module; the error says which pattern does not, or what `jsonschema`
/// refused.
pub(crate) fn reference_validator(schema: &Value) -> Result<jsonschema::Validator, String> {
    check_patterns(schema)?;
    #[cfg(test)]
    super::compilations::add();
    options(MAX_PATTERN_BYTES)
        .build(schema)
        .map_err(|error| error.to_string())
}

/// Compiles each distinct pattern of `schema` as `jsonschema` does, within the bounds of
/// this module; the error names the first pattern that does not fit, and where it is.
pub(crate) fn check_patterns(schema: &Value) -> Result<(), String> {
    let mut budget = PatternBudget::default();
    let mut seen: HashSet<String> = HashSet::new();
    let mut refusal = None;
    let complete = walk(schema, "", 0, &mut |pattern, at| {
        if seen.contains(pattern) {
            return true;
        }
        let compiled = budget.compile(|limit| options(limit).build(&json!({ "pattern": pattern })));
        match compiled {
            Ok(_) => {
                seen.insert(pattern.to_owned());
                true
            }
            Err(error) => {
                refusal = Some(format!(
                    "the pattern `{}` at `{at}` cannot be used: {error}",
                    quoted(pattern)
                ));
                false
            }
        }
    });
    match refusal {
        Some(refusal) => Err(refusal),
        None if !complete => Err(format!(
            "the schema is nested more than {MAX_DEPTH} levels deep"
        )),
        None => Ok(()),
    }
}

fn quoted(pattern: &str) -> String {
    match pattern.char_indices().nth(MAX_QUOTE) {
        Some((cut, _)) => format!("{}…", &pattern[..cut]),
        None => pattern.to_owned(),
    }
}

/// Calls `visit(pattern, pointer)` for every pattern of `schema` (a `pattern` string, a key of
/// `patternProperties`) until it returns false; false when stopped early or nested too deep.
fn walk(
    schema: &Value,
    path: &str,
    depth: usize,
    visit: &mut impl FnMut(&str, &str) -> bool,
) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let Value::Object(node) = schema else {
        return true;
    };
    for (keyword, value) in node {
        let at = pointer_push(path, keyword);
        let more = match keyword.as_str() {
            "pattern" => match value {
                Value::String(pattern) => visit(pattern, &at),
                _ => true,
            },
            "patternProperties" => match value {
                Value::Object(schemas) => schemas.iter().all(|(pattern, sub)| {
                    let inner = pointer_push(&at, pattern);
                    visit(pattern, &inner) && walk(sub, &inner, depth + 1, visit)
                }),
                _ => true,
            },
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
            | "contentSchema"
            | "allOf"
            | "anyOf"
            | "oneOf"
            | "prefixItems" => match value {
                Value::Array(items) => items.iter().enumerate().all(|(i, item)| {
                    walk(item, &pointer_push(&at, &i.to_string()), depth + 1, visit)
                }),
                _ => walk(value, &at, depth + 1, visit),
            },
            "properties" | "$defs" | "definitions" | "dependentSchemas" | "dependencies" => {
                match value {
                    Value::Object(schemas) => schemas
                        .iter()
                        .all(|(name, sub)| walk(sub, &pointer_push(&at, name), depth + 1, visit)),
                    _ => true,
                }
            }
            _ => true,
        };
        if !more {
            return false;
        }
    }
    true
}

/// Appends one reference token to a JSON pointer (RFC 6901).
fn pointer_push(path: &str, token: &str) -> String {
    format!("{path}/{}", token.replace('~', "~0").replace('/', "~1"))
}
