//! A tool's definition as a run-time value: what the model, the executor,
//! the agent, MCP and the CLI know about a tool, whichever way it was made.
//!
//! `#[agent_tool]` is one producer (its [`ToolMeta`] constant plus the
//! schemas of its Rust types); a definition from a JSON Schema made at run
//! time is another ([`crate::catalog::ToolEntry::from_json_schema`]). Both
//! pass the same checks and come out the same: an owned value, cheap to
//! clone, that the catalog holds and hands out.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

use crate::context::{StateType, ToolName};
use crate::meta::{
    Annotations, Approval, ExecutorKind, Redaction, Route, SourceLocation, ToolMeta,
};
use crate::schema::dialect::{self, Dialect, DialectError};
use crate::schema::meta_fields;
use crate::schema::{DefinitionError, check_field_descriptions, check_object_root, close_objects};
use crate::validate::ArgsValidator;
use crate::validate::patterns;

/// The complete, checked definition of one tool. Cheap to clone: the
/// value is shared.
#[derive(Clone)]
pub struct ToolDefinition {
    inner: Arc<Inner>,
}

struct Inner {
    name: Cow<'static, str>,
    usage: Cow<'static, str>,
    description: Cow<'static, str>,
    title: Option<Cow<'static, str>>,
    activity: Option<Cow<'static, str>>,
    /// The state types the tool takes from its context: the declaration's
    /// own, or a run-time tool's ([`crate::catalog::ToolEntryBuilder::takes_state`]).
    state: Cow<'static, [StateType]>,
    /// Read for what the tool declares besides its text (executor,
    /// approval, timeouts, ...): the texts above are the ones to use, its
    /// own are empty for a tool made at run time.
    meta: ToolMeta,
    args_type: Cow<'static, str>,
    parameters: Value,
    output: Value,
    /// The schema of the partial results a tool declared with `partial = T`.
    partial: Option<Value>,
    validator: ArgsValidator,
    /// Built on first use: only client and human results are checked
    /// against it, and most tools never have one.
    output_validator: OnceLock<Result<jsonschema::Validator, String>>,
}

impl std::fmt::Debug for ToolDefinition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolDefinition")
            .field("name", &self.name())
            .field("executor", &self.executor())
            .field("approval", &self.approval())
            .field("source", &self.source())
            .field("args_type", &self.args_type())
            .field("parameters", self.parameters())
            .field("output", self.output_schema())
            .finish_non_exhaustive()
    }
}

/// The text of a definition: borrowed from the program for a declared tool,
/// owned for a tool made at run time.
pub(crate) struct Texts {
    pub(crate) name: Cow<'static, str>,
    pub(crate) usage: Cow<'static, str>,
    pub(crate) description: Cow<'static, str>,
    pub(crate) title: Option<Cow<'static, str>>,
    pub(crate) activity: Option<Cow<'static, str>>,
    pub(crate) args_type: Cow<'static, str>,
    /// The schema was written elsewhere (another MCP server's tool): its
    /// fields need not be described, since nobody here can add the
    /// descriptions; everything else is checked as for a declared tool.
    pub(crate) foreign_schema: bool,
}

impl Texts {
    /// The text a declaration's constant carries.
    pub(crate) fn of(meta: &ToolMeta, args_type: &'static str) -> Texts {
        Texts {
            name: Cow::Borrowed(meta.name),
            usage: Cow::Borrowed(meta.usage),
            description: Cow::Borrowed(meta.description),
            title: meta.title.map(Cow::Borrowed),
            activity: meta.activity.map(Cow::Borrowed),
            args_type: Cow::Borrowed(args_type),
            foreign_schema: false,
        }
    }
}

