//! The executor: one tool call in, one outcome out, whatever happens.
//!
//! It finds the tool, validates the arguments against the schema the model
//! saw, runs the server step, and turns every result, error, panic, time-out
//! and cancellation into an [`Outcome`]. Nothing escapes it: this is the
//! AGN-005 rule that a tool failure is data for the model, never a crash of
//! the agent.

use std::any::Any;
use std::borrow::Cow;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures_util::FutureExt;
use serde_json::json;
use tracing::Instrument;

use crate::catalog::{BoxFuture, Catalog, DynTool, Entry, RunFailure};
use crate::context::ToolContext;
use crate::envelope::{Envelope, EnvelopeError, EnvelopeIds, JsonText};
use crate::error::{ErrorCode, INTERNAL_MESSAGE, ToolError};
use crate::schema::{DefinitionError, ToolDefinition};
use crate::tool::{Approval, ExecutorKind, SourceLocation, Tool, ToolArgs, ToolFn, ToolOutput};

/// The time limit of a call whose tool declares none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// One tool call as the model produced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The model's id for the call (or one assigned at the boundary).
    pub id: Arc<str>,
    /// The tool name the model asked for.
    pub name: String,
    /// The arguments exactly as the model wrote them: not yet parsed.
    pub arguments: String,
}

impl ToolCall {
    /// A call of `name` with raw `arguments`.
    pub fn new(
        id: impl Into<Arc<str>>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// Who a suspended call is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AwaitReason {
    /// A person must approve the call.
    Approval,
    /// A client must execute the prepared payload and send the result.
    Client,
    /// A person must answer; the answer is the result.
    Human,
}

/// A call whose server step succeeded and that now waits for someone else.
#[derive(Debug, Clone)]
pub struct Awaiting {
    /// Who must act first.
    pub reason: AwaitReason,
    /// Who must act after that, if anyone (an approved client call goes to the client).
    pub then: Option<AwaitReason>,
    /// The validated, shaped payload: what the approver sees or the client executes.
    pub payload: JsonText,
}

/// What came of one call (AGN-005's execution modes).
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Finished on the server: the envelope is the tool result for the model.
    /// Every failure, for every kind of tool, ends here too.
    Final(Envelope),
    /// Server preflight done; waiting for an approval, a client or a person.
    Awaiting(Awaiting),
    /// A provider tool: run by the model provider, never dispatched here.
    PassThrough,
}

/// One executed call: its ids, its tool, its outcome.
#[derive(Debug, Clone)]
pub struct Execution {
    /// The call's id.
    pub tool_call_id: Arc<str>,
    /// The tool name as the model gave it.
    pub name: Cow<'static, str>,
    /// The tool's execution mode, when the tool exists.
    pub executor: Option<ExecutorKind>,
    /// What happened.
    pub outcome: Outcome,
}

impl Execution {
    /// The envelope of a finished call.
    pub fn envelope(&self) -> Option<&Envelope> {
        match &self.outcome {
            Outcome::Final(envelope) => Some(envelope),
            _ => None,
        }
    }

    /// Whether a server-side tool mediated the call (AGN-005 `IsServerTool`):
    /// true for every catalogued tool except provider tools.
    pub fn is_server_tool(&self) -> bool {
        matches!(
            self.executor,
            Some(ExecutorKind::Server | ExecutorKind::Client | ExecutorKind::Human)
        )
    }

    /// Whether the server step completed (AGN-005 `WasExecuted`): a
    /// successful result, or a preflight that produced a payload.
    pub fn was_executed(&self) -> bool {
        match &self.outcome {
            Outcome::Final(envelope) => envelope.is_ok(),
            Outcome::Awaiting(_) => true,
            Outcome::PassThrough => false,
        }
    }

    /// Whether a client must still execute the call (now, or once approved).
    pub fn requires_client_execution(&self) -> bool {
        match &self.outcome {
            Outcome::Awaiting(awaiting) => {
                awaiting.reason == AwaitReason::Client || awaiting.then == Some(AwaitReason::Client)
            }
            _ => false,
        }
    }
}

/// Runs tool calls against a catalog. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Executor {
    catalog: Catalog,
    default_timeout: Option<Duration>,
}

impl Executor {
    /// An executor over `catalog` with the [`DEFAULT_TIMEOUT`].
    pub fn new(catalog: Catalog) -> Self {
        Executor {
            catalog,
            default_timeout: Some(DEFAULT_TIMEOUT),
        }
    }

