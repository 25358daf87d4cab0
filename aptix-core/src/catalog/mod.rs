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

pub mod activity;
pub(crate) mod erased;

use std::any::TypeId;
use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::Value;

use crate::context::ToolContext;
use crate::definition::{Texts, ToolDefinition};
use crate::error::ToolError;
use crate::meta::{Annotations, Approval, ExecutorKind, Redaction, SourceLocation, ToolMeta};
use crate::schema::{DefinitionError, Dialect, DialectError, canonical_output, meta_fields};
use crate::tool::{Code, Tool};
use activity::{Activities, Latent};
use erased::{ClosureTool, Declared, ErasedTool};

/// One tool as a catalog holds it: its definition and its server code.
/// Cheap to clone: both are shared.
#[derive(Clone)]
pub struct ToolEntry {
    definition: ToolDefinition,
    code: Arc<dyn ErasedTool>,
    /// The type a declared tool was made from: the same type added twice
    /// is one tool.
    origin: Option<TypeId>,
    /// The activity bound to the tool, by name (see [`crate::activity`]).
    activity: Option<Cow<'static, str>>,
    /// The group the tool is searched under, when it was given one
    /// ([`ToolEntryBuilder::namespace`]).
    namespace: Option<Arc<str>>,
}

impl fmt::Debug for ToolEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolEntry")
            .field("name", &self.definition.name())
            .field("runs_function", &self.code.runs_function())
            .field("latent", &self.is_latent())
            .field("activity", &self.activity)
            .finish_non_exhaustive()
    }
}

impl ToolEntry {
    /// The group tool search files the tool under: the one it was given
    /// ([`ToolEntryBuilder::namespace`]), else a declared tool's module
    /// path without the crate's name (`tools::github` for
    /// `my_app::tools::github`; the crate's name for a tool at its root),
    /// else none.
    pub fn namespace(&self) -> Option<Cow<'_, str>> {
        if let Some(namespace) = &self.namespace {
            return Some(Cow::Borrowed(namespace));
        }
        let path = self.definition.source().module_path;
        if self.origin.is_none() || path.is_empty() || path.contains(' ') {
            return None;
        }
        Some(match path.split_once("::") {
            Some((_, inner)) => Cow::Borrowed(inner),
            None => Cow::Borrowed(path),
        })
    }

    /// The tool's definition.
    pub fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        self.definition.name()
    }

    /// Whether the tool runs code of its own on the server (a function or
    /// a closure), rather than validating its arguments alone.
    pub fn runs_function(&self) -> bool {
        self.code.runs_function()
    }

    pub(crate) fn code(&self) -> &dyn ErasedTool {
        &*self.code
    }

    /// Whether the model gives the tool's result in its own call: a latent
    /// tool ([`ExecutorKind::Latent`]) with no activity bound.
    pub fn is_latent(&self) -> bool {
        self.code.asks_output()
    }

    /// The name of the activity that computes the tool's result, if one is
    /// bound ([`CatalogBuilder::activities`]).
    pub fn activity(&self) -> Option<&str> {
        self.activity.as_deref()
    }

    /// The parameters schema offered to a model or an MCP client: the
    /// definition's, plus a required `_output` member for a latent tool
    /// (see [`crate::schema::meta_fields::with_output`]). Binding an
    /// activity changes nothing else a caller sees.
    pub fn offered_parameters(&self) -> Cow<'_, Value> {
        if self.is_latent() {
            Cow::Owned(meta_fields::with_output(
                self.definition.parameters(),
                self.definition.output_schema(),
            ))
        } else {
            Cow::Borrowed(self.definition.parameters())
        }
    }

    /// A schema-first tool made at run time: its arguments are described by
    /// `parameters` and its result by `output`, and it has no code. Until
    /// an activity is bound to its name ([`Activities::bind_json`]) the
    /// model gives the result itself (the seed's `Tool.register` without
    /// an `Activity.register`). Checked like [`ToolEntry::from_json_schema`].
    #[track_caller]
    pub fn latent(
        name: impl Into<String>,
        usage: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        output: Value,
    ) -> ToolEntryBuilder {
        ToolEntryBuilder::new(
            name.into(),
            usage.into(),
            description.into(),
            parameters,
            Arc::new(Latent { arguments: None }),
            SourceLocation::caller(),
        )
        .executor(ExecutorKind::Latent)
        .output_schema(output)
    }

    /// A tool made at run time: its arguments are described by the JSON
    /// Schema `parameters` (a closed object whose fields are described, as
    /// `#[agent_tool]` requires), and a call runs `run` with the validated
    /// arguments and a copy of the call's context. It is a server tool
    /// that needs no approval until the builder says otherwise.
    ///
    /// Nothing is checked here: [`CatalogBuilder::build`] checks the name,
    /// the usage, the description and the schema the way it checks a
    /// declared tool, and reports every problem at once.
    #[track_caller]
    pub fn from_json_schema<F, Fut>(
        name: impl Into<String>,
        usage: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        run: F,
    ) -> ToolEntryBuilder
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        ToolEntryBuilder::new(
            name.into(),
            usage.into(),
            description.into(),
            parameters,
            Arc::new(ClosureTool(run)),
            SourceLocation::caller(),
        )
    }

    /// A tool made at run time with no server code: a client, human or
    /// provider tool (set with [`ToolEntryBuilder::executor`]) whose
    /// validated arguments are the payload. Checked like
    /// [`ToolEntry::from_json_schema`].
    #[track_caller]
    pub fn declared_json_schema(
        name: impl Into<String>,
        usage: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
    ) -> ToolEntryBuilder {
        ToolEntryBuilder::new(
            name.into(),
            usage.into(),
            description.into(),
            parameters,
            Arc::new(Declared),
            SourceLocation::caller(),
        )
    }

    /// The entry of the declared tool `T`.
    fn of<T: Tool>() -> Result<ToolEntry, Box<Failed>> {
        ToolEntry::declared(T::definition(), T::code(), &T::META, TypeId::of::<T>())
    }

    /// What [`ToolEntry::of`] makes, outside the code generated per tool.
    fn declared(
        definition: Result<&'static ToolDefinition, &'static DefinitionError>,
        code: Code,
        meta: &ToolMeta,
        origin: TypeId,
    ) -> Result<ToolEntry, Box<Failed>> {
        // A latent tool's code is the check of the result the model gives,
        // with the typed check of its arguments.
        let code: Arc<dyn ErasedTool> = if meta.executor == ExecutorKind::Latent {
            Arc::new(Latent {
                arguments: Some(code),
            })
        } else {
            Arc::new(code)
        };
        match definition {
            Ok(definition) => Ok(ToolEntry {
                definition: definition.clone(),
                code,
                origin: Some(origin),
                activity: None,
                namespace: None,
            }),
            Err(error) => Err(Box::new(Failed {
                name: Cow::Borrowed(meta.name),
                source: meta.source,
                origin: Some(origin),
                error: error.clone(),
            })),
        }
    }
}