impl ToolDefinition {
    /// Checks a declaration and its schemas and builds the definition: the
    /// arguments are a closed JSON object whose fields are all described,
    /// and the schema compiles.
    ///
    /// The text of `meta` is replaced by `texts` (a run-time definition's
    /// owned text); everything else is taken from `meta`.
    pub(crate) fn from_parts(
        meta: ToolMeta,
        texts: Texts,
        parameters: Value,
        output: Value,
    ) -> Result<ToolDefinition, DefinitionError> {
        let location = meta.source.to_string();
        check_object_root(&texts.name, &texts.args_type, &parameters, &location)?;
        if !texts.foreign_schema {
            check_field_descriptions(&texts.name, &texts.args_type, &parameters, &location)?;
            // A latent tool's result is offered as the `_output` member the
            // model fills like an argument: its fields need the same words.
            // One that names its activity needs it bound, so is never
            // offered latent.
            let named = texts
                .activity
                .as_deref()
                .is_some_and(|name| !name.is_empty());
            if meta.executor == crate::meta::ExecutorKind::Latent && !named {
                check_field_descriptions(&texts.name, meta_fields::OUTPUT, &output, &location)?;
            }
        }
        meta_fields::check_parameter_names(&texts.name, &texts.args_type, &parameters, &location)?;
        let invalid = |message: String| DefinitionError::InvalidSchema {
            tool: texts.name.clone().into_owned(),
            message,
            source_location: location.clone(),
        };
        let validator = ArgsValidator::new(&parameters).map_err(invalid)?;
        // The output validator is built when first needed; a pattern it could not run is
        // refused now, with the tool.
        patterns::check_patterns(&output)
            .map_err(|message| invalid(format!("its output schema: {message}")))?;
        Ok(ToolDefinition {
            inner: Arc::new(Inner {
                name: texts.name,
                usage: texts.usage,
                description: texts.description,
                title: texts.title,
                activity: texts.activity,
                state: Cow::Borrowed(meta.state),
                meta,
                args_type: texts.args_type,
                parameters,
                output,
                partial: None,
                validator,
                output_validator: OnceLock::new(),
            }),
        })
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The name, shared without a copy when the tool was declared in code.
    pub(crate) fn shared_name(&self) -> Cow<'static, str> {
        self.inner.name.clone()
    }

    /// What the tool does (the schema description).
    pub fn description(&self) -> &str {
        &self.inner.description
    }

    /// When the model should call it.
    pub fn usage(&self) -> &str {
        &self.inner.usage
    }

    /// Where its final behaviour happens.
    pub fn executor(&self) -> ExecutorKind {
        self.inner.meta.executor
    }

    /// Whether calls need approval.
    pub fn approval(&self) -> Approval {
        self.inner.meta.approval
    }

    /// What runs on the server for a call of this tool, and who is awaited
    /// after it (see [`crate::meta::route`]). A call a person approved is
    /// routed as `route(executor, Approval::Auto)`.
    pub fn route(&self) -> Route {
        self.inner.meta.route()
    }

    /// The tool's own time limit, if declared.
    pub fn timeout(&self) -> Option<Duration> {
        self.inner.meta.timeout
    }

    /// How long a suspended call may wait, if declared.
    pub fn suspend_timeout(&self) -> Option<Duration> {
        self.inner.meta.suspend_timeout
    }

    /// Whether a call may run again after a crash interrupted it.
    pub fn idempotent(&self) -> bool {
        self.inner.meta.annotations.idempotent
    }

    /// A short human-readable name, if declared.
    pub fn title(&self) -> Option<&str> {
        self.inner.title.as_deref()
    }

    /// The activity that computes the result of a latent tool, when the
    /// tool names one other than itself (`activity = "..."`).
    pub fn activity(&self) -> Option<&str> {
        self.inner.activity.as_deref()
    }

    /// Whether its calls report progress and partial results as they run
    /// (`progressive = true`), for a user interface to expect them.
    pub fn progressive(&self) -> bool {
        self.inner.meta.progressive
    }

    /// How often in one run the model may call again after the tool asked
    /// it to ([`ToolError::retry`](crate::ToolError::retry)).
    pub fn retries(&self) -> u8 {
        self.inner.meta.retries
    }

    /// How long the tool's results stay whole in the model's requests.
    pub fn retention(&self) -> crate::meta::Retention {
        self.inner.meta.retention
    }

    /// What its calls do, as hints for clients (MCP tool annotations).
    pub fn annotations(&self) -> Annotations {
        self.inner.meta.annotations
    }

    /// Where it was declared.
    pub fn source(&self) -> SourceLocation {
        self.inner.meta.source
    }

    /// Which values of its arguments and result events and logs may show.
    pub fn redaction(&self) -> Redaction {
        self.inner.meta.redaction
    }

    /// The Rust type of its arguments (`serde_json::Value` for a tool made
    /// from a JSON Schema).
    pub fn args_type(&self) -> &str {
        &self.inner.args_type
    }

    /// The canonical JSON Schema of the arguments.
    pub fn parameters(&self) -> &Value {
        &self.inner.parameters
    }

    /// The JSON Schema of the result the model finally receives.
    pub fn output_schema(&self) -> &Value {
        &self.inner.output
    }

    /// The JSON Schema of the partial results the tool reports, when it
    /// declares a type of its own for them (`partial = T`); a progressive
    /// tool without one reports values of its output schema.
    pub fn partial_schema(&self) -> Option<&Value> {
        self.inner.partial.as_ref()
    }

