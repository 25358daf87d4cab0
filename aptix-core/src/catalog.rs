//! The catalog: which tools a model may call, in a fixed order.
//!
//! Tools declared with `#[agent_tool]` register themselves in a link-time
//! list ([`TOOLS`], a `linkme` distributed slice); [`Catalog::linked`] takes
//! all of them, [`Catalog::builder`] an explicit subset. Building checks
//! every definition and refuses duplicate names, reporting all problems at
//! once, so a broken tool stops the process at start-up (or in CI through
//! `aptix_testkit::assert_catalog_valid`) rather than in front of a model.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::context::ToolContext;
use crate::envelope::JsonText;
use crate::error::ToolError;
use crate::executor::RunFuture;
use crate::schema::{DefinitionError, Dialect, DialectError, ToolDefinition};
use crate::tool::{SourceLocation, Tool};
use crate::validate::Rejection;

/// A boxed, sendable future: what type-erased tools return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why an erased tool run did not produce a result.
#[derive(Debug)]
pub enum RunFailure {
    /// The arguments were refused before the tool ran.
    Rejected(Rejection),
    /// The tool ran and returned an error.
    Tool(ToolError),
}

/// A tool with its types erased, as the catalog and executor hold it.
/// Implemented by the adapters in [`crate::executor`]; users never implement it.
pub trait DynTool: Send + Sync + 'static {
    /// The tool's name.
    fn name(&self) -> &'static str;
    /// Where it was declared.
    fn source(&self) -> SourceLocation;
    /// Its definition, built on first use.
    fn definition(&self) -> Result<&'static ToolDefinition, &'static DefinitionError>;
    /// Validates `raw` and runs the server step: the function for the
    /// function form, validation alone for the struct form (the payload is
    /// then the validated arguments).
    fn run<'a>(&'a self, raw: &'a str, ctx: &'a ToolContext) -> RunFuture<'a>;
    /// Validates `raw` without running anything; the validated arguments are
    /// the payload shown to whoever approves the call.
    fn validate_only(&self, raw: &str) -> Result<JsonText, RunFailure>;
}

/// The link-time list of every tool declared with `#[agent_tool]`.
#[linkme::distributed_slice]
pub static TOOLS: [&'static dyn DynTool];

/// Links the tools of crates that the binary does not otherwise name.
///
/// A crate whose items are never used is not linked, and the tools it
/// declares silently vanish from [`Catalog::linked`]. Naming it here keeps it:
/// `aptix::link_tools!(billing_tools, calendar_tools);`
#[macro_export]
macro_rules! link_tools {
    ($($krate:ident),+ $(,)?) => { $( use $krate as _; )+ };
}

/// One problem found while building a catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogProblem {
    /// A tool's definition is unusable.
    #[error(transparent)]
    Definition(#[from] DefinitionError),
    /// Two different tools share a name; a model could not tell them apart.
    #[error(
        "two tools are named `{name}`: one declared at {first}, the other at {second}; tool names must be unique"
    )]
    DuplicateName {
        /// The shared name.
        name: &'static str,
        /// The first declaration.
        first: SourceLocation,
        /// The second declaration.
        second: SourceLocation,
    },
    /// A tool's name is not 1 to 64 of `A-Z a-z 0-9 _ -`, what every
    /// provider accepts. `#[agent_tool]` checks this at compile time; a tool
    /// written by hand is checked here.
    #[error(
        "tool name `{name}`, declared at {location}, is invalid: a name is 1 to 64 characters of A-Z, a-z, 0-9, `_` and `-`"
    )]
    InvalidName {
        /// The name.
        name: &'static str,
        /// Where the tool was declared.
        location: SourceLocation,
    },
    /// A tool's description or usage is empty: the model would not know
    /// what the tool does or when to call it.
    #[error("tool `{tool}`, declared at {location}, has an empty {field}")]
    MissingText {
        /// The tool's name.
        tool: &'static str,
        /// `description` or `usage`.
        field: &'static str,
        /// Where the tool was declared.
        location: SourceLocation,
    },
    /// A field looks secret and the tool declares neither `redact` nor
    /// `log_fields`, so its value would be shown in agent events.
    #[error(transparent)]
    UndeclaredSecret(#[from] crate::secrets::UndeclaredSecret),
    /// `Catalog::linked` found nothing.
    #[error(
        "no tools are linked into this binary: declare tools with #[agent_tool], and name crates that declare them (`aptix::link_tools!(my_tools);`) so the linker keeps them"
    )]
    NoLinkedTools,
}