/// A tool made at run time, on its way into a catalog: the options of its
/// definition, checked when the catalog is built.
#[must_use]
pub struct ToolEntryBuilder {
    meta: ToolMeta,
    name: String,
    usage: String,
    description: String,
    title: Option<String>,
    activity: Option<String>,
    parameters: Value,
    output: Option<Value>,
    code: Arc<dyn ErasedTool>,
    /// Made from another MCP server's listing (see [`Texts::foreign_schema`]).
    foreign: Option<&'static str>,
    namespace: Option<String>,
}

impl fmt::Debug for ToolEntryBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolEntryBuilder")
            .field("name", &self.name)
            .field("meta", &self.meta)
            .finish_non_exhaustive()
    }
}

impl ToolEntryBuilder {
    fn new(
        name: String,
        usage: String,
        description: String,
        parameters: Value,
        code: Arc<dyn ErasedTool>,
        source: SourceLocation,
    ) -> Self {
        ToolEntryBuilder {
            // The text lives in the builder's own fields.
            meta: ToolMeta::new("", "", "", source),
            name,
            usage,
            description,
            title: None,
            activity: None,
            parameters,
            output: None,
            code,
            foreign: None,
            namespace: None,
        }
    }

    /// A tool of another MCP server: its schema is checked like any other,
    /// except that its fields need not be described. `args_type` names
    /// where the schema came from in error messages.
    #[cfg(feature = "mcp-client")]
    pub(crate) fn foreign(
        name: String,
        usage: String,
        description: String,
        parameters: Value,
        code: Arc<dyn ErasedTool>,
        source: SourceLocation,
        args_type: &'static str,
    ) -> Self {
        let mut builder = ToolEntryBuilder::new(name, usage, description, parameters, code, source);
        builder.foreign = Some(args_type);
        builder
    }

    /// The group tool search files the tool under (default: none for a
    /// tool made at run time; a declared tool's is its module path). A
    /// model searching hundreds of tools can narrow a search to one
    /// namespace; an MCP toolset names its tools' by its prefix or label.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Where the tool's final behaviour happens (default: the server).
    pub fn executor(mut self, executor: ExecutorKind) -> Self {
        self.meta.executor = executor;
        self
    }

