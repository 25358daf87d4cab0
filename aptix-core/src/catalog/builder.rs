//! [`CatalogBuilder`]: collects tools, checks them all, refuses duplicate
//! names, and binds activities to the tools they compute results for. The
//! binding is here, apart from the catalog, because a built catalog binds
//! more ([`Catalog::with_activities`]) the same way.

use std::any::TypeId;
use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::meta::{ExecutorKind, SourceLocation};
use crate::tool::Tool;

use super::activity::Activities;
use super::entry::{Failed, Pending, check_declaration};
use super::{Catalog, CatalogError, CatalogProblem, Inner, PendingEntry, ToolEntry};

/// Collects tools for [`Catalog::builder`].
#[must_use]
pub struct CatalogBuilder {
    pub(super) pending: Vec<Pending>,
    pub(super) activities: Activities,
}

impl fmt::Debug for CatalogBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CatalogBuilder")
            .field("tools", &self.pending.len())
            .field("activities", &self.activities)
            .finish()
    }
}

impl CatalogBuilder {
    /// Adds the tool `T`.
    pub fn tool<T: Tool>(mut self) -> Self {
        self.pending.push(Pending::Typed(ToolEntry::of::<T>));
        self
    }

    /// Adds an entry: one taken from another catalog, or a tool made at
    /// run time ([`ToolEntry::from_json_schema`]), checked by [`CatalogBuilder::build`].
    pub fn entry(mut self, entry: impl Into<PendingEntry>) -> Self {
        self.pending.push(entry.into().0);
        self
    }

    /// Adds several entries ([`CatalogBuilder::entry`] for each): another
    /// catalog's, or an MCP server's (`aptix::mcp::McpTools::entries`).
    pub fn entries<E: Into<PendingEntry>>(mut self, entries: impl IntoIterator<Item = E>) -> Self {
        self.pending
            .extend(entries.into_iter().map(|entry| entry.into().0));
        self
    }

    /// Binds activities to tools by name (see [`crate::activity`]): an
    /// activity computes the result of the tool of its name, whatever
    /// that tool would otherwise do (a latent tool's `_output` is then no
    /// longer asked for). Called again, the later set wins for a name both
    /// bind. Checked by [`CatalogBuilder::build`]: an activity for a name
    /// the catalog lacks, or for a tool whose final behaviour is not on
    /// this server, is a problem.
    pub fn activities(mut self, activities: Activities) -> Self {
        self.activities = std::mem::take(&mut self.activities).merge(activities);
        self
    }

    /// Checks every tool and builds the catalog, or reports every problem.
    pub fn build(self) -> Result<Catalog, CatalogError> {
        let mut made: Vec<Result<ToolEntry, Box<Failed>>> =
            self.pending.into_iter().map(Pending::made).collect();
        fn key(made: &Result<ToolEntry, Box<Failed>>) -> (&str, SourceLocation, Option<TypeId>) {
            match made {
                Ok(entry) => (entry.name(), entry.definition.source(), entry.origin),
                Err(failed) => (&failed.name, failed.source, failed.origin),
            }
        }
        made.sort_by(|a, b| {
            let (a, b) = (key(a), key(b));
            (a.0, a.1.file, a.1.line).cmp(&(b.0, b.1.file, b.1.line))
        });
        // The same tool added twice (`tool::<T>()` twice) is one tool.
        made.dedup_by(|a, b| {
            let (a, b) = (key(a), key(b));
            a.2.is_some() && a == b
        });

        let mut problems = Vec::new();
        let mut entries: Vec<ToolEntry> = Vec::with_capacity(made.len());
        let mut previous: Option<(Cow<'static, str>, SourceLocation)> = None;
        for candidate in made {
            let (_, source, _) = key(&candidate);
            let name = match &candidate {
                Ok(entry) => entry.definition.shared_name(),
                Err(failed) => failed.name.clone(),
            };
            if let Some((_, first)) = previous.as_ref().filter(|(first, _)| *first == name) {
                problems.push(CatalogProblem::DuplicateName {
                    name: name.into_owned(),
                    first: *first,
                    second: source,
                });
                continue;
            }
            previous = Some((name, source));
            match candidate {
                Ok(entry) => {
                    let before = problems.len();
                    check_declaration(&entry, &mut problems);
                    if problems.len() == before {
                        entries.push(entry);
                    }
                }
                Err(failed) => problems.push(CatalogProblem::Definition(failed.error)),
            }
        }
        if problems.is_empty() {
            bind_activities(&mut entries, &self.activities, &mut problems);
        }
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
}

/// Binds activities to entries, or reports why they cannot be bound; every
/// entry and every activity is looked at, so every problem is reported.
/// An entry takes the activity it names (`activity = "..."`), else the one
/// bound to its own name; an activity no entry takes is a problem.
pub(super) fn bind_activities(
    entries: &mut [ToolEntry],
    activities: &Activities,
    problems: &mut Vec<CatalogProblem>,
) {
    let mut taken: Vec<String> = Vec::new();
    for entry in entries.iter_mut() {
        let named = entry.definition.activity().map(str::to_owned);
        // `activity = ""` declares the tool latent whatever is bound.
        if named.as_deref() == Some("") {
            continue;
        }
        let key = named.clone().unwrap_or_else(|| entry.name().to_owned());
        let Some(bound) = activities.get(&key) else {
            // A named activity must be bound, unless one already was.
            if let Some(activity) = named
                && entry.activity.is_none()
            {
                problems.push(CatalogProblem::MissingActivity {
                    tool: entry.name().to_owned(),
                    activity,
                    location: entry.definition.source(),
                });
            }
            continue;
        };
        taken.push(key.clone());
        let executor = entry.definition.executor();
        if !matches!(executor, ExecutorKind::Server | ExecutorKind::Latent) {
            problems.push(CatalogProblem::ActivityNotOnServer {
                name: key,
                source_location: bound.source,
                executor: executor.as_str(),
            });
            continue;
        }
        if let Some((tool, activity_type)) = bound.tool
            && entry.origin != Some(tool)
        {
            problems.push(CatalogProblem::ActivityForAnotherTool {
                name: entry.name().to_owned(),
                source_location: bound.source,
                activity_type,
                tool_source: entry.definition.source(),
            });
            continue;
        }
        entry.code = Arc::clone(&bound.code);
        entry.activity = Some(Cow::Owned(key));
    }
    for (name, bound) in activities.bound() {
        if taken.iter().any(|taken| taken == name) {
            continue;
        }
        let shadowing = entries
            .iter()
            .find(|entry| entry.name() == name)
            .and_then(|entry| entry.definition.activity());
        problems.push(match shadowing {
            Some(named) => CatalogProblem::ActivityShadowed {
                name: name.to_owned(),
                source_location: bound.source,
                named: named.to_owned(),
            },
            None => CatalogProblem::UnknownActivity {
                name: name.to_owned(),
                source_location: bound.source,
                known: entries
                    .iter()
                    .map(|entry| entry.name().to_owned())
                    .collect(),
            },
        });
    }
}
