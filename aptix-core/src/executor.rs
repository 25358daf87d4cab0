//! The executor: one tool call in, one outcome out, whatever happens.
//!
//! It finds the tool, validates the arguments against the schema the model
//! saw, runs the server step, and turns every result, error, panic, time-out
//! and cancellation into an [`Outcome`]. Nothing escapes it: a tool
//! failure is data for the model, never a crash of the agent.

use std::any::Any;
use std::borrow::Cow;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use serde_json::json;
use tracing::Instrument;

use crate::catalog::Catalog;
use crate::catalog::erased::{Produced, RunFailure, RunFuture, RunOutput};
use crate::context::ToolContext;
use crate::definition::ToolDefinition;
use crate::envelope::{Envelope, EnvelopeError, EnvelopeIds, JsonText};
use crate::error::{ErrorCode, INTERNAL_MESSAGE};
use crate::meta::{AwaitReason, ExecutorKind, Gate, ServerStep, route};

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

/// What came of one call.
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

    /// The envelope of a finished call, taken out of the execution (its
    /// JSON can then be taken with [`Envelope::into_json_string`], without
    /// a copy).
    pub fn into_envelope(self) -> Option<Envelope> {
        match self.outcome {
            Outcome::Final(envelope) => Some(envelope),
            _ => None,
        }
    }

    /// Whether a server-side tool mediated the call:
    /// true for every catalogued tool except provider tools.
    pub fn is_server_tool(&self) -> bool {
        matches!(
            self.executor,
            Some(
                ExecutorKind::Server
                    | ExecutorKind::Client
                    | ExecutorKind::Human
                    | ExecutorKind::Latent
            )
        )
    }

    /// Whether the server step completed: a
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

    /// The time limit for tools that declare none (`None`: no limit).
    pub fn default_timeout(&self) -> Option<Duration> {
        self.default_timeout
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
    // Written out as `fn … -> impl Future` (what `async fn` means) so that
    // the call's future is not wrapped, and copied, once more.
    pub fn execute(
        &self,
        call: &ToolCall,
        ctx: &ToolContext,
    ) -> impl Future<Output = Execution> + Send {
        self.execute_call(call, ctx, Gate::Declared)
    }

    /// Executes a call as if its tool required an approval: what an
    /// approval policy that answers "ask" makes of a tool declared `auto`.
    /// A server tool's arguments are only validated and a client tool's
    /// preflight shapes its payload; then the call waits for an approval
    /// ([`Outcome::Awaiting`] with [`AwaitReason::Approval`]). Human and
    /// provider tools behave as in [`Executor::execute`]: a person answers
    /// the one anyway, the provider runs the other.
    pub fn execute_asking_approval(
        &self,
        call: &ToolCall,
        ctx: &ToolContext,
    ) -> impl Future<Output = Execution> + Send {
        self.execute_call(call, ctx, Gate::Asked)
    }

    /// Executes a call through `gate`: [`Executor::execute`],
    /// [`Executor::execute_asking_approval`] or
    /// [`Executor::execute_approved`] as one future type, for the loop and
    /// the ledger, which learn the gate per call.
    pub(crate) fn execute_gated(
        &self,
        call: &ToolCall,
        ctx: &ToolContext,
        gate: Gate,
    ) -> impl Future<Output = Execution> + Send {
        self.execute_call(call, ctx, gate)
    }

    /// Executes a call a person has approved: the approval gate is passed,
    /// so a server tool runs and a client tool prepares its payload for the
    /// client. The arguments are validated again: an approver may have
    /// changed them. Tools without an approval gate behave as in
    /// [`Executor::execute`].
    pub fn execute_approved(
        &self,
        call: &ToolCall,
        ctx: &ToolContext,
    ) -> impl Future<Output = Execution> + Send {
        // Routed alike whether or not the approver changed the arguments:
        // telling the model which ran is the ledger's.
        self.execute_call(call, ctx, Gate::Approved { changed: false })
    }

    // One state machine for the whole call: the tool's run is written out
    // here rather than awaited as a future of its own (`dispatch`, wrapped
    // in `Instrument` when a subscriber listens), because
    // every nested future is built and then copied into its caller's state
    // before it is first polled: that copy cost more than the catalog
    // lookup and the cancellation check together. The span is entered by
    // hand instead, around every poll of the tool and around the
    // synchronous work (validation for an approval, the failure's events).
    async fn execute_call(&self, call: &ToolCall, ctx: &ToolContext, gate: Gate) -> Execution {
        let Some(entry) = self.catalog.entry(&call.name) else {
            return self.unknown_tool(call, envelope_ids(call, ctx));
        };
        let definition = entry.definition();
        let span = call_span(definition, call, ctx, matches!(gate, Gate::Approved { .. }));
        let route = route(definition.executor(), gate.approval(definition.approval()));
        let result = match route.step {
            ServerStep::PassThrough => {
                return execution(call, definition, Outcome::PassThrough);
            }
            ServerStep::Validate => {
                let _entered = span.as_ref().map(tracing::Span::enter);
                std::panic::catch_unwind(AssertUnwindSafe(|| {
                    entry.code().validate_only(definition, &call.arguments)
                }))
                .map_err(Guarded::Panicked)
                .and_then(|inner| inner.map(Produced::from).map_err(Guarded::Failed))
            }
            ServerStep::Run => {
                // The guarded run, written out here rather than awaited as a
                // future of its own: one less future to copy per call.
                let token = ctx.cancellation();
                if token.is_cancelled() {
                    Err(Guarded::Cancelled)
                } else {
                    let call_ctx = ctx.for_call(&call.id, definition.context_name());
                    // Boxed already (`RunFuture`): polled in place, never moved.
                    let mut run = entry.code().run(definition, &call.arguments, &call_ctx);
                    // Most calls finish without waiting on anything: poll once
                    // before arming a timer and a cancellation listener, which
                    // cost more than such a call. A call that does wait gets
                    // both, from here on; a limit can only interrupt a tool at
                    // an await point in any case.
                    let first = std::future::poll_fn(|cx| {
                        let _entered = span.as_ref().map(tracing::Span::enter);
                        Poll::Ready(poll_caught(&mut run, cx))
                    })
                    .await;
                    match first {
                        Poll::Ready(result) => settle(result),
                        // Boxed so that the slow path's timer and listener do
                        // not make the future of every call bigger.
                        Poll::Pending => {
                            let limit = definition.timeout().or(self.default_timeout);
                            let waiting = wait_guarded(&mut run, token, limit);
                            match &span {
                                None => Box::pin(waiting).await,
                                Some(span) => Box::pin(waiting.instrument(span.clone())).await,
                            }
                        }
                    }
                }
            }
        };
        // A transient failure of a call that is safe to repeat: run it
        // again, with backoff, before anyone sees the failure. Cold, so
        // boxed: no other call's future grows.
        let result = match result {
            Err(Guarded::Failed(RunFailure::Tool(error)))
                if error.is_transient() && definition.idempotent() =>
            {
                let again = self.run_again(entry, definition, call, ctx, error);
                match &span {
                    None => Box::pin(again).await,
                    Some(span) => Box::pin(again.instrument(span.clone())).await,
                }
            }
            other => other,
        };
        // No await from here on: the span stays entered to the end.
        let _entered = span.as_ref().map(tracing::Span::enter);
        let ids = envelope_ids(call, ctx);
        let produced = match result {
            Ok(produced) => produced,
            Err(failure) => {
                let envelope = failure_envelope(definition, ids, failure, span.is_some());
                return execution(call, definition, Outcome::Final(envelope));
            }
        };
        let Some(reason) = route.awaits else {
            let mut envelope = Envelope::ok(ids, produced.json);
            if let Some(attachments) = produced.attachments {
                envelope = envelope.with_attachments(*attachments);
            }
            return execution(call, definition, Outcome::Final(envelope));
        };
        // A preflight's attachments have no one to reach: the payload goes
        // to an approver, a client or a person, and the model sees the
        // final result, which the preflight does not make.
        let payload = produced.json;
        let then = route.then;
        let awaiting = Awaiting {
            reason,
            then,
            payload,
        };
        execution(call, definition, Outcome::Awaiting(awaiting))
    }

    /// Runs an idempotent call again after a transient failure, up to
    /// [`TRANSIENT_RETRIES`] times, waiting 50, 100, 200 ms between tries;
    /// the last failure is what remains when every try failed.
    async fn run_again(
        &self,
        entry: &crate::catalog::ToolEntry,
        definition: &ToolDefinition,
        call: &ToolCall,
        ctx: &ToolContext,
        mut error: crate::error::ToolError,
    ) -> Result<Produced, Guarded> {
        let limit = definition.timeout().or(self.default_timeout);
        let token = ctx.cancellation();
        let call_ctx = ctx.for_call(&call.id, definition.context_name());
        for attempt in 0..TRANSIENT_RETRIES {
            let backoff = TRANSIENT_BACKOFF * 2u32.pow(attempt);
            tracing::info!(
                attempt = attempt + 1,
                backoff_ms = backoff.as_millis() as u64,
                "a transient failure of an idempotent tool; the call runs again"
            );
            if token
                .run_until_cancelled(tokio::time::sleep(backoff))
                .await
                .is_none()
            {
                return Err(Guarded::Cancelled);
            }
            let mut run = entry.code().run(definition, &call.arguments, &call_ctx);
            match wait_guarded(&mut run, token, limit).await {
                Err(Guarded::Failed(RunFailure::Tool(next))) if next.is_transient() => {
                    error = next;
                }
                other => return other,
            }
        }
        Err(Guarded::Failed(RunFailure::Tool(error)))
    }

    fn unknown_tool(&self, call: &ToolCall, ids: EnvelopeIds) -> Execution {
        let available: Vec<&str> = self.catalog.names().collect();
        let shown = echoed_name(&call.name);
        tracing::warn!(
            tool = %shown,
            tool_call_id = &*call.id,
            conversation_id = ids.conversation_id.as_deref(),
            session_id = ids.session_id.as_deref(),
            "model called an unknown tool"
        );
        let suggestion = closest_name(&call.name, &available)
            .map(|name| format!(" Did you mean `{name}`?"))
            .unwrap_or_default();
        let message = format!(
            "There is no tool named `{shown}`.{suggestion} Available tools: {}.",
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

/// The execution of `call` of the catalogued tool `definition`.
fn execution(call: &ToolCall, definition: &ToolDefinition, outcome: Outcome) -> Execution {
    Execution {
        tool_call_id: call.id.clone(),
        name: definition.shared_name(),
        executor: Some(definition.executor()),
        outcome,
    }
}

/// The `tool_call` span of one call, carrying the tool name, the call id and
/// the conversation id.
///
/// `None` when no subscriber wants `INFO` spans: building and entering a
/// disabled span still costs a good share of a small call, and more when
/// another crate turns on tracing's `log` feature (the span then reports
/// itself to the `log` crate, which nobody reads without a subscriber).
fn call_span(
    definition: &ToolDefinition,
    call: &ToolCall,
    ctx: &ToolContext,
    approved: bool,
) -> Option<tracing::Span> {
    let wanted = tracing::Level::INFO <= tracing::level_filters::LevelFilter::current();
    if !wanted {
        return None;
    }
    let conversation_id = ctx.conversation_id().unwrap_or_default();
    let session_id = ctx.session_id().unwrap_or_default();
    let span = if approved {
        tracing::info_span!(
            "tool_call",
            tool = definition.name(),
            tool_call_id = &*call.id,
            conversation_id,
            session_id,
            approved = true,
        )
    } else {
        tracing::info_span!(
            "tool_call",
            tool = definition.name(),
            tool_call_id = &*call.id,
            conversation_id,
            session_id,
        )
    };
    Some(span)
}

/// The ids of the envelope of `call`.
fn envelope_ids(call: &ToolCall, ctx: &ToolContext) -> EnvelopeIds {
    let (conversation_id, session_id) = ctx.shared_ids();
    EnvelopeIds {
        tool_call_id: call.id.clone(),
        conversation_id,
        session_id,
    }
}

/// The most characters of an unknown tool name repeated back in its error
/// (the model wrote the name, so it can be any length).
const ECHOED_NAME_CHARS: usize = 64;

/// How many times an idempotent call is run again after a transient
/// failure, and the first wait (doubled each time).
pub const TRANSIENT_RETRIES: u32 = 3;
const TRANSIENT_BACKOFF: Duration = Duration::from_millis(50);

/// The longest an execution of a call with time limit `limit` per try can
/// take, its transient retries (when `idempotent`) and their waits included.
pub(crate) fn execution_budget(limit: Duration, idempotent: bool) -> Duration {
    if !idempotent {
        return limit;
    }
    let waits: Duration = (0..TRANSIENT_RETRIES)
        .map(|attempt| TRANSIENT_BACKOFF * 2u32.pow(attempt))
        .sum();
    // Saturating: a limit configured near `Duration::MAX` is no limit, not
    // an overflow.
    limit
        .saturating_mul(TRANSIENT_RETRIES + 1)
        .saturating_add(waits)
}

/// `name` as an unknown-tool error quotes it: cut after
/// [`ECHOED_NAME_CHARS`] characters, with `…` when it was cut.
fn echoed_name(name: &str) -> Cow<'_, str> {
    match name.char_indices().nth(ECHOED_NAME_CHARS) {
        None => Cow::Borrowed(name),
        Some((end, _)) => Cow::Owned(format!("{}…", &name[..end])),
    }
}

/// The available name nearest to `wanted`, if it is near enough to be a
/// typo (edit distance at most a third of the name, and at most 3).
///
/// Names whose lengths differ by more than that limit cannot be near
/// enough, so they are not compared at all: the work is bounded by the
/// catalog's names, whatever the length of `wanted`.
fn closest_name<'a>(wanted: &str, available: &[&'a str]) -> Option<&'a str> {
    const MOST_EDITS: usize = 3;
    let longest = available.iter().map(|name| name.chars().count()).max()?;
    // Lower-casing can change a character count, so the name is cut with
    // room to spare before it is lower-cased; a longer one is never near.
    let mut chars = wanted.chars();
    let head: String = chars.by_ref().take(longest + MOST_EDITS + 1).collect();
    if chars.next().is_some() {
        return None;
    }
    let wanted: Vec<char> = head.to_lowercase().chars().collect();
    let limit = (wanted.len() / 3).clamp(1, MOST_EDITS);
    available
        .iter()
        .filter_map(|name| {
            let name_chars: Vec<char> = name.to_lowercase().chars().collect();
            if name_chars.len().abs_diff(wanted.len()) > limit {
                return None;
            }
            Some((edit_distance(&wanted, &name_chars), *name))
        })
        .filter(|(distance, _)| *distance <= limit)
        .min()
        .map(|(_, name)| name)
}

