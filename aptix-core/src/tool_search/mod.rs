//! Tool search: hundreds of tools without sending hundreds of definitions.
//!
//! With [`AgentBuilder::tool_search`](crate::agent::AgentBuilder::tool_search)
//! a request carries a few tools that are always offered, and a way to
//! search the rest; a tool a search finds is offered from then on, for the
//! rest of the conversation. Two ways to search:
//!
//! - **the provider's own** where the model has one
//!   ([`ChatModel::native_tool_search`](crate::model::ChatModel::native_tool_search):
//!   Anthropic): every other tool is sent with `defer_loading`, the
//!   provider runs the search, and the tools it found come back as
//!   `tool_reference`s in the turn's server blocks;
//! - **Aptix's own** for every other model: a tool called
//!   [`SEARCH_TOOL`] runs a BM25 search ([`ToolIndex`]) and answers with
//!   the tools found, which the next request offers.
//!
//! Either way what was found is read back from the transcript
//! ([`revealed`]), so it is part of the conversation: kept by a store,
//! restored with it after a restart, and the same on every replay. It only
//! grows, in the order found, so a request's tools are the previous
//! request's plus new ones at the end, and a provider's prompt cache of
//! what came before stays valid.

mod index;

pub use index::{SearchHit, ToolIndex};

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::catalog::{ToolEntry, ToolEntryBuilder};
use crate::error::ToolError;
use crate::model::NativeToolSearch;
use crate::transcript::Message;

/// The name of Aptix's own search tool.
pub const SEARCH_TOOL: &str = "tool_search";

/// How many tools one search reveals, unless set otherwise.
pub const DEFAULT_MAX_RESULTS: usize = 5;

/// How an agent offers a large catalog: which tools are always offered,
/// how many a search reveals, and whose search runs.
#[derive(Debug, Clone)]
#[must_use]
pub struct ToolSearch {
    pub(crate) always: Vec<String>,
    pub(crate) max_results: usize,
    pub(crate) native: Option<NativeToolSearch>,
}

impl Default for ToolSearch {
    fn default() -> Self {
        ToolSearch::new()
    }
}

impl ToolSearch {
    /// The provider's BM25 search where the model has one, Aptix's own
    /// otherwise; no tool always offered; five tools a search.
    pub fn new() -> ToolSearch {
        ToolSearch {
            always: Vec::new(),
            max_results: DEFAULT_MAX_RESULTS,
            native: Some(NativeToolSearch::Bm25),
        }
    }

    /// Aptix's own search, whatever the model: the same search, results
    /// and transcript with every provider.
    pub fn local() -> ToolSearch {
        ToolSearch {
            native: None,
            ..ToolSearch::new()
        }
    }

    /// Which of the provider's searches a model that has them gets
    /// (default [`NativeToolSearch::Bm25`]).
    pub fn native(mut self, search: NativeToolSearch) -> ToolSearch {
        self.native = Some(search);
        self
    }

    /// Tools offered in every request, never searched for: the few the
    /// model needs most. Each must be in the agent's catalog.
    pub fn always_offer<S: Into<String>>(
        mut self,
        names: impl IntoIterator<Item = S>,
    ) -> ToolSearch {
        self.always.extend(names.into_iter().map(Into::into));
        self
    }

    /// How many tools one search of Aptix's own reveals, at most (default
    /// [`DEFAULT_MAX_RESULTS`]; at least one).
    pub fn max_results(mut self, results: usize) -> ToolSearch {
        self.max_results = results.max(1);
        self
    }
}

/// The search tool's arguments.
#[derive(Deserialize)]
struct Query {
    query: String,
    #[serde(default)]
    namespace: Option<String>,
}

/// Aptix's search tool over `index`, made at run time like any other tool
/// (so hooks, events, stores and replays see its calls as they see every
/// call). Its result names the tools found; [`revealed`] reads them back.
pub(crate) fn search_entry(index: Arc<ToolIndex>, max_results: usize) -> ToolEntryBuilder {
    let namespaces: Vec<String> = index
        .namespaces()
        .iter()
        .map(|(name, count)| format!("`{name}` ({count})"))
        .collect();
    let mut description = format!(
        "Finds tools by what they do and loads them: {} tools are not loaded until a search finds them. Each search loads up to {max_results} tools, best match first; they can be called from the next turn on.",
        index.len()
    );
    if !namespaces.is_empty() {
        description.push_str(&format!(" Namespaces: {}.", namespaces.join(", ")));
    }
    let parameters = json!({
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "What the tool should do, in a few words, e.g. `create a calendar event`."
            },
            "namespace": {
                "type": "string",
                "description": "Only tools of this namespace (and those under it)."
            }
        },
        "required": ["query"],
        "additionalProperties": false
    });
    ToolEntry::from_json_schema(
        SEARCH_TOOL,
        "When no tool offered fits the task: search for one, then call what it found.",
        description,
        parameters,
        move |arguments: Value, _context| {
            let index = Arc::clone(&index);
            async move {
                let query: Query = serde_json::from_value(arguments)
                    .map_err(|error| ToolError::invalid_arguments(error.to_string()))?;
                let namespace = query.namespace.as_deref().filter(|n| !n.trim().is_empty());
                let hits = index.search(&query.query, namespace, max_results);
                let found: Vec<Value> = hits
                    .iter()
                    .map(|hit| json!({ "name": hit.name, "summary": hit.summary }))
                    .collect();
                let message = if found.is_empty() {
                    format!(
                        "No tool matches `{}`. Try other words{}.",
                        query.query,
                        if namespace.is_some() {
                            ", or no namespace"
                        } else {
                            ""
                        }
                    )
                } else {
                    "These tools are loaded: call them from your next turn on.".to_owned()
                };
                Ok(json!({ "found": found, "message": message }))
            }
        },
    )
    .annotations(crate::meta::Annotations {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    })
}

/// What a result of the search tool holds, as far as revealing goes.
#[derive(Deserialize)]
struct Searched {
    result: Found,
}

#[derive(Deserialize)]
struct Found {
    #[serde(default)]
    found: Vec<Named>,
}

#[derive(Deserialize)]
struct Named {
    name: String,
}

/// The tools searches in `messages` found, in the order first found, each
/// once: those named by successful results of [`SEARCH_TOOL`], and those
/// of the provider's searches (`tool_reference`s in a
/// `tool_search_tool_result` server block). The names are as the
/// transcript holds them; the agent offers only those of its catalog.
pub fn revealed(messages: &[Message]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut add = |name: &str| {
        if !names.iter().any(|held| held == name) {
            names.push(name.to_owned());
        }
    };
    for message in messages {
        match message {
            Message::Tool {
                name,
                content,
                is_error: false,
                ..
            } if name == SEARCH_TOOL => {
                if let Ok(searched) = serde_json::from_str::<Searched>(content) {
                    for found in &searched.result.found {
                        add(&found.name);
                    }
                }
            }
            Message::Assistant { server_blocks, .. } => {
                for block in server_blocks {
                    for name in tool_references(block) {
                        add(name);
                    }
                }
            }
            _ => {}
        }
    }
    names
}

/// The tool names a provider's tool search result block references.
fn tool_references(block: &Value) -> impl Iterator<Item = &str> {
    let references = (block.get("type").and_then(Value::as_str) == Some("tool_search_tool_result"))
        .then(|| block.get("content"))
        .flatten()
        .and_then(|content| content.get("tool_references"))
        .and_then(Value::as_array);
    references
        .into_iter()
        .flatten()
        .filter_map(|reference| reference.get("tool_name").and_then(Value::as_str))
}