    /// Whether a person must approve each call (default: no).
    pub fn approval(mut self, approval: Approval) -> Self {
        self.meta.approval = approval;
        self
    }

    /// The tool's own time limit (default: the executor's).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.meta.timeout = Some(timeout);
        self
    }

    /// How long a suspended call may wait (default: the agent's).
    pub fn suspend_timeout(mut self, timeout: Duration) -> Self {
        self.meta.suspend_timeout = Some(timeout);
        self
    }

    /// A short human-readable name for user interfaces (MCP `title`).
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// The activity that computes the result of this latent tool, when it
    /// is not the tool's own name ([`ToolMeta::activity`]): the tool then
    /// needs that activity bound. An empty name keeps the tool latent
    /// whatever is bound to its own name.
    pub fn activity(mut self, name: impl Into<String>) -> Self {
        self.activity = Some(name.into());
        self
    }

    /// Declares that its calls report progress and partial results as they
    /// run (the closure reports with `ctx.progress(..)` and, for partial
    /// results as JSON, `ctx.for_partials::<serde_json::Value>().partial(..)`).
    pub fn progressive(mut self, progressive: bool) -> Self {
        self.meta.progressive = progressive;
        self
    }

    /// How often in one run the model may call again after the closure
    /// asked it to with `ToolError::retry` (default 1).
    pub fn retries(mut self, retries: u8) -> Self {
        self.meta.retries = retries;
        self
    }

    /// How long its results stay whole in the model's requests (default:
    /// until the agent's context budget needs the room).
    pub fn retention(mut self, retention: crate::meta::Retention) -> Self {
        self.meta.retention = retention;
        self
    }

    /// What its calls do, as hints for clients (default: MCP's).
    pub fn annotations(mut self, annotations: Annotations) -> Self {
        self.meta.annotations = annotations;
        self
    }

    /// Which values of its arguments and result events and logs may show.
    pub fn redaction(mut self, redaction: Redaction) -> Self {
        self.meta.redaction = redaction;
        self
    }

    /// The JSON Schema of the result the model finally receives (default:
    /// any JSON value). A client's or person's answer is checked against it.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output = Some(schema);
        self
    }

    /// Where the tool was made, for error messages (default: the caller of
    /// [`ToolEntry::from_json_schema`]).
    pub fn source(mut self, source: SourceLocation) -> Self {
        self.meta.source = source;
        self
    }

    /// The arguments and output schemas, as given.
    #[cfg(feature = "mcp-client")]
    pub(crate) fn schemas(&self) -> Vec<Value> {
        std::iter::once(self.parameters.clone())
            .chain(self.output.clone())
            .collect()
    }

    /// Checks the definition and makes the entry, or reports every problem
    /// (what [`CatalogBuilder::build`] reports for it).
    pub fn build(self) -> Result<ToolEntry, CatalogError> {
        let entry = self.into_entry().map_err(|failed| CatalogError {
            problems: vec![CatalogProblem::Definition(failed.error)],
        })?;
        let mut problems = Vec::new();
        check_declaration(&entry, &mut problems);
        if problems.is_empty() {
            Ok(entry)
        } else {
            Err(CatalogError { problems })
        }
    }

    fn into_entry(self) -> Result<ToolEntry, Box<Failed>> {
        let texts = Texts {
            name: Cow::Owned(self.name),
            usage: Cow::Owned(self.usage),
            description: Cow::Owned(self.description),
            title: self.title.map(Cow::Owned),
            activity: self.activity.map(Cow::Owned),
            args_type: Cow::Borrowed(self.foreign.unwrap_or("serde_json::Value")),
            foreign_schema: self.foreign.is_some(),
        };
        let name = texts.name.clone();
        let output = self.output.unwrap_or_else(canonical_output::<Value>);
        // A latent tool without code is checked on the result the model gives.
        let code = if self.meta.executor == ExecutorKind::Latent && !self.code.runs_function() {
            Arc::new(Latent { arguments: None })
        } else {
            self.code
        };
        match ToolDefinition::from_parts(self.meta, texts, self.parameters, output) {
            Ok(definition) => Ok(ToolEntry {
                definition,
                code,
                origin: None,
                activity: None,
                namespace: self.namespace.map(Arc::from),
            }),
            Err(error) => Err(Box::new(Failed {
                name,
                source: self.meta.source,
                origin: None,
                error,
            })),
        }
    }
}

/// A tool whose definition could not be built.
struct Failed {
    name: Cow<'static, str>,
    source: SourceLocation,
    origin: Option<TypeId>,
    error: DefinitionError,
}