/// Levenshtein distance over characters; both are at most a few characters
/// longer than a tool name, so O(n·m) is fine.
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

/// Polls `run` once, catching a panic (what `catch_unwind` on the future
/// would do, without moving the future into a wrapper).
fn poll_caught(
    run: &mut RunFuture<'_>,
    cx: &mut Context<'_>,
) -> Poll<Result<RunOutput, Box<dyn Any + Send>>> {
    match std::panic::catch_unwind(AssertUnwindSafe(|| run.as_mut().poll(cx))) {
        Ok(Poll::Ready(result)) => Poll::Ready(Ok(result)),
        Ok(Poll::Pending) => Poll::Pending,
        Err(panic) => Poll::Ready(Err(panic)),
    }
}

fn settle(result: Result<RunOutput, Box<dyn Any + Send>>) -> Result<Produced, Guarded> {
    match result {
        Ok(inner) => inner.map_err(Guarded::Failed),
        Err(panic) => Err(Guarded::Panicked(panic)),
    }
}

/// The rest of a call that did not finish on its first poll: under its
/// time limit, and stopped by cancellation.
async fn wait_guarded(
    run: &mut RunFuture<'_>,
    token: &tokio_util::sync::CancellationToken,
    limit: Option<Duration>,
) -> Result<Produced, Guarded> {
    // The call first: one that finishes as it is cancelled keeps its result.
    let cancellable = async {
        let polled = std::future::poll_fn(|cx| poll_caught(run, cx));
        match token.run_until_cancelled(polled).await {
            Some(result) => settle(result),
            None => Err(Guarded::Cancelled),
        }
    };
    match limit {
        Some(limit) => tokio::time::timeout(limit, cancellable)
            .await
            .unwrap_or(Err(Guarded::TimedOut(limit))),
        None => cancellable.await,
    }
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

/// The envelope of a failed call, and the event that reports the failure.
///
/// The `tool_call` span names the call only when `INFO` is wanted (see
/// [`call_span`]); without it (`in_span` false) the events carry the
/// tool, the call id, the conversation and the session themselves, so a
/// `WARN`-level log still tells which call failed. Failures are the cold
/// path: this costs nothing on a successful call.
fn failure_envelope(
    definition: &ToolDefinition,
    ids: EnvelopeIds,
    failure: Guarded,
    in_span: bool,
) -> Envelope {
    let own = !in_span;
    let tool = own.then_some(definition.name());
    let tool_call_id = own.then_some(&*ids.tool_call_id);
    let conversation_id = ids.conversation_id.as_deref().filter(|_| own);
    let session_id = ids.session_id.as_deref().filter(|_| own);
    let (code, message, details) = match failure {
        Guarded::Failed(RunFailure::Rejected(rejection)) => {
            tracing::debug!(
                tool,
                tool_call_id,
                conversation_id,
                session_id,
                code = %rejection.code,
                "arguments rejected"
            );
            (rejection.code, rejection.message, rejection.details)
        }
        Guarded::Failed(RunFailure::Tool(error)) if error.code() == ErrorCode::Internal => {
            tracing::error!(
                tool,
                tool_call_id,
                conversation_id,
                session_id,
                error = %error.message(),
                source = ?error.source(),
                "tool failed with an internal error"
            );
            (ErrorCode::Internal, INTERNAL_MESSAGE.to_owned(), None)
        }
        Guarded::Failed(RunFailure::Tool(error)) => {
            tracing::info!(
                tool,
                tool_call_id,
                conversation_id,
                session_id,
                code = %error.code(),
                message = %error.message(),
                "tool returned an error"
            );
            (error.code(), error.message().to_owned(), None)
        }
        Guarded::Panicked(panic) => {
            tracing::error!(
                tool,
                tool_call_id,
                conversation_id,
                session_id,
                panic = panic_message(panic.as_ref()),
                "tool panicked"
            );
            (ErrorCode::Internal, INTERNAL_MESSAGE.to_owned(), None)
        }
        Guarded::TimedOut(limit) => {
            tracing::warn!(
                tool,
                tool_call_id,
                conversation_id,
                session_id,
                limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
                "tool timed out"
            );
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
            tracing::info!(
                tool,
                tool_call_id,
                conversation_id,
                session_id,
                "tool call cancelled"
            );
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

/// A duration as the model reads it (a time limit, how long a wait lasted):
/// in the largest of hours, minutes or seconds it is a whole number of
/// ("2h", "5m", "90s"), else in milliseconds ("1500ms", "0ms"), so that
/// the text never rounds a limit the model may plan against.
pub(crate) fn humanize(duration: Duration) -> String {
    let secs = duration.as_secs();
    if secs == 0 || duration.subsec_nanos() != 0 {
        return format!("{}ms", duration.as_millis());
    }
    match secs {
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::humanize;

    #[test]
    fn humanize_names_whole_units_and_keeps_fractions_in_milliseconds() {
        let cases = [
            (Duration::from_secs(7200), "2h"),
            (Duration::from_secs(300), "5m"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_secs(3660), "61m"),
            (Duration::from_millis(1500), "1500ms"),
            (Duration::from_millis(50), "50ms"),
            (Duration::ZERO, "0ms"),
        ];
        for (duration, text) in cases {
            assert_eq!(humanize(duration), text, "{duration:?}");
        }
    }
}
