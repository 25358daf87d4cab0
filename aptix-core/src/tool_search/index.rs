//! The local search over a catalog's tools: BM25 over what a model would
//! search by.
//!
//! A tool's document is its name and namespace (each twice: a word in the
//! name says more than one in a long description), its title, description,
//! usage, and its parameters' names and descriptions. Identifiers are split
//! into words (`create_issue`, `createIssue`, `tools::github`), words are
//! lower-cased, English stop words dropped, and the rest stemmed with the
//! Snowball English stemmer (`rust-stemmers`), so `invoices` finds
//! `invoice`.
//!
//! Ranking is written here rather than taken from the `bm25` crate, whose
//! matches come back through a hash set, so equal scores arrive in any
//! order. BM25 itself is a dozen lines (Robertson's formula with the usual
//! `k1 = 1.2`, `b = 0.75` and the `ln(1 + …)` idf that stays positive); ties
//! are broken by the tool's place in the catalog, so the same search always
//! gives the same answer.

use std::cmp::Ordering;
use std::collections::HashMap;

use rust_stemmers::{Algorithm, Stemmer};
use serde_json::Value;

use crate::catalog::{Catalog, ToolEntry};

/// Term-frequency saturation.
const K1: f32 = 1.2;
/// How much a long document's length discounts its matches.
const B: f32 = 0.75;

/// Words too common to tell tools apart.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "in", "into",
    "is", "it", "its", "me", "my", "of", "on", "or", "so", "that", "the", "their", "then", "this",
    "to", "was", "were", "when", "which", "will", "with", "you", "your",
];

/// A BM25 index of a catalog's tools. Built once per agent, read by every
/// search.
pub struct ToolIndex {
    tools: Vec<Indexed>,
    /// Term → the tools holding it, with how often (in tool order).
    postings: HashMap<String, Vec<(u32, u32)>>,
    /// Each tool's document length, in terms.
    lengths: Vec<u32>,
    /// The mean document length.
    average: f32,
    stemmer: Stemmer,
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
            .field("terms", &self.postings.len())
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
        let stemmer = Stemmer::create(Algorithm::English);
        let mut tools = Vec::new();
        let mut postings: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut lengths = Vec::new();
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
            let mut counts: HashMap<String, u32> = HashMap::new();
            let mut length = 0u32;
            for term in terms(&stemmer, &text) {
                *counts.entry(term).or_default() += 1;
                length += 1;
            }
            for (term, count) in counts {
                postings.entry(term).or_default().push((id, count));
            }
            lengths.push(length);
            tools.push(Indexed {
                name: definition.name().to_owned(),
                namespace,
                description: definition.description().to_owned(),
            });
        }
        let average = if lengths.is_empty() {
            1.0
        } else {
            lengths.iter().map(|&length| length as f32).sum::<f32>() / lengths.len() as f32
        };
        ToolIndex {
            tools,
            postings,
            lengths,
            average: average.max(1.0),
            stemmer,
        }
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
        let mut asked: Vec<String> = terms(&self.stemmer, &words).collect();
        asked.sort_unstable();
        asked.dedup();
        let total = self.tools.len() as f32;
        let mut scores = vec![0f32; self.tools.len()];
        for term in &asked {
            let Some(holders) = self.postings.get(term) else {
                continue;
            };
            let held = holders.len() as f32;
            let idf = (1.0 + (total - held + 0.5) / (held + 0.5)).ln();
            for &(id, count) in holders {
                let Some(score) = scores.get_mut(id as usize) else {
                    continue;
                };
                let length = self.lengths.get(id as usize).copied().unwrap_or(0) as f32;
                let count = count as f32;
                *score +=
                    idf * count * (K1 + 1.0) / (count + K1 * (1.0 - B + B * length / self.average));
            }
        }
        let mut hits: Vec<(usize, f32)> = scores
            .into_iter()
            .enumerate()
            .filter(|(id, score)| {
                *score > 0.0
                    && namespace.is_none_or(|wanted| {
                        self.tools[*id]
                            .namespace
                            .as_deref()
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
            .map(|(id, score)| {
                let tool = &self.tools[id];
                SearchHit {
                    name: &tool.name,
                    namespace: tool.namespace.as_deref(),
                    summary: tool.description.lines().next().unwrap_or(""),
                    score,
                }
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
}

/// The terms of `text` (already split by [`push_words`]): lower-cased,
/// stop words out, stemmed.
fn terms<'a>(stemmer: &'a Stemmer, text: &'a str) -> impl Iterator<Item = String> + 'a {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .filter(|word| !STOP_WORDS.contains(&word.as_str()))
        .map(|word| stemmer.stem(&word).into_owned())
}

/// Whether the namespace `held` is `wanted` or lies under it.
fn within(held: &str, wanted: &str) -> bool {
    let wanted = wanted.trim().trim_end_matches("::");
    held == wanted
        || held
            .strip_prefix(wanted)
            .is_some_and(|rest| rest.starts_with("::"))
}

/// Appends `text` to `out` as words: split at anything but letters and
/// digits (`_`, `-`, `::`, punctuation) and at lower-to-upper case changes
/// (`createIssue` → `create Issue`), so that a name's words match the same
/// words in a query.
fn push_words(out: &mut String, text: &str) {
    out.push(' ');
    let mut previous: Option<char> = None;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && previous.is_some_and(|p| p.is_lowercase() || p.is_numeric()) {
                out.push(' ');
            }
            out.push(c);
        } else {
            out.push(' ');
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
    fn terms_are_lower_cased_stemmed_and_without_stop_words() {
        let stemmer = Stemmer::create(Algorithm::English);
        let mut text = String::new();
        push_words(&mut text, "Lists the Invoices of a customer");
        let found: Vec<String> = terms(&stemmer, &text).collect();
        assert_eq!(found, ["list", "invoic", "custom"]);
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
