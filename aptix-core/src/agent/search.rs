//! Tool search in the loop: which tools each request of an agent built
//! with [`AgentBuilder::tool_search`](super::AgentBuilder::tool_search)
//! offers, and which calls may run.
//!
//! Every tool is lowered once, when the agent is built. A request offers
//! the always-offered tools (and Aptix's search tool) in catalog order,
//! then the tools searches revealed, in the order they were revealed
//! ([`crate::tool_search::revealed`], read from the transcript). A call of
//! a tool not yet revealed is answered `unknown_tool` without running, as
//! for any tool a step did not offer.

use std::collections::HashMap;
use std::sync::Arc;

use super::builder::AgentError;
use super::step::Loaded;
use crate::catalog::Catalog;
use crate::model::{ChatModel, DeferredTools, NativeToolSearch, ToolSpec};
use crate::tool_search::{SEARCH_TOOL, ToolIndex, ToolSearch, revealed, search_entry};
use crate::transcript::Message;

/// An agent's tool search, ready for its runs.
pub(crate) struct Searching {
    /// The provider's search, when the model has one; else Aptix's.
    native: Option<NativeToolSearch>,
    /// The tools every request offers, in catalog order.
    always: Arc<[ToolSpec]>,
    /// Every other tool: what a search may reveal, by name.
    searchable: HashMap<String, ToolSpec>,
    /// With the provider's search: every searchable tool, in catalog
    /// order, sent deferred with every request.
    deferred: Option<DeferredTools>,
}

impl Searching {
    /// The catalog the agent runs (with Aptix's search tool when the model
    /// has no search of its own), and what each request will need.
    /// `lower` lowers that catalog's tools, in its order.
    pub(crate) fn new(
        search: ToolSearch,
        catalog: Catalog,
        model: &dyn ChatModel,
        lower: impl FnOnce(&Catalog) -> Result<Vec<ToolSpec>, AgentError>,
    ) -> Result<(Searching, Catalog, Vec<ToolSpec>), AgentError> {
        let unknown: Vec<&str> = search
            .always
            .iter()
            .map(String::as_str)
            .filter(|name| catalog.entry(name).is_none())
            .collect();
        if !unknown.is_empty() {
            return Err(AgentError::ToolSearch(format!(
                "`always_offer` names tools the catalog does not hold: {}",
                unknown.join(", ")
            )));
        }
        let native = search.native.filter(|_| model.native_tool_search());
        let catalog = match native {
            Some(_) => catalog,
            None => {
                if catalog.entry(SEARCH_TOOL).is_some() {
                    return Err(AgentError::ToolSearch(format!(
                        "the catalog already holds a tool called `{SEARCH_TOOL}`, the name of the search tool; rename it"
                    )));
                }
                let index = ToolIndex::of(
                    catalog
                        .entries()
                        .filter(|entry| !search.always.iter().any(|name| name == entry.name())),
                );
                catalog
                    .with(search_entry(Arc::new(index), search.max_results))
                    .map_err(|error| AgentError::ToolSearch(error.to_string()))?
            }
        };
        let specs = lower(&catalog)?;
        let mut always = Vec::new();
        let mut searchable = HashMap::with_capacity(specs.len());
        let mut deferred = Vec::new();
        for spec in &specs {
            if spec.name == SEARCH_TOOL && native.is_none() || search.always.contains(&spec.name) {
                always.push(spec.clone());
            } else {
                if native.is_some() {
                    deferred.push(spec.clone());
                }
                searchable.insert(spec.name.clone(), spec.clone());
            }
        }
        let searching = Searching {
            native,
            always: always.into(),
            searchable,
            deferred: native.map(|search| DeferredTools {
                search,
                tools: deferred.into(),
            }),
        };
        Ok((searching, catalog, specs))
    }

    /// The tools the next request offers after `messages`, and the
    /// catalog of those that may run.
    pub(crate) fn loaded(&self, messages: &[Message], catalog: &Catalog) -> Loaded {
        let found = self.found(messages);
        let specs: Arc<[ToolSpec]> = if self.native.is_some() {
            // The provider loads what it found itself: the request's tools
            // stay the same, and so does its cache.
            Arc::clone(&self.always)
        } else {
            self.always
                .iter()
                .cloned()
                .chain(found.iter().map(|spec| (*spec).clone()))
                .collect()
        };
        let names = self
            .always
            .iter()
            .chain(found.iter().copied())
            .map(|spec| spec.name.as_str());
        Loaded {
            specs,
            catalog: narrowed(catalog, names),
            deferred: self.deferred.clone(),
        }
    }

    /// `offered` and the tools the provider's search found in `turn`,
    /// which the model may call in that same turn. Aptix's own search
    /// reveals tools for the next turn only.
    pub(crate) fn widen(&self, offered: Catalog, turn: &Message, catalog: &Catalog) -> Catalog {
        if self.native.is_none() {
            return offered;
        }
        let found = self.found(std::slice::from_ref(turn));
        if found.is_empty() {
            return offered;
        }
        let names = offered
            .names()
            .chain(found.iter().map(|spec| spec.name.as_str()));
        narrowed(catalog, names)
    }

    /// The searchable tools `messages` revealed, in the order revealed.
    fn found(&self, messages: &[Message]) -> Vec<&ToolSpec> {
        revealed(messages)
            .iter()
            .filter_map(|name| self.searchable.get(name))
            .collect()
    }
}

/// The tools of `catalog` called one of `names`.
fn narrowed<'n>(catalog: &Catalog, names: impl Iterator<Item = &'n str>) -> Catalog {
    let names: Vec<&str> = names.filter(|name| catalog.entry(name).is_some()).collect();
    // Only names the catalog holds are asked for, so `only` cannot refuse.
    catalog
        .only(names.iter().copied())
        .unwrap_or_else(|_| catalog.clone())
}
