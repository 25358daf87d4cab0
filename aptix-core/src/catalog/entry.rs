//! One tool as a catalog holds it ([`ToolEntry`]), the builder of a tool
//! made at run time ([`ToolEntryBuilder`]), a tool on its way into a
//! catalog ([`PendingEntry`]), and the check every entry passes whatever
//! made it: one file, so what an entry is and what makes it valid are read
//! together.

use std::any::TypeId;
use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::context::{StateType, ToolContext};
use crate::definition::{Texts, ToolDefinition};
use crate::error::ToolError;
use crate::meta::{Annotations, Approval, ExecutorKind, Redaction, SourceLocation, ToolMeta};
use crate::schema::{DefinitionError, canonical_output, meta_fields};
use crate::tool::{Code, Tool};

use super::activity::Latent;
use super::erased::{ClosureTool, Declared, ErasedTool};
use super::{CatalogError, CatalogProblem};

/// One tool as a catalog holds it: its definition and its server code.
/// Cheap to clone: both are shared.
#[derive(Clone)]
pub struct ToolEntry {
    pub(super) definition: ToolDefinition,
    pub(super) code: Arc<dyn ErasedTool>,
    /// The type a declared tool was made from: the same type added twice
    /// is one tool.
    pub(super) origin: Option<TypeId>,
    /// The activity bound to the tool, by name (see [`crate::activity`]).
    pub(super) activity: Option<Cow<'static, str>>,
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
    /// Everything of the tool a reviewer must see change, as one JSON
    /// document: the canonical definition (name, description, usage,
    /// executor, approval, parameters, output, and the activity,
    /// progressive and retention when set), whether it is latent, and what
    /// MCP clients are shown or act on (title, annotations), what decides
    /// which values events show (redaction), and the time limits a caller
    /// runs into. [`Catalog::fingerprint`](super::Catalog::fingerprint) hashes it;
    /// `aptix_testkit::assert_schema_snapshot!` snapshots it, so switching
    /// a tool from `requires_approval` to `auto` is a reviewed diff.
    pub fn contract(&self) -> Value {
        let definition = self.definition();
        let mut document = definition.canonical_json();
        if let Value::Object(members) = &mut document {
            // Whether `_output` is asked for changes what the model is offered;
            // written only when it is, so that other fingerprints stay as they were.
            if self.is_latent() {
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

    /// The `_activity` of this tool's composed calls, as the schema-first
    /// seed resolves it: the named activity when one is bound
    /// (`activity = "..."`), the tool's own name for every other tool with
    /// code (its own function, a closure, a client or a person: the
    /// same-name convention), and `""` only for a latent tool, whose result
    /// the model gives.
    pub fn call_activity(&self) -> &str {
        if self.is_latent() {
            ""
        } else {
            self.activity().unwrap_or(self.name())
        }
    }

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
    /// bound
    /// ([`CatalogBuilder::activities`](super::CatalogBuilder::activities)).
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
    /// an activity is bound to its name
    /// ([`Activities::bind_json`](super::activity::Activities::bind_json))
    /// the model gives the result itself (the seed's `Tool.register`
    /// without an `Activity.register`). Checked like
    /// [`ToolEntry::from_json_schema`].
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
    /// Nothing is checked here:
    /// [`CatalogBuilder::build`](super::CatalogBuilder::build) checks the
    /// name, the usage, the description and the schema the way it checks a
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
    pub(super) fn of<T: Tool>() -> Result<ToolEntry, Box<Failed>> {
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
    /// The state types its code takes from the context ([`Self::takes_state`]).
    state: Vec<StateType>,
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
            state: Vec::new(),
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

    /// Declares that its code takes a `T` from the context
    /// ([`ToolContext::state`]), as `state = [T]` does in `#[agent_tool]`:
    /// an agent whose context holds none is refused when it is built
    /// ([`Catalog::missing_state`](crate::Catalog::missing_state)), instead of failing the call. Once
    /// per type; a second declaration of one type is kept once.
    pub fn takes_state<T: std::any::Any + Send + Sync>(mut self) -> Self {
        let declared = StateType::of::<T>();
        if !self.state.contains(&declared) {
            self.state.push(declared);
        }
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
    /// (what [`CatalogBuilder::build`](super::CatalogBuilder::build) reports
    /// for it).
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
                definition: if self.state.is_empty() {
                    definition
                } else {
                    definition.with_state_types(self.state)
                },
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
pub(super) struct Failed {
    pub(super) name: Cow<'static, str>,
    pub(super) source: SourceLocation,
    pub(super) origin: Option<TypeId>,
    pub(super) error: DefinitionError,
}

/// A tool on its way into a catalog: a made entry, or a tool made at run
/// time whose definition the build checks.
pub struct PendingEntry(pub(super) Pending);

pub(super) enum Pending {
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
    pub(super) fn made(self) -> Result<ToolEntry, Box<Failed>> {
        match self {
            Pending::Typed(make) => make(),
            Pending::Entry(entry) => Ok(entry),
            Pending::New(builder) => builder.into_entry(),
        }
    }
}

/// What `#[agent_tool]` checks at compile time, checked again for tools
/// that did not come through the macro (a hand `impl Tool`, a tool made at
/// run time).
pub(super) fn check_declaration(entry: &ToolEntry, problems: &mut Vec<CatalogProblem>) {
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