    /// The state types the tool takes from its context, as declared
    /// (`state = [Db, Mailer]`); checked when an agent is built
    /// ([`crate::Catalog::missing_state`]).
    pub fn state_types(&self) -> &[StateType] {
        &self.inner.state
    }

    /// The name as a tool's context holds it: no copy for a declared tool.
    pub(crate) fn context_name(&self) -> ToolName {
        match &self.inner.name {
            Cow::Borrowed(name) => ToolName::Static(name),
            Cow::Owned(name) => ToolName::Shared(Arc::from(name.as_str())),
        }
    }

    /// Sets the state types of a tool made at run time: only while the
    /// definition is being built, when nothing else holds it.
    pub(crate) fn with_state_types(mut self, state: Vec<StateType>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.state = Cow::Owned(state);
        }
        self
    }

    /// Sets the partial results' schema: only while the definition is being
    /// built, when nothing else holds it.
    pub(crate) fn with_partial_schema(mut self, partial: Option<Value>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.partial = partial;
        }
        self
    }

    /// Checks a result sent by a client or a person against the declared
    /// output schema, with every object closed: such data is user-controlled,
    /// so an unknown field is refused rather than passed to the model.
    /// The error lists each violation with its JSON path.
    pub fn check_output(&self, value: &Value) -> Result<(), String> {
        let problems: Vec<String> = self
            .output_violations(value)?
            .into_iter()
            .map(|(path, problem)| {
                let path = if path.is_empty() {
                    "/".to_owned()
                } else {
                    path
                };
                format!("{path}: {problem}")
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    /// Each way `value` breaks the output schema (every object closed, as
    /// [`ToolDefinition::check_output`] says), as a JSON pointer and a
    /// message; empty when it fits. The error is for an output schema
    /// that cannot be compiled.
    pub(crate) fn output_violations(&self, value: &Value) -> Result<Vec<(String, String)>, String> {
        let validator = self.inner.output_validator.get_or_init(|| {
            let mut schema = self.inner.output.clone();
            close_objects(&mut schema, true);
            patterns::reference_validator(&schema)
        });
        let validator = validator.as_ref().map_err(|error| {
            format!(
                "the output schema of `{}` is unusable: {error}",
                self.name()
            )
        })?;
        Ok(validator
            .iter_errors(value)
            .map(|error| (error.instance_path().to_string(), error.to_string()))
            .collect())
    }

    /// The validator the executor uses: built from [`ToolDefinition::parameters`].
    pub fn validator(&self) -> &ArgsValidator {
        &self.inner.validator
    }

    /// The provider-neutral function-tool shape: `type`, `name`,
    /// `description`, `parameters`.
    pub fn function_tool(&self) -> Value {
        json!({
            "type": "function",
            "name": self.name(),
            "description": self.description(),
            "parameters": self.parameters(),
        })
    }

    /// What a model is shown of the tool: the description, then when to
    /// call it. Providers show the model only the description, so the usage
    /// goes there (and MCP, which has no field for it, does the same).
    pub fn offered_description(&self) -> String {
        let usage = self.usage().trim();
        if usage.is_empty() {
            self.description().to_owned()
        } else {
            format!("{}\n\nUsage: {usage}", self.description())
        }
    }

    /// The definition as a provider is sent it: the description followed
    /// by the usage, as an agent's request carries it.
    pub fn lower(&self, dialect: Dialect) -> Result<Value, DialectError> {
        dialect::provider_tool(
            dialect,
            self.name(),
            &self.offered_description(),
            self.parameters(),
        )
    }

    /// Everything that, when changed, changes what a model or a client sees.
    /// Hashed by the catalog fingerprint.
    pub fn canonical_json(&self) -> Value {
        let mut canonical = json!({
            "name": self.name(),
            "description": self.description(),
            "usage": self.usage(),
            "executor": self.executor(),
            "approval": self.approval(),
            "parameters": self.parameters(),
            "output": self.output_schema(),
        });
        // Written only when named or set, so that other definitions read
        // as before.
        if let Value::Object(members) = &mut canonical {
            if let Some(activity) = self.activity() {
                members.insert("activity".to_owned(), Value::from(activity));
            }
            if self.progressive() {
                members.insert("progressive".to_owned(), Value::Bool(true));
            }
            if self.retention() != crate::meta::Retention::Budget {
                members.insert(
                    "retention".to_owned(),
                    Value::from(self.retention().to_string()),
                );
            }
        }
        canonical
    }
}