    /// Sets the time limit for tools that declare none (`None`: no limit).
    pub fn with_default_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.default_timeout = timeout;
        self
    }

    /// The catalog the executor dispatches to.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Executes one call. Never panics and never returns an error: every
    /// failure is an [`Outcome::Final`] with a failed envelope.
    ///
    /// Time limits need a Tokio runtime with timers enabled (the default of
    /// `#[tokio::main]`).
    pub async fn execute(&self, call: &ToolCall, ctx: &ToolContext) -> Execution {
        let (conversation_id, session_id) = ctx.shared_ids();
        let ids = EnvelopeIds {
            tool_call_id: call.id.clone(),
            conversation_id,
            session_id,
        };
        let Some(entry) = self.catalog.entry(&call.name) else {
            return self.unknown_tool(call, ids);
        };
        let definition = entry.definition;
        let span = tracing::info_span!(
            "tool_call",
            tool = definition.name(),
            tool_call_id = &*call.id,
            conversation_id = ctx.conversation_id().unwrap_or_default(),
        );
        let outcome = self
            .dispatch(entry, call, ctx, ids, false)
            .instrument(span)
            .await;
        Execution {
            tool_call_id: call.id.clone(),
            name: Cow::Borrowed(definition.name()),
            executor: Some(definition.executor()),
            outcome,
        }
    }

    /// Executes a call a person has approved: the approval gate is passed,
    /// so a server tool runs and a client tool prepares its payload for the
    /// client. The arguments are validated again: an approver may have
    /// changed them. Tools without an approval gate behave as in
    /// [`Executor::execute`].
    pub async fn execute_approved(&self, call: &ToolCall, ctx: &ToolContext) -> Execution {
        let (conversation_id, session_id) = ctx.shared_ids();
        let ids = EnvelopeIds {
            tool_call_id: call.id.clone(),
            conversation_id,
            session_id,
        };
        let Some(entry) = self.catalog.entry(&call.name) else {
            return self.unknown_tool(call, ids);
        };
        let definition = entry.definition;
        let span = tracing::info_span!(
            "tool_call",
            tool = definition.name(),
            tool_call_id = &*call.id,
            conversation_id = ctx.conversation_id().unwrap_or_default(),
            approved = true,
        );
        let outcome = self
            .dispatch(entry, call, ctx, ids, true)
            .instrument(span)
            .await;
        Execution {
            tool_call_id: call.id.clone(),
            name: Cow::Borrowed(definition.name()),
            executor: Some(definition.executor()),
            outcome,
        }
    }

    async fn dispatch(
        &self,
        entry: Entry,
        call: &ToolCall,
        ctx: &ToolContext,
        ids: EnvelopeIds,
        approved: bool,
    ) -> Outcome {
        let definition = entry.definition;
        let approval = if approved {
            Approval::Auto
        } else {
            definition.approval()
        };
        let mode = (definition.executor(), approval);
        let result = match mode {
            (ExecutorKind::Provider, _) => return Outcome::PassThrough,
            // Approval comes before any server code runs: only validate now,
            // so that an approver sees valid arguments and nothing happens
            // until they agree.
            (ExecutorKind::Server | ExecutorKind::Client, Approval::RequiresApproval) => {
                std::panic::catch_unwind(AssertUnwindSafe(|| {
                    entry.tool.validate_only(&call.arguments)
                }))
                .map_err(Guarded::Panicked)
                .and_then(|inner| inner.map_err(Guarded::Failed))
            }
            _ => self.guarded_run(entry, call, ctx).await,
        };
        let payload = match result {
            Ok(payload) => payload,
            Err(failure) => return Outcome::Final(failure_envelope(definition, ids, failure)),
        };
        let (reason, then) = match mode {
            (ExecutorKind::Server, Approval::Auto) => {
                return Outcome::Final(Envelope::ok(ids, payload));
            }
            (ExecutorKind::Provider, _) => return Outcome::PassThrough,
            (ExecutorKind::Server, Approval::RequiresApproval) => (AwaitReason::Approval, None),
            (ExecutorKind::Client, Approval::RequiresApproval) => {
                (AwaitReason::Approval, Some(AwaitReason::Client))
            }
            (ExecutorKind::Client, Approval::Auto) => (AwaitReason::Client, None),
            (ExecutorKind::Human, _) => (AwaitReason::Human, None),
        };
        Outcome::Awaiting(Awaiting {
            reason,
            then,
            payload,
        })
    }

    async fn guarded_run(
        &self,
        entry: Entry,
        call: &ToolCall,
        ctx: &ToolContext,
    ) -> Result<JsonText, Guarded> {
        let token = ctx.cancellation();
        if token.is_cancelled() {
            return Err(Guarded::Cancelled);
        }
        let call_ctx = ctx.clone().with_tool_call_id(call.id.clone());
        let run = AssertUnwindSafe(entry.tool.run(&call.arguments, &call_ctx)).catch_unwind();
        let mut run = std::pin::pin!(run);
        let settle =
            |result: Result<Result<JsonText, RunFailure>, Box<dyn Any + Send>>| match result {
                Ok(inner) => inner.map_err(Guarded::Failed),
                Err(panic) => Err(Guarded::Panicked(panic)),
            };
        // Most calls finish without waiting on anything: poll once before
        // arming a timer and a cancellation listener, which cost more than
        // such a call. A call that does wait gets both, from here on; a
        // limit can only interrupt a tool at an await point in any case.
        let first = std::future::poll_fn(|cx| Poll::Ready(run.as_mut().poll(cx))).await;
        if let Poll::Ready(result) = first {
            return settle(result);
        }
        let cancellable = async {
            tokio::select! {
                biased;
                result = &mut run => settle(result),
                () = token.cancelled() => Err(Guarded::Cancelled),
            }
        };
        match entry.definition.timeout().or(self.default_timeout) {
            Some(limit) => tokio::time::timeout(limit, cancellable)
                .await
                .unwrap_or(Err(Guarded::TimedOut(limit))),
            None => cancellable.await,
        }
    }

    fn unknown_tool(&self, call: &ToolCall, ids: EnvelopeIds) -> Execution {
        let available: Vec<&str> = self.catalog.names().collect();
        tracing::warn!(tool = %call.name, tool_call_id = &*call.id, "model called an unknown tool");
        let suggestion = closest_name(&call.name, &available)
            .map(|name| format!(" Did you mean `{name}`?"))
            .unwrap_or_default();
        let message = format!(
            "There is no tool named `{}`.{suggestion} Available tools: {}.",
            call.name,
            if available.is_empty() {
                "none".to_owned()
            } else {
                available.join(", ")
            }
        );
        let envelope = Envelope::error_with(
            ids,
            EnvelopeError {
                code: ErrorCode::UnknownTool,
                message,
                details: Some(json!({ "available": available })),
            },
        );
        Execution {
            tool_call_id: call.id.clone(),
            name: Cow::Owned(call.name.clone()),
            executor: None,
            outcome: Outcome::Final(envelope),
        }
    }
}

