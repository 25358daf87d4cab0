//! The tool contract: what `#[agent_tool]` implements for every declared tool.
//!
//! Two traits, because two kinds of declaration exist. Every tool is a [`Tool`]
//! (its [`ToolMeta`] and its argument and result types). Only the function
//! form also has server code to run, and so also implements [`ToolFn`]; the
//! struct form (tools whose final behaviour happens in a client, a person or
//! the provider) does not, and the type system keeps anyone from calling it.
//! [`Code`] is how a tool hands its server code to the catalog.

use std::any::TypeId;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, OnceLock, PoisonError};

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::content::{Content, ToolReturn};
use crate::context::ToolContext;
use crate::definition::{Texts, ToolDefinition};
use crate::envelope::{JsonText, closing_len};
use crate::error::ToolError;
use crate::meta::ToolMeta;
use crate::schema::{DefinitionError, canonical_output, canonical_parameters};
use crate::validate::Rejection;

/// A tool an LLM may call. Implemented by `#[agent_tool]`; implementing it by
/// hand is possible but the macro's compile-time checks are then yours to do
/// (the catalog checks the name, the texts and the schemas again).
pub trait Tool: Send + Sync + Sized + 'static {
    /// Everything the tool declares besides its types.
    const META: ToolMeta;
    /// The name the model calls: `META.name`, for code that names a tool
    /// by its type (`HelloWorldTool::NAME`). Never set it yourself.
    const NAME: &'static str = Self::META.name;

    /// The arguments the model sends: always a JSON object.
    type Args: ToolArgs;
    /// What the model finally receives as the result: the function's output
    /// for server tools, the declared `output` for client and human tools.
    type Output: ToolOutputSchema;

    /// The canonical definition, built on first use and kept for the
    /// process.
    fn definition() -> Result<&'static ToolDefinition, &'static DefinitionError> {
        cached_definition::<Self>()
    }

    /// The server code the catalog runs for a call. The default validates
    /// the arguments and makes them the payload, which is right for a tool
    /// without code (a client, human or provider tool); a tool with a
    /// [`ToolFn`] returns [`Code::function`] (`#[agent_tool]` writes this).
    fn code() -> Code {
        Code::arguments::<Self>()
    }

    /// The canonical schema of the partial results the tool reports, when
    /// it declares their type (`partial = T`; `#[agent_tool]` writes this):
    /// a user interface is told their shape, and the catalog checks it for
    /// secret-looking fields, as partial results reach agent events.
    fn partial_schema() -> Option<serde_json::Value> {
        None
    }
}

impl ToolDefinition {
    /// Builds and checks the definition of `T` from its [`ToolMeta`] and
    /// the schemas of its types. [`Tool::definition`] caches the result,
    /// so this runs once per tool per process.
    pub fn build<T: Tool>() -> Result<ToolDefinition, DefinitionError> {
        let args_type = std::any::type_name::<T::Args>();
        ToolDefinition::from_parts(
            T::META,
            Texts::of(&T::META, args_type),
            canonical_parameters::<<T::Args as ToolArgs>::Serde>(),
            canonical_output::<<T::Output as ToolOutputSchema>::Schema>(),
        )
        .map(|definition| definition.with_partial_schema(T::partial_schema()))
    }
}

type Built = Result<ToolDefinition, DefinitionError>;

/// The definition of `T`, built once per process: one table for every tool
/// type, so that no tool needs code of its own to cache it.
fn cached_definition<T: Tool>() -> Result<&'static ToolDefinition, &'static DefinitionError> {
    cached(TypeId::of::<T>(), ToolDefinition::build::<T>)
}

fn cached(
    key: TypeId,
    build: fn() -> Built,
) -> Result<&'static ToolDefinition, &'static DefinitionError> {
    static BUILT: OnceLock<Mutex<HashMap<TypeId, &'static Built>>> = OnceLock::new();
    let table = BUILT.get_or_init(Mutex::default);
    if let Some(built) = table
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return built.as_ref();
    }
    // Built outside the lock: a schema may be slow to generate. Two threads
    // that race here build it twice and keep the first.
    let built: &'static Built = Box::leak(Box::new(build()));
    let mut table = table.lock().unwrap_or_else(PoisonError::into_inner);
    table.entry(key).or_insert(built).as_ref()
}

/// Why a run of a tool's server code did not produce a result.
#[derive(Debug)]
pub(crate) enum RunFailure {
    /// The arguments were refused before the tool ran.
    Rejected(Rejection),
    /// The tool ran and returned an error.
    Tool(ToolError),
}

/// A boxed, sendable future.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What validating a call's arguments ends in: the payload's JSON.
pub(crate) type RunResult = Result<JsonText, RunFailure>;

/// What a run of a tool's server code produced: the result's (or the
/// payload's) JSON, and what the tool attached for the model to see
/// ([`ToolReturn::content`]; `None` for most tools, so that every call's
/// output carries one word for it, not a vector's three).
#[derive(Debug)]
pub(crate) struct Produced {
    pub(crate) json: JsonText,
    #[allow(clippy::box_collection)] // one word on every call, see above
    pub(crate) attachments: Option<Box<Vec<Content>>>,
}

