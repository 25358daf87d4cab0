//! The catalog: which tools a model may call, in a fixed order.
//!
//! A catalog holds [`ToolEntry`]s: a definition plus the tool's server
//! code, shared. `#[agent_tool]` is one producer of entries, named one by
//! one ([`CatalogBuilder::tool`], or [`tools!`](crate::tools) for a list),
//! or all at once: every declared tool is also linked into
//! [`Catalog::linked`], for a binary whose model may call everything it
//! holds (an MCP server of a tool crate, a CLI). A tool made at run time is
//! another ([`ToolEntry::from_json_schema`]: a JSON Schema and an async
//! closure). Building checks every entry the same way and refuses
//! duplicate names, reporting all problems at once, so a broken tool stops
//! the process at start-up (or in CI through
//! `aptix_testkit::assert_catalog_valid`) rather than in front of a model.

// Documented and reached at the root (`aptix::activity`): one path.
#[doc(hidden)]
pub mod activity;
mod builder;
mod entry;
pub(crate) mod erased;
mod error;

pub use builder::CatalogBuilder;
pub use entry::{PendingEntry, ToolEntry, ToolEntryBuilder};
pub use error::{CatalogError, CatalogProblem};

use std::fmt;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::context::{MissingState, ToolContext};
use crate::definition::ToolDefinition;
use crate::schema::{Dialect, DialectError};
use activity::Activities;
use builder::bind_activities;

/// A catalog builder with the tools declared with `#[agent_tool]` that are
/// named, in any order: `aptix::tools![HelloWorldTool, GetWeatherTool].build()?`.
/// Adding more (`.tool::<T>()`, `.entry(...)`) goes on as with
/// [`Catalog::builder`].
#[macro_export]
macro_rules! tools {
    ($($tool:ty),* $(,)?) => {
        $crate::catalog::Catalog::builder()$(.tool::<$tool>())*
    };
}

/// A checked, sorted set of tools. Cheap to clone.
#[derive(Clone)]
pub struct Catalog {
    inner: Arc<Inner>,
}

struct Inner {
    entries: Vec<ToolEntry>,
    /// Hashed on first use: hashing every definition is most of what building
    /// a catalog costs, and many processes never ask.
    fingerprint: OnceLock<String>,
}

impl fmt::Debug for Catalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Catalog")
            .field("tools", &self.names().collect::<Vec<_>>())
            .field("fingerprint", &self.fingerprint())
            .finish()
    }
}

impl Catalog {
    /// A catalog of the tools and entries added to the builder.
    pub fn builder() -> CatalogBuilder {
        CatalogBuilder {
            pending: Vec::new(),
            activities: Activities::new(),
        }
    }

    /// A builder holding every tool `#[agent_tool]` declared in the crates
    /// linked into this binary (a generic struct excepted), for an agent or
    /// server that offers all of them; add entries, activities or more tools
    /// before `build()`. `tools![...]` and [`Catalog::builder`] stay the way
    /// to offer a subset.
    ///
    /// A tool is linked only if its crate is: a dependency whose items the
    /// binary never names may be left out by the linker, with its tools.
    /// Name one of its items (`use other_crate as _;` is not enough; call a
    /// function or name a type), and check `len()` of the built catalog,
    /// which a debug event also reports.
    pub fn linked() -> CatalogBuilder {
        let builder = crate::__private::LINKED_TOOLS
            .iter()
            .fold(Catalog::builder(), |builder, add| add(builder));
        tracing::debug!(
            tools = builder.pending.len(),
            "tools linked into the binary"
        );
        builder
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.inner.entries.len()
    }

    /// Whether the catalog has no tools.
    pub fn is_empty(&self) -> bool {
        self.inner.entries.is_empty()
    }

