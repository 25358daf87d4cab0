//! The local search over a catalog's tools: BM25 (on the `bm25` crate, with
//! its English stemmer and stop words) over what a model would search by.
//!
//! A tool's document is its name and namespace (each twice: a word in the
//! name says more than one in a long description), its description, its
//! usage, and its parameters' names and descriptions. Names are split
//! before they are tokenized (`create_issue`, `createIssue` and
//! `tools::github` become words), which the crate's tokenizer does not do.
//!
//! Ranking is deterministic: the crate collects matches through a hash set,
//! so equal scores come back in any order; hits are sorted again by score
//! and then by the tool's place in the catalog.

use std::cmp::Ordering;

use bm25::{Language, SearchEngine, SearchEngineBuilder};
use serde_json::Value;

use crate::catalog::{Catalog, ToolEntry};

/// A BM25 index of a catalog's tools. Built once per agent (a few
/// milliseconds for hundreds of tools; see BENCHMARKS.md), read by every
/// search.
pub struct ToolIndex {
    engine: SearchEngine<u32>,
    tools: Vec<Indexed>,
}

struct Indexed {
    name: String,
    namespace: Option<String>,
    description: String,
}

/// One tool a search found.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// Its namespace ([`ToolEntry::namespace`]).
    pub namespace: Option<&'a str>,
    /// The first line of its description.
    pub summary: &'a str,
    /// Its BM25 score: higher is closer.
    pub score: f32,
}

impl std::fmt::Debug for ToolIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolIndex")
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

impl ToolIndex {
    /// An index of every tool of `catalog`.
    pub fn new(catalog: &Catalog) -> ToolIndex {
        ToolIndex::of(catalog.entries())
    }

    /// An index of `entries`, in their order (which breaks ties).
    pub(crate) fn of<'a>(entries: impl Iterator<Item = &'a ToolEntry>) -> ToolIndex {
        let mut tools = Vec::new();
        let mut documents = Vec::new();
        for (id, entry) in (0u32..).zip(entries) {
            let definition = entry.definition();
            let namespace = entry.namespace().map(|namespace| namespace.into_owned());
            let mut text = String::new();
            for _ in 0..2 {
                push_words(&mut text, definition.name());
                if let Some(namespace) = &namespace {
                    push_words(&mut text, namespace);
                }
            }
            if let Some(title) = definition.title() {
                push_words(&mut text, title);
            }
            push_words(&mut text, definition.description());
            push_words(&mut text, definition.usage());
            parameter_words(definition.parameters(), &mut text, 0);
            documents.push(bm25::Document::new(id, text));
            tools.push(Indexed {
                name: definition.name().to_owned(),
                namespace,
                description: definition.description().to_owned(),
            });
        }
        let engine =
            SearchEngineBuilder::<u32>::with_documents(Language::English, documents).build();
        ToolIndex { engine, tools }
    }

    /// How many tools it holds.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tools closest to `query`, best first, at most `limit`; only
    /// those of `namespace` (or of a namespace under it: `tools` holds
    /// `tools::github`) when one is given. A query of no known word finds
    /// nothing.
    pub fn search(&self, query: &str, namespace: Option<&str>, limit: usize) -> Vec<SearchHit<'_>> {
        let mut words = String::new();
        push_words(&mut words, query);
        let mut hits: Vec<(u32, f32)> = self
            .engine
            .search(&words, None)
            .into_iter()
            .map(|result| (result.document.id, result.score))
            .filter(|(id, score)| {
                *score > 0.0
                    && namespace.is_none_or(|wanted| {
                        self.tool(*id)
                            .and_then(|tool| tool.namespace.as_deref())
                            .is_some_and(|held| within(held, wanted))
                    })
            })
            .collect();
        hits.sort_by(|(a_id, a), (b_id, b)| {
            b.partial_cmp(a)
                .unwrap_or(Ordering::Equal)
                .then(a_id.cmp(b_id))
        });
        hits.into_iter()
            .take(limit)
            .filter_map(|(id, score)| {
                let tool = self.tool(id)?;
                Some(SearchHit {
                    name: &tool.name,
                    namespace: tool.namespace.as_deref(),
                    summary: tool.description.lines().next().unwrap_or(""),
                    score,
                })
            })
            .collect()
    }

    /// Every namespace with how many tools it has, in name order.
    pub fn namespaces(&self) -> Vec<(&str, usize)> {
        let mut counted: Vec<(&str, usize)> = Vec::new();
        let mut names: Vec<&str> = self
            .tools
            .iter()
            .filter_map(|tool| tool.namespace.as_deref())
            .collect();
        names.sort_unstable();
        for name in names {
            match counted.last_mut() {
                Some((last, count)) if *last == name => *count += 1,
                _ => counted.push((name, 1)),
            }
        }
        counted
    }

    fn tool(&self, id: u32) -> Option<&Indexed> {
        self.tools.get(usize::try_from(id).ok()?)
    }
}

/// Whether the namespace `held` is `wanted` or lies under it.
fn within(held: &str, wanted: &str) -> bool {
    let wanted = wanted.trim().trim_end_matches("::");
    held == wanted
        || held
            .strip_prefix(wanted)
            .is_some_and(|rest| rest.starts_with("::"))
}

/// Appends `text` to `out` as words: identifiers split at `_`, `-`, `.`,
/// `:`, `/` and lower-to-upper case changes (`createIssue` → `create
/// Issue`), so that a name's words match the same words in a query.
fn push_words(out: &mut String, text: &str) {
    out.push(' ');
    let mut previous: Option<char> = None;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && previous.is_some_and(|p| p.is_lowercase() || p.is_numeric()) {
                out.push(' ');
            }
            out.push(c);
        } else if c.is_whitespace() || matches!(c, '_' | '-' | '.' | ':' | '/' | '\\') {
            out.push(' ');
        } else {
            // Punctuation the tokenizer handles itself.
            out.push(c);
        }
        previous = Some(c);
    }
}

/// The names and descriptions of a schema's properties, nested ones too
/// (to a depth that real tools do not reach; a schema is data a remote
/// server may have written).
fn parameter_words(schema: &Value, out: &mut String, depth: usize) {
    if depth > 8 {
        return;
    }
    match schema {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = map.get("properties") {
                for (name, property) in properties {
                    push_words(out, name);
                    if let Some(Value::String(description)) = property.get("description") {
                        push_words(out, description);
                    }
                    parameter_words(property, out, depth + 1);
                }
            }
            for key in ["items", "anyOf", "oneOf", "allOf"] {
                if let Some(nested) = map.get(key) {
                    parameter_words(nested, out, depth + 1);
                }
            }
            for key in ["$defs", "definitions"] {
                if let Some(Value::Object(definitions)) = map.get(key) {
                    for definition in definitions.values() {
                        parameter_words(definition, out, depth + 1);
                    }
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                parameter_words(item, out, depth + 1);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_split_into_words() {
        let mut out = String::new();
        push_words(&mut out, "github_createIssue tools::crm/v2");
        assert_eq!(
            out.split_whitespace().collect::<Vec<_>>(),
            ["github", "create", "Issue", "tools", "crm", "v2"]
        );
    }

    #[test]
    fn a_namespace_holds_those_under_it() {
        assert!(within("tools::github", "tools"));
        assert!(within("tools::github", "tools::github"));
        assert!(within("tools::github", "tools::github::"));
        assert!(!within("tools::githubber", "tools::github"));
        assert!(!within("tools", "tools::github"));
    }
}