impl Produced {
    #[inline]
    pub(crate) fn new(json: JsonText, attachments: Option<Vec<Content>>) -> Self {
        Produced {
            json,
            attachments: attachments.map(Box::new),
        }
    }
}

impl From<JsonText> for Produced {
    fn from(json: JsonText) -> Self {
        Produced {
            json,
            attachments: None,
        }
    }
}

/// What a run of a tool's server code ends in.
pub(crate) type RunOutput = Result<Produced, RunFailure>;

/// Runs a call's server step: validates the raw arguments and runs the code.
type RunFn = for<'a> fn(&'a ToolDefinition, &'a str, &'a ToolContext) -> BoxFuture<'a, RunOutput>;

/// Validates the raw arguments without running anything.
type ValidateFn = fn(&ToolDefinition, &str) -> RunResult;

/// The server code of a tool with typed arguments, as the catalog runs it:
/// [`Code::function`] for a tool with a [`ToolFn`], [`Code::arguments`] for
/// one without.
#[derive(Clone, Copy)]
pub struct Code {
    pub(crate) run: RunFn,
    pub(crate) validate: ValidateFn,
    pub(crate) runs_function: bool,
}

impl std::fmt::Debug for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Code")
            .field("runs_function", &self.runs_function)
            .finish_non_exhaustive()
    }
}

impl Code {
    /// The tool's function: a call validates and parses the arguments into
    /// `T::Args`, runs [`ToolFn::call`] and serializes what it returns.
    pub const fn function<T: ToolFn>() -> Code {
        Code {
            run: run_function::<T>,
            validate: validated_payload::<T>,
            runs_function: true,
        }
    }

    /// No code: a call validates the arguments (and that they parse into
    /// `T::Args`), and the validated arguments are the payload.
    pub const fn arguments<T: Tool>() -> Code {
        Code {
            run: run_arguments::<T>,
            validate: validated_payload::<T>,
            runs_function: false,
        }
    }
}

fn run_function<'a, T: ToolFn>(
    definition: &'a ToolDefinition,
    raw: &'a str,
    ctx: &'a ToolContext,
) -> BoxFuture<'a, RunOutput> {
    Box::pin(async move {
        let args = match parse_args::<T>(definition, raw) {
            Ok(args) => args,
            Err(rejection) => return Err(RunFailure::Rejected(rejection)),
        };
        match T::call(args.into(), ctx).await {
            Ok(output) => serialize_returned(output, ctx),
            Err(error) => Err(RunFailure::Tool(error)),
        }
    })
}

/// The validated arguments of `T`: one copy per tool of the parse that a run and an
/// approval's payload share.
#[inline(never)]
fn parse_args<T: Tool>(
    definition: &ToolDefinition,
    raw: &str,
) -> Result<<T::Args as ToolArgs>::Serde, Rejection> {
    definition.validator().parse(raw)
}

/// The result's JSON, with room for the envelope's closing ids.
pub(crate) fn serialize_output<O: Serialize>(output: &O, ctx: &ToolContext) -> RunResult {
    match JsonText::for_envelope(output, closing_space(ctx)) {
        Ok(text) => Ok(text),
        Err(error) => Err(unserializable(error)),
    }
}

/// What a tool returned, as the result's JSON and its attachments.
pub(crate) fn serialize_returned<R: ToolOutput>(returned: R, ctx: &ToolContext) -> RunOutput {
    let (value, attachments) = returned.into_parts();
    let json = serialize_output(&value, ctx)?;
    Ok(Produced::new(json, attachments))
}

fn closing_space(ctx: &ToolContext) -> usize {
    closing_len(ctx.tool_call_id(), ctx.conversation_id(), ctx.session_id())
}

fn unserializable(error: serde_json::Error) -> RunFailure {
    RunFailure::Tool(ToolError::internal(error))
}

fn run_arguments<'a, T: Tool>(
    definition: &'a ToolDefinition,
    raw: &'a str,
    _ctx: &'a ToolContext,
) -> BoxFuture<'a, RunOutput> {
    Box::pin(std::future::ready(
        validated_payload::<T>(definition, raw).map(Produced::from),
    ))
}

/// Validates `raw` and returns the validated arguments as the payload,
/// once they are also known to parse into `T::Args`.
fn validated_payload<T: Tool>(definition: &ToolDefinition, raw: &str) -> RunResult {
    let value = validated_value(definition, raw)?;
    // The typed parse proves the arguments fit the Rust type too. It is the
    // parse a call of the function makes, so it adds no code per tool.
    match parse_args::<T>(definition, raw) {
        Ok(_) => payload_of(&value),
        Err(rejection) => Err(type_mismatch(rejection)),
    }
}

fn type_mismatch(rejection: Rejection) -> RunFailure {
    RunFailure::Tool(ToolError::invalid_arguments(format!(
        "The arguments do not match the tool's parameters: {}",
        rejection.message
    )))
}