    /// The tool names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.inner.entries.iter().map(ToolEntry::name)
    }

    /// The definitions, sorted by name.
    pub fn definitions(&self) -> impl Iterator<Item = &ToolDefinition> + '_ {
        self.inner.entries.iter().map(ToolEntry::definition)
    }

    /// Every state type a tool declares (`state = [Db]`,
    /// [`ToolEntryBuilder::takes_state`]) that `context` does not hold, by
    /// tool name: all of them at once, so that one start-up names every
    /// missing value. Empty when nothing is missing.
    /// [`AgentBuilder::build`](crate::agent::AgentBuilder::build) refuses
    /// a context for which it is not.
    pub fn missing_state<P>(&self, context: &ToolContext<P>) -> Vec<MissingState> {
        self.definitions()
            .flat_map(|definition| {
                definition
                    .state_types()
                    .iter()
                    .filter(|declared| !context.holds_state(declared.id()))
                    .map(|declared| MissingState {
                        tool: definition.name().to_owned(),
                        type_name: declared.name(),
                    })
            })
            .collect()
    }

    /// The entries, sorted by name: to build another catalog from some of
    /// them ([`CatalogBuilder::entry`]).
    pub fn entries(&self) -> impl Iterator<Item = &ToolEntry> + '_ {
        self.inner.entries.iter()
    }

    /// The definition of the tool called `name`.
    pub fn get(&self, name: &str) -> Option<&ToolDefinition> {
        self.entry(name).map(ToolEntry::definition)
    }

    /// The entry of the tool called `name`.
    pub fn entry(&self, name: &str) -> Option<&ToolEntry> {
        let entries = &self.inner.entries;
        entries
            .binary_search_by(|entry| entry.name().cmp(name))
            .ok()
            .map(|index| &entries[index])
    }

    /// A stable hash (SHA-256, hex) of every tool's
    /// [`ToolEntry::contract`], in name order: it changes if and only if a
    /// contract changes (what a model or client sees, the executor and
    /// approval, the redaction and time limits). Use it as a prompt-cache
    /// key and in telemetry.
    pub fn fingerprint(&self) -> &str {
        self.inner
            .fingerprint
            .get_or_init(|| fingerprint(&self.inner.entries))
    }

    /// Every tool as `dialect`'s provider is sent it, in name order: the
    /// description followed by the usage (as an agent's request carries
    /// it), a latent tool with the `_output` member it asks for.
    pub fn lower(&self, dialect: Dialect) -> Result<Vec<Value>, DialectError> {
        self.entries()
            .map(|entry| {
                let definition = entry.definition();
                crate::schema::dialect::provider_tool(
                    dialect,
                    definition.name(),
                    &definition.offered_description(),
                    &entry.offered_parameters(),
                )
            })
            .collect()
    }

    /// This catalog and `entry`, checked as [`CatalogBuilder::build`] checks
    /// every tool: a run-time tool added for one conversation, say. A tool
    /// of the same name is a [`CatalogProblem::DuplicateName`]; to replace
    /// one, take it out first with [`Catalog::without`].
    pub fn with(&self, entry: impl Into<PendingEntry>) -> Result<Catalog, CatalogError> {
        // The held entries were checked when they were built: only the new
        // one is, and then its name against theirs.
        let Some(entry) = Catalog::builder()
            .entry(entry)
            .build()?
            .entries()
            .next()
            .cloned()
        else {
            return Ok(self.clone());
        };
        let entries = &self.inner.entries;
        match entries.binary_search_by(|held| held.name().cmp(entry.name())) {
            // The same declared tool again is one tool, as in a builder.
            Ok(index) if entry.origin.is_some() && entries[index].origin == entry.origin => {
                Ok(self.clone())
            }
            Ok(index) => Err(CatalogError {
                problems: vec![CatalogProblem::DuplicateName {
                    name: entry.name().to_owned(),
                    first: entries[index].definition.source(),
                    second: entry.definition.source(),
                }],
            }),
            Err(index) => {
                let mut entries = entries.clone();
                entries.insert(index, entry);
                Ok(Catalog {
                    inner: Arc::new(Inner {
                        entries,
                        fingerprint: OnceLock::new(),
                    }),
                })
            }
        }
    }

    /// This catalog without the tool called `name` (the same catalog when
    /// there is none). Every other tool keeps its code and definition.
    pub fn without(&self, name: &str) -> Catalog {
        if self.entry(name).is_none() {
            return self.clone();
        }
        self.derived(|entry| entry.name() != name)
    }

    /// The tools of this catalog called one of `names`, in name order: the
    /// tools offered to one step, say. A name the catalog does not hold is
    /// a [`CatalogProblem::UnknownTool`] (every one is reported), so a typo
    /// cannot silently leave a tool out.
    pub fn only<'n>(
        &self,
        names: impl IntoIterator<Item = &'n str>,
    ) -> Result<Catalog, CatalogError> {
        let mut wanted: Vec<&str> = names.into_iter().collect();
        wanted.sort_unstable();
        wanted.dedup();
        let unknown: Vec<&str> = wanted
            .iter()
            .copied()
            .filter(|name| self.entry(name).is_none())
            .collect();
        if !unknown.is_empty() {
            let known: Vec<String> = self.names().map(str::to_owned).collect();
            let problems = unknown
                .into_iter()
                .map(|name| CatalogProblem::UnknownTool {
                    name: name.to_owned(),
                    known: known.clone(),
                })
                .collect();
            return Err(CatalogError { problems });
        }
        if wanted.len() == self.len() {
            return Ok(self.clone());
        }
        Ok(self.derived(|entry| wanted.binary_search(&entry.name()).is_ok()))
    }

    /// This catalog with `activities` bound, as [`CatalogBuilder::activities`]
    /// binds them: a test's doubles over a production catalog, say. An
    /// activity already bound stays unless `activities` binds its name.
    pub fn with_activities(&self, activities: &Activities) -> Result<Catalog, CatalogError> {
        let mut entries = self.inner.entries.clone();
        let mut problems = Vec::new();
        bind_activities(&mut entries, activities, &mut problems);
        if !problems.is_empty() {
            return Err(CatalogError { problems });
        }
        Ok(Catalog {
            inner: Arc::new(Inner {
                entries,
                fingerprint: OnceLock::new(),
            }),
        })
    }

    /// The entries `keep` keeps, already checked and in order.
    fn derived(&self, keep: impl Fn(&ToolEntry) -> bool) -> Catalog {
        Catalog {
            inner: Arc::new(Inner {
                entries: self
                    .entries()
                    .filter(|entry| keep(entry))
                    .cloned()
                    .collect(),
                fingerprint: OnceLock::new(),
            }),
        }
    }

    /// A prompt section telling the model when to call each tool.
    pub fn usage_prompt(&self) -> String {
        let mut text = String::from("Tools and when to call them:");
        for definition in self.definitions() {
            text.push_str(&format!(
                "\n- {}: {}",
                definition.name(),
                definition.usage()
            ));
        }
        text
    }
}

fn fingerprint(entries: &[ToolEntry]) -> String {
    let canonical: Vec<Value> = entries.iter().map(ToolEntry::contract).collect();
    // serde_json's maps are sorted by key (no `preserve_order`), so this text
    // is the same for the same definitions in every process.
    let text = Value::Array(canonical).to_string();
    crate::digest::sha256_hex(text.as_bytes())
}