/// The available name nearest to `wanted`, if it is near enough to be a
/// typo (edit distance at most a third of the name, and at most 3).
fn closest_name<'a>(wanted: &str, available: &[&'a str]) -> Option<&'a str> {
    let wanted: Vec<char> = wanted.to_lowercase().chars().collect();
    let limit = (wanted.len() / 3).clamp(1, 3);
    available
        .iter()
        .map(|name| {
            (
                edit_distance(&wanted, &name.to_lowercase().chars().collect::<Vec<_>>()),
                *name,
            )
        })
        .filter(|(distance, _)| *distance <= limit)
        .min()
        .map(|(_, name)| name)
}

/// Levenshtein distance over characters; names are short, so O(n·m) is fine.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

/// Every way a guarded run can fail.
enum Guarded {
    Failed(RunFailure),
    Panicked(Box<dyn Any + Send>),
    TimedOut(Duration),
    Cancelled,
}

fn panic_message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-string panic payload")
}

fn failure_envelope(definition: &ToolDefinition, ids: EnvelopeIds, failure: Guarded) -> Envelope {
    let (code, message, details) = match failure {
        Guarded::Failed(RunFailure::Rejected(rejection)) => {
            tracing::debug!(code = %rejection.code, "arguments rejected");
            (rejection.code, rejection.message, rejection.details)
        }
        Guarded::Failed(RunFailure::Tool(error)) if error.code() == ErrorCode::Internal => {
            tracing::error!(error = %error.message(), source = ?error.source(), "tool failed with an internal error");
            (ErrorCode::Internal, INTERNAL_MESSAGE.to_owned(), None)
        }
        Guarded::Failed(RunFailure::Tool(error)) => {
            tracing::info!(code = %error.code(), message = %error.message(), "tool returned an error");
            (error.code(), error.message().to_owned(), None)
        }
        Guarded::Panicked(panic) => {
            tracing::error!(panic = panic_message(panic.as_ref()), "tool panicked");
            (ErrorCode::Internal, INTERNAL_MESSAGE.to_owned(), None)
        }
        Guarded::TimedOut(limit) => {
            tracing::warn!(limit_ms = limit.as_millis() as u64, "tool timed out");
            (
                ErrorCode::Timeout,
                format!(
                    "The tool `{}` did not finish within {} and was stopped.",
                    definition.name(),
                    humanize(limit)
                ),
                None,
            )
        }
        Guarded::Cancelled => {
            tracing::info!("tool call cancelled");
            (
                ErrorCode::Cancelled,
                "The call was cancelled before it finished.".to_owned(),
                None,
            )
        }
    };
    Envelope::error_with(
        ids,
        EnvelopeError {
            code,
            message,
            details,
        },
    )
}