/// Validates `raw` against the definition's schema, as a JSON value.
pub(crate) fn validated_value(
    definition: &ToolDefinition,
    raw: &str,
) -> Result<serde_json::Value, RunFailure> {
    definition
        .validator()
        .parse(raw)
        .map_err(RunFailure::Rejected)
}

/// The payload of validated arguments.
pub(crate) fn payload_of(value: &serde_json::Value) -> RunResult {
    JsonText::from_serialize(value).map_err(|error| RunFailure::Tool(ToolError::internal(error)))
}

/// A tool with server code: the function form of `#[agent_tool]`.
///
/// For server tools `call` produces the final result; for client and human
/// tools it is the server preflight: it validates, authorises and
/// shapes the payload that the client or person then acts on.
pub trait ToolFn: Tool {
    /// What `call` returns on success.
    type Returned: ToolOutput;

    /// Runs the declared function.
    fn call(
        args: Self::Args,
        ctx: &ToolContext,
    ) -> impl Future<Output = Result<Self::Returned, ToolError>> + Send;
}

// The three traits below carry the compile-time messages of `#[agent_tool]`.
// Their serde/schemars requirements are bounds of a `do_not_recommend`
// blanket impl and of a hidden associated type, never supertraits: with a
// supertrait rustc reports the inner bound ("`Args: Deserialize<'_>` is not
// satisfied", plus a list of unrelated types) instead of the message here.

/// What an arguments type needs: it is parsed from the model's JSON and
/// described to the model by its schema. Implemented for every such type.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the arguments of an agent tool",
    label = "this type must derive `Deserialize` and `JsonSchema`",
    note = "add `#[derive(Deserialize, JsonSchema)]` to `{Self}` (both derives are in `aptix::prelude`)"
)]
pub trait ToolArgs: Send + Sized + 'static {
    /// `Self`, with the bounds generic code needs (always `Self`).
    #[doc(hidden)]
    type Serde: DeserializeOwned + JsonSchema + Into<Self>;
}
#[diagnostic::do_not_recommend]
impl<T: DeserializeOwned + JsonSchema + Send + 'static> ToolArgs for T {
    type Serde = T;
}

/// What a tool function's success type needs: it is serialized into the
/// envelope. Implemented for every such type.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the output of an agent tool",
    label = "this type must derive `Serialize`",
    note = "the result is sent to the model as JSON: add `#[derive(Serialize)]` to `{Self}` (it is in `aptix::prelude`)"
)]
pub trait ToolOutput: Send + Sized + 'static {
    /// What is serialized into the envelope: `Self`, or the `value` of a
    /// [`ToolReturn`].
    #[doc(hidden)]
    type Serde: Serialize;

    /// The value to serialize, and the content attached for the model
    /// (`None`, known at compile time, for every type but `ToolReturn`).
    #[doc(hidden)]
    fn into_parts(self) -> (Self::Serde, Option<Vec<Content>>);
}
#[diagnostic::do_not_recommend]
impl<T: Serialize + Send + 'static> ToolOutput for T {
    type Serde = T;

    #[inline]
    fn into_parts(self) -> (T, Option<Vec<Content>>) {
        (self, None)
    }
}
// `ToolReturn` is not `Serialize` (its content is not part of the result),
// so this impl and the blanket one above never overlap. Not recommended in
// the error about an output without `Serialize`, which it would only blur.
#[diagnostic::do_not_recommend]
impl<T: Serialize + Send + 'static> ToolOutput for ToolReturn<T> {
    type Serde = T;

    fn into_parts(self) -> (T, Option<Vec<Content>>) {
        let content = self.content;
        (self.value, (!content.is_empty()).then_some(content))
    }
}

/// What a tool's declared partial type (`partial = T`) needs: its schema
/// describes the partial results, and is checked for secret-looking fields.
/// Implemented for every such type.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the partial results of an agent tool",
    label = "this type must derive `JsonSchema`",
    note = "partial results reach agent events, so their schema is checked for secret-looking fields: add `#[derive(JsonSchema)]` to `{Self}` (it is in `aptix::prelude`)"
)]
pub trait ToolPartialSchema {
    /// `Self`, with the bounds generic code needs (always `Self`).
    #[doc(hidden)]
    type Schema: JsonSchema;
}
#[diagnostic::do_not_recommend]
impl<T: JsonSchema> ToolPartialSchema for T {
    type Schema = T;
}

/// What a tool's result type needs: the model is told its schema.
/// Implemented for every such type.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the output of an agent tool",
    label = "this type must derive `JsonSchema`",
    note = "the model is told the result's schema: add `#[derive(JsonSchema)]` to `{Self}` (it is in `aptix::prelude`)"
)]
pub trait ToolOutputSchema {
    /// `Self`, with the bounds generic code needs (always `Self`).
    #[doc(hidden)]
    type Schema: JsonSchema;
}
#[diagnostic::do_not_recommend]
impl<T: JsonSchema> ToolOutputSchema for T {
    type Schema = T;
}