/// A tool on its way into a catalog: a made entry, or a tool made at run
/// time whose definition the build checks.
pub struct PendingEntry(Pending);

enum Pending {
    Typed(fn() -> Result<ToolEntry, Box<Failed>>),
    Entry(ToolEntry),
    New(Box<ToolEntryBuilder>),
}

impl fmt::Debug for PendingEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PendingEntry")
    }
}

impl From<ToolEntry> for PendingEntry {
    fn from(entry: ToolEntry) -> Self {
        PendingEntry(Pending::Entry(entry))
    }
}

impl From<ToolEntryBuilder> for PendingEntry {
    fn from(builder: ToolEntryBuilder) -> Self {
        PendingEntry(Pending::New(Box::new(builder)))
    }
}

impl Pending {
    fn made(self) -> Result<ToolEntry, Box<Failed>> {
        match self {
            Pending::Typed(make) => make(),
            Pending::Entry(entry) => Ok(entry),
            Pending::New(builder) => builder.into_entry(),
        }
    }
}

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
        name: String,
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
        name: String,
        /// Where the tool was declared.
        location: SourceLocation,
    },
    /// A tool's description or usage is empty: the model would not know
    /// what the tool does or when to call it.
    #[error("tool `{tool}`, declared at {location}, has an empty {field}")]
    MissingText {
        /// The tool's name.
        tool: String,
        /// `description` or `usage`.
        field: &'static str,
        /// Where the tool was declared.
        location: SourceLocation,
    },
    /// A server tool has no code to run: a tool written by hand with a
    /// `ToolFn` must return `Code::function::<Self>()` from `Tool::code`.
    #[error(
        "tool `{tool}`, declared at {location}, runs on the server but has no code: implement `ToolFn` and return `Code::function::<Self>()` from `Tool::code`, or declare it for a client, a person or the provider"
    )]
    MissingCode {
        /// The tool's name.
        tool: String,
        /// Where the tool was declared.
        location: SourceLocation,
    },
    /// A tool was asked for by name ([`Catalog::only`]) and the catalog has
    /// none of that name.
    #[error("the catalog has no tool named `{name}`; it has: {}", known.join(", "))]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// The names the catalog has, sorted.
        known: Vec<String>,
    },
    /// An activity is bound to a name no tool of the catalog has.
    #[error("an activity is bound to `{name}` (at {source_location}), but the catalog has no tool of that name; it has: {}", known.join(", "))]
    UnknownActivity {
        /// The name the activity is bound to.
        name: String,
        /// Where it was bound.
        source_location: SourceLocation,
        /// The names the catalog has, sorted.
        known: Vec<String>,
    },
    /// An activity is bound to a tool whose final behaviour does not
    /// happen on this server (a client, human or provider tool).
    #[error(
        "an activity is bound to `{name}` (at {source_location}), a {executor} tool: an activity runs on this server, so it can only be bound to a latent or server tool"
    )]
    ActivityNotOnServer {
        /// The tool's name.
        name: String,
        /// Where the activity was bound.
        source_location: SourceLocation,
        /// The tool's executor (`client`, `human` or `provider`).
        executor: &'static str,
    },
    /// An activity written for one tool type is bound to a tool of the same
    /// name made another way, whose arguments it might not read.
    #[error(
        "the activity bound to `{name}` (at {source_location}) takes the types of `{activity_type}`, but the catalog's `{name}` was declared at {tool_source}: bind it with `bind_json`, or bind the type the catalog holds"
    )]
    ActivityForAnotherTool {
        /// The tool's name.
        name: String,
        /// Where the activity was bound.
        source_location: SourceLocation,
        /// The tool type the activity was written for.
        activity_type: &'static str,
        /// Where the catalog's tool of that name was declared.
        tool_source: SourceLocation,
    },
    /// A tool names the activity that computes its result, and none of
    /// that name is bound.
    #[error(
        "tool `{tool}`, declared at {location}, names the activity `{activity}`, and no activity of that name is bound: bind one with `Activities::bind_json(\"{activity}\", ...)` (or `bind::<T>`), or leave `activity` out to run the tool latent"
    )]
    MissingActivity {
        /// The tool's name.
        tool: String,
        /// The activity it names.
        activity: String,
        /// Where the tool was declared.
        location: SourceLocation,
    },
    /// An activity is bound to a tool's own name, and the tool names
    /// another activity, which wins: the one bound by name would never run.
    #[error(
        "an activity is bound to `{name}` (at {source_location}), but the tool `{name}` {}, which wins",
        shadowed_because(named)
    )]
    ActivityShadowed {
        /// The tool's name.
        name: String,
        /// Where the shadowed activity was bound.
        source_location: SourceLocation,
        /// The activity the tool names.
        named: String,
    },
    /// A tool that is not latent names an activity: only a latent tool's
    /// result comes from one.
    #[error(
        "tool `{tool}`, declared at {location}, names an activity but is a {executor} tool: only a latent tool's result comes from an activity"
    )]
    ActivityOnNonLatentTool {
        /// The tool's name.
        tool: String,
        /// Its executor.
        executor: &'static str,
        /// Where the tool was declared.
        location: SourceLocation,
    },
    /// A field looks secret and the tool declares neither `redact` nor
    /// `log_fields`, so its value would be shown in agent events.
    #[error(transparent)]
    UndeclaredSecret(#[from] crate::secrets::UndeclaredSecret),
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

    /// A stable hash (SHA-256, hex) of every definition: it changes if and
    /// only if something a model or client sees changes (the canonical
    /// definition, title, annotations, redaction, time limits). Use it as a
    /// prompt-cache key and in telemetry.
    pub fn fingerprint(&self) -> &str {
        self.inner
            .fingerprint
            .get_or_init(|| fingerprint(&self.inner.entries))
    }

    /// Every tool as `dialect`'s provider expects it, in name order: a
    /// latent tool with the `_output` member it asks for.
    pub fn lower(&self, dialect: Dialect) -> Result<Vec<Value>, DialectError> {
        self.entries()
            .map(|entry| {
                let definition = entry.definition();
                crate::schema::dialect::provider_tool(
                    dialect,
                    definition.name(),
                    definition.description(),
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

/// Collects tools for [`Catalog::builder`].
#[must_use]
pub struct CatalogBuilder {
    pending: Vec<Pending>,
    activities: Activities,
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

/// Why an activity bound to a tool's own name never runs.
fn shadowed_because(named: &str) -> String {
    if named.is_empty() {
        "is declared latent (`activity = \"\"`): the model gives its result".to_owned()
    } else {
        format!("names the activity `{named}`; bind `{named}` instead")
    }
}

/// Binds activities to entries, or reports why they cannot be bound; every
/// entry and every activity is looked at, so every problem is reported.
/// An entry takes the activity it names (`activity = "..."`), else the one
/// bound to its own name; an activity no entry takes is a problem.
fn bind_activities(
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

/// What `#[agent_tool]` checks at compile time, checked again for tools
/// that did not come through the macro (a hand `impl Tool`, a tool made at
/// run time).
fn check_declaration(entry: &ToolEntry, problems: &mut Vec<CatalogProblem>) {
    let definition = entry.definition();
    let name = definition.name();
    let valid_name = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
    if !valid_name {
        problems.push(CatalogProblem::InvalidName {
            name: name.to_owned(),
            location: definition.source(),
        });
    }
    for (field, text) in [
        ("description", definition.description()),
        ("usage", definition.usage()),
    ] {
        if text.trim().is_empty() {
            problems.push(CatalogProblem::MissingText {
                tool: name.to_owned(),
                field,
                location: definition.source(),
            });
        }
    }
    if definition.activity().is_some() && definition.executor() != ExecutorKind::Latent {
        problems.push(CatalogProblem::ActivityOnNonLatentTool {
            tool: name.to_owned(),
            executor: definition.executor().as_str(),
            location: definition.source(),
        });
    }
    if definition.executor() == ExecutorKind::Server && !entry.runs_function() {
        problems.push(CatalogProblem::MissingCode {
            tool: name.to_owned(),
            location: definition.source(),
        });
    }
    problems.extend(
        crate::secrets::undeclared_secrets(definition)
            .into_iter()
            .map(CatalogProblem::UndeclaredSecret),
    );
}

/// Everything of an entry a model or a client sees: the canonical
/// definition, plus what MCP clients are shown or act on (title,
/// annotations), what decides which values events show (redaction), and
/// the time limits a caller runs into.
fn fingerprinted(entry: &ToolEntry) -> Value {
    let definition = entry.definition();
    let mut document = definition.canonical_json();
    if let Value::Object(members) = &mut document {
        // Whether `_output` is asked for changes what the model is offered;
        // written only when it is, so that other fingerprints stay as they were.
        if entry.is_latent() {
            members.insert("latent".to_owned(), Value::Bool(true));
        }
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

fn fingerprint(entries: &[ToolEntry]) -> String {
    let canonical: Vec<Value> = entries.iter().map(fingerprinted).collect();
    // serde_json's maps are sorted by key (no `preserve_order`), so this text
    // is the same for the same definitions in every process.
    let text = Value::Array(canonical).to_string();
    crate::digest::sha256_hex(text.as_bytes())
}