fn humanize(duration: Duration) -> String {
    if duration.subsec_nanos() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}

/// The erased form of a function tool. Generated code names it through
/// `aptix::__private`.
pub struct FnTool<T>(PhantomData<fn() -> T>);

impl<T> FnTool<T> {
    /// The one value of this zero-sized type, for `&'static` promotion.
    pub const NEW: Self = FnTool(PhantomData);
}

/// The erased form of a struct-form ("schema only") tool.
pub struct SchemaOnlyTool<T>(PhantomData<fn() -> T>);

impl<T> SchemaOnlyTool<T> {
    /// The one value of this zero-sized type, for `&'static` promotion.
    pub const NEW: Self = SchemaOnlyTool(PhantomData);
}

fn definition_of<T: Tool>() -> Result<&'static ToolDefinition, RunFailure> {
    T::definition().map_err(|error: &DefinitionError| {
        RunFailure::Tool(ToolError::internal_message(error.to_string()))
    })
}

/// Validates and returns the arguments text itself as the payload.
fn validated_payload<T: Tool>(raw: &str) -> Result<JsonText, RunFailure> {
    let definition = definition_of::<T>()?;
    let value: serde_json::Value = definition
        .validator()
        .parse(raw)
        .map_err(RunFailure::Rejected)?;
    // The typed parse proves the arguments fit the Rust type too.
    <<T::Args as ToolArgs>::Serde as serde::Deserialize>::deserialize(&value).map_err(|error| {
        RunFailure::Tool(ToolError::invalid_arguments(format!(
            "The arguments do not match the tool's parameters: {error}"
        )))
    })?;
    JsonText::from_serialize(&value).map_err(|error| RunFailure::Tool(ToolError::internal(error)))
}

impl<T: ToolFn> DynTool for FnTool<T> {
    fn name(&self) -> &'static str {
        T::NAME
    }

    fn source(&self) -> SourceLocation {
        T::SOURCE
    }

    fn definition(&self) -> Result<&'static ToolDefinition, &'static DefinitionError> {
        T::definition()
    }

    fn run<'a>(
        &'a self,
        raw: &'a str,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<JsonText, RunFailure>> {
        Box::pin(async move {
            let definition = definition_of::<T>()?;
            let args: <T::Args as ToolArgs>::Serde = definition
                .validator()
                .parse(raw)
                .map_err(RunFailure::Rejected)?;
            let output = T::call(args.into(), ctx).await.map_err(RunFailure::Tool)?;
            let output = <T::Returned as ToolOutput>::Serde::from(output);
            JsonText::from_serialize(&output)
                .map_err(|error| RunFailure::Tool(ToolError::internal(error)))
        })
    }

    fn validate_only(&self, raw: &str) -> Result<JsonText, RunFailure> {
        validated_payload::<T>(raw)
    }
}

impl<T: Tool> DynTool for SchemaOnlyTool<T> {
    fn name(&self) -> &'static str {
        T::NAME
    }

    fn source(&self) -> SourceLocation {
        T::SOURCE
    }

    fn definition(&self) -> Result<&'static ToolDefinition, &'static DefinitionError> {
        T::definition()
    }

    fn run<'a>(
        &'a self,
        raw: &'a str,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<JsonText, RunFailure>> {
        Box::pin(async move { validated_payload::<T>(raw) })
    }

    fn validate_only(&self, raw: &str) -> Result<JsonText, RunFailure> {
        validated_payload::<T>(raw)
    }
}