/// Every problem that kept a catalog from being built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogError {
    /// The problems, in tool-name order.
    pub problems: Vec<CatalogProblem>,
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the tool catalog is invalid ({} problem",
            self.problems.len()
        )?;
        if self.problems.len() != 1 {
            f.write_str("s")?;
        }
        f.write_str("):")?;
        for problem in &self.problems {
            write!(f, "\n- {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CatalogError {}

/// A checked, sorted set of tools. Cheap to clone.
#[derive(Clone)]
pub struct Catalog {
    inner: Arc<Inner>,
}

struct Inner {
    entries: Vec<Entry>,
    fingerprint: String,
}

#[derive(Clone, Copy)]
pub(crate) struct Entry {
    pub(crate) tool: &'static dyn DynTool,
    pub(crate) definition: &'static ToolDefinition,
}

impl fmt::Debug for Catalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Catalog")
            .field("tools", &self.names().collect::<Vec<_>>())
            .field("fingerprint", &self.inner.fingerprint)
            .finish()
    }
}

impl Catalog {
    /// Every tool linked into this binary.
    pub fn linked() -> Result<Catalog, CatalogError> {
        if TOOLS.is_empty() {
            return Err(CatalogError {
                problems: vec![CatalogProblem::NoLinkedTools],
            });
        }
        let catalog = Catalog::builder().linked().build()?;
        tracing::debug!(tools = catalog.len(), fingerprint = %catalog.fingerprint(), "linked tool catalog built");
        Ok(catalog)
    }

    /// An explicit subset of tools.
    pub fn builder() -> CatalogBuilder {
        CatalogBuilder { tools: Vec::new() }
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
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.inner
            .entries
            .iter()
            .map(|entry| entry.definition.name())
    }

    /// The definitions, sorted by name.
    pub fn definitions(&self) -> impl Iterator<Item = &'static ToolDefinition> + '_ {
        self.inner.entries.iter().map(|entry| entry.definition)
    }

    /// The definition of the tool called `name`.
    pub fn get(&self, name: &str) -> Option<&'static ToolDefinition> {
        self.entry(name).map(|entry| entry.definition)
    }

    pub(crate) fn entry(&self, name: &str) -> Option<Entry> {
        let entries = &self.inner.entries;
        entries
            .binary_search_by(|entry| entry.definition.name().cmp(name))
            .ok()
            .map(|index| entries[index])
    }

    /// A stable hash (SHA-256, hex) of every definition: it changes if and
    /// only if something a model or client sees changes (the canonical
    /// definition, title, annotations, redaction, time limits). Use it as a
    /// prompt-cache key and in telemetry.
    pub fn fingerprint(&self) -> &str {
        &self.inner.fingerprint
    }

    /// Every definition lowered to `dialect`, in name order.
    pub fn lower(&self, dialect: Dialect) -> Result<Vec<Value>, DialectError> {
        self.definitions()
            .map(|definition| definition.lower(dialect))
            .collect()
    }

    /// A prompt section telling the model when to call each tool (the
    /// seeds' ToolUsageMetadata, surfaced as text).
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

/// Collects tools for [`Catalog::builder`].
#[must_use]
pub struct CatalogBuilder {
    tools: Vec<&'static dyn DynTool>,
}

impl CatalogBuilder {
    /// Adds the tool `T`.
    pub fn tool<T: Tool>(mut self) -> Self {
        self.tools.push(T::dyn_tool());
        self
    }

    /// Adds a type-erased tool.
    pub fn dyn_tool(mut self, tool: &'static dyn DynTool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds every tool linked into the binary.
    pub fn linked(mut self) -> Self {
        self.tools.extend(TOOLS.iter().copied());
        self
    }

    /// Checks every tool and builds the catalog, or reports every problem.
    pub fn build(self) -> Result<Catalog, CatalogError> {
        let mut tools = self.tools;
        tools.sort_by(|a, b| {
            (a.name(), a.source().file, a.source().line).cmp(&(
                b.name(),
                b.source().file,
                b.source().line,
            ))
        });
        // The same tool added twice (by `linked()` and by `tool::<T>()`) is one tool.
        tools.dedup_by(|a, b| a.name() == b.name() && a.source() == b.source());

        let mut problems = Vec::new();
        let mut entries: Vec<Entry> = Vec::with_capacity(tools.len());
        let mut previous: Option<&'static dyn DynTool> = None;
        for tool in tools {
            if let Some(first) = previous.filter(|first| first.name() == tool.name()) {
                problems.push(CatalogProblem::DuplicateName {
                    name: tool.name(),
                    first: first.source(),
                    second: tool.source(),
                });
                continue;
            }
            previous = Some(tool);
            match tool.definition() {
                Ok(definition) => {
                    let before = problems.len();
                    check_declaration(definition, &mut problems);
                    if problems.len() == before {
                        entries.push(Entry { tool, definition });
                    }
                }
                Err(error) => problems.push(CatalogProblem::Definition(error.clone())),
            }
        }
        if !problems.is_empty() {
            return Err(CatalogError { problems });
        }
        let fingerprint = fingerprint(&entries);
        Ok(Catalog {
            inner: Arc::new(Inner {
                entries,
                fingerprint,
            }),
        })
    }
}

/// What `#[agent_tool]` checks at compile time, checked again for tools
/// that did not come through the macro (a hand `impl Tool`, a `DynTool`).
fn check_declaration(definition: &ToolDefinition, problems: &mut Vec<CatalogProblem>) {
    let name = definition.name();
    let valid_name = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
    if !valid_name {
        problems.push(CatalogProblem::InvalidName {
            name,
            location: definition.source(),
        });
    }
    for (field, text) in [
        ("description", definition.description()),
        ("usage", definition.usage()),
    ] {
        if text.trim().is_empty() {
            problems.push(CatalogProblem::MissingText {
                tool: name,
                field,
                location: definition.source(),
            });
        }
    }
    problems.extend(
        crate::secrets::undeclared_secrets(definition)
            .into_iter()
            .map(CatalogProblem::UndeclaredSecret),
    );
}

/// Everything of a definition a model or a client sees: the canonical
/// definition, plus what MCP clients are shown or act on (title,
/// annotations), what decides which values events show (redaction), and
/// the time limits a caller runs into.
fn fingerprinted(definition: &ToolDefinition) -> Value {
    let mut document = definition.canonical_json();
    if let Value::Object(members) = &mut document {
        let millis = |limit: Option<std::time::Duration>| {
            limit.map_or(Value::Null, |limit| {
                Value::from(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX))
            })
        };
        members.insert(
            "title".to_owned(),
            definition.title().map_or(Value::Null, Value::from),
        );
        members.insert(
            "annotations".to_owned(),
            serde_json::to_value(definition.annotations()).unwrap_or(Value::Null),
        );
        // `Redaction` is not serializable; its `Debug` text names the
        // policy and every pointer, the same in every process.
        members.insert(
            "redaction".to_owned(),
            Value::String(format!("{:?}", definition.redaction())),
        );
        members.insert("timeout_ms".to_owned(), millis(definition.timeout()));
        members.insert(
            "suspend_timeout_ms".to_owned(),
            millis(definition.suspend_timeout()),
        );
        members.insert(
            "idempotent".to_owned(),
            Value::Bool(definition.idempotent()),
        );
    }
    document
}

fn fingerprint(entries: &[Entry]) -> String {
    let canonical: Vec<Value> = entries
        .iter()
        .map(|entry| fingerprinted(entry.definition))
        .collect();
    // serde_json's maps are sorted by key (no `preserve_order`), so this text
    // is the same for the same definitions in every process.
    let text = Value::Array(canonical).to_string();
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}
