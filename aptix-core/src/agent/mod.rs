//! The agent loop (the seeds' Reasoner / chat graph): model → tool calls →
//! execute → feed back, until the model answers without tools, a call
//! suspends, the iteration limit is reached, or the run is cancelled.
//!
//! A run is a stream of [`AgentEvent`]s that ends with exactly one
//! [`AgentEvent::Done`], whatever happens. It borrows the [`Conversation`]
//! mutably and leaves it holding everything the run added, so the caller
//! persists it, or hands it to the next run.

mod call_ids;
pub mod durable;
mod ledger;
pub mod redact;
pub mod resolve;

pub use durable::{
    ClientAttachment, ConversationEvent, DEFAULT_CLIENT_GRACE, DEFAULT_LEASE,
    DEFAULT_SUSPEND_TIMEOUT, DEFAULT_SWEEP_INTERVAL, DurableError, PendingCall, Revival,
};
pub use resolve::{Resolution, ResolveError, Resolved};
// re-export kept while the tree moves
pub use crate::transcript::Conversation;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::catalog::Catalog;
use crate::context::ToolContext;
use crate::envelope::{Envelope, EnvelopeIds, JsonText};
use crate::error::ErrorCode;
use crate::executor::{Awaiting, Executor, Outcome, ToolCall};
use crate::model::assembly::{AssembledCall, CallStatus, TurnAssembler, TurnLimits};
use crate::model::{
    AssistantToolCall, ChatModel, ChatRequest, Message, ModelError, ToolChoice, Usage,
};
use crate::schema::{Dialect, DialectError, ToolDefinition};
use crate::store::Store;
use crate::tool::ExecutorKind;
use crate::tool::Redaction;
use durable::{Durable, DurableSettings};
use ledger::{Ledger, ResultText};

/// How many calls of one turn run, unless the builder says otherwise.
pub const DEFAULT_MAX_CALLS_PER_TURN: usize = 64;

/// How long one model call may take, unless the builder says otherwise.
pub const DEFAULT_MODEL_CALL_TIMEOUT: Duration = Duration::from_secs(600);

/// The events of one run. Boxed so that it is `Unpin`: `while let Some(event)
/// = events.next().await` works without pinning it first.
pub type AgentStream<'a> = std::pin::Pin<Box<dyn Stream<Item = AgentEvent> + Send + 'a>>;

/// What starts a run.
#[derive(Debug, Clone)]
pub enum Input {
    /// A new user message.
    User(String),
    /// Results of calls a previous run suspended on (from a client, a
    /// person, or after an approval), by tool call id.
    ToolResults(Vec<(String, Envelope)>),
    /// Nothing new: ask the model again.
    Continue,
}

/// A call a run stopped for.
///
/// Like every event, it shows the tool's declared secrets as
/// `"[redacted]"` (in `awaiting.payload` and in its `Debug`); whoever must
/// act on the call (the approver, the client) gets the real payload from
/// [`SuspendedCall::payload`] or [`SuspendedCall::unredacted_awaiting`]
/// (durable runs also from [`Agent::pending`]).
#[derive(Clone)]
pub struct SuspendedCall {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub name: String,
    /// Who it waits for, and the prepared payload with the tool's declared
    /// secrets redacted: safe to print and log, not to act on.
    pub awaiting: Awaiting,
    /// The real payload.
    payload: JsonText,
}

impl SuspendedCall {
    pub(crate) fn new(
        tool_call_id: String,
        name: String,
        mut awaiting: Awaiting,
        redaction: Redaction,
    ) -> Self {
        let shown = redact::redacted_payload(&awaiting.payload, redaction);
        let payload = std::mem::replace(&mut awaiting.payload, shown);
        SuspendedCall {
            tool_call_id,
            name,
            awaiting,
            payload,
        }
    }

    /// The real payload, secrets included: what the approver must see or
    /// the client must execute. Do not log it.
    pub fn payload(&self) -> &JsonText {
        &self.payload
    }

    /// `awaiting` with the real payload: what to act on (e.g. to hand to
    /// [`Executor::execute_approved`] once approved). Do not log it.
    pub fn unredacted_awaiting(&self) -> Awaiting {
        Awaiting {
            payload: self.payload.clone(),
            ..self.awaiting.clone()
        }
    }
}

impl std::fmt::Debug for SuspendedCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SuspendedCall")
            .field("tool_call_id", &self.tool_call_id)
            .field("name", &self.name)
            .field("awaiting", &self.awaiting)
            .finish_non_exhaustive()
    }
}

/// Why a run ended.
#[derive(Debug, Clone)]
pub enum DoneReason {
    /// The model answered without calling tools.
    Completed,
    /// Calls wait for an approval, a client or a person.
    Suspended(Vec<SuspendedCall>),
    /// The iteration limit was reached.
    MaxIterations,
    /// The run was cancelled.
    Cancelled,
    /// The model could not be reached or broke its protocol.
    ModelError(ModelError),
    /// The conversation store failed (durable runs only); what was saved
    /// before stays, the conversation is left for another run to continue
    /// (the deadline worker does so within a sweep, or call
    /// [`Agent::ensure_started`]), and calls left unanswered are settled
    /// before any new input.
    StoreFailed(String),
    /// A model turn went past a bound set on the builder (the message names
    /// it): the model call was ended and the turn is not kept.
    LimitExceeded(String),
    /// Results handed in with [`Input::ToolResults`] were refused (the
    /// message names the call and the problem); the conversation is as it
    /// was, so the corrected results can be handed in again.
    InvalidToolResults(String),
}

/// What a run reports as it goes.
#[derive(Debug, Clone)]
pub enum AgentEvent {
    /// More answer text.
    TextDelta(String),
    /// A tool call the model made; `arguments` are redacted for display.
    ToolCallStart {
        /// The call's id, the same in its result.
        id: String,
        /// The tool name.
        name: String,
        /// The arguments (parsed when they are JSON), secrets redacted.
        arguments: Value,
    },
    /// The result of a call that finished; the envelope is redacted.
    ToolCallResult {
        /// The call's id.
        id: String,
        /// The tool name.
        name: String,
        /// The envelope, secrets redacted.
        envelope: Value,
    },
    /// The end of the run: always the last event, exactly once.
    Done {
        /// Why the run ended.
        reason: DoneReason,
        /// Tokens used by every model call of the run.
        usage: Usage,
    },
}

/// Why an agent could not be built.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// No model was given.
    #[error("the agent has no model: call `.model(...)`")]
    NoModel,
    /// No catalog was given.
    #[error("the agent has no tool catalog: call `.catalog(...)`")]
    NoCatalog,
    /// A tool cannot be expressed in the model's dialect.
    #[error(transparent)]
    Dialect(#[from] DialectError),
    /// A tool runs at the model provider, and this model does not host it.
    #[error(
        "the tool `{tool}` runs at the model provider, which this model does not host (see `ChatModel::hosts_tool`); leave it out of the agent's catalog"
    )]
    ProviderTool {
        /// The tool's name.
        tool: String,
    },
}

/// Builds an [`Agent`].
#[must_use]
pub struct AgentBuilder {
    model: Option<Arc<dyn ChatModel>>,
    catalog: Option<Catalog>,
    context: ToolContext,
    settings: Settings,
    executor: Option<Box<dyn FnOnce(Executor) -> Executor>>,
    store: Option<Arc<dyn Store>>,
    durable: DurableSettings,
}

/// How each run behaves; set on the builder, fixed once built.
#[derive(Debug, Clone)]
struct Settings {
    max_iterations: usize,
    tool_concurrency: usize,
    tool_choice: ToolChoice,
    parallel_tool_calls: bool,
    max_tokens: Option<u32>,
    temperature: Option<f32>,
    limits: TurnLimits,
    max_calls_per_turn: usize,
    model_call_timeout: Option<Duration>,
    tool_timeout: Option<Duration>,
}

impl AgentBuilder {
    /// The model to drive.
    pub fn model(mut self, model: impl ChatModel + 'static) -> Self {
        self.model = Some(Arc::new(model));
        self
    }

    /// The model to drive, shared.
    pub fn shared_model(mut self, model: Arc<dyn ChatModel>) -> Self {
        self.model = Some(model);
        self
    }

    /// The tools the model may call.
    pub fn catalog(mut self, catalog: Catalog) -> Self {
        self.catalog = Some(catalog);
        self
    }

    /// The base context of every tool call: typed state such as pools and
    /// clients. Ids and cancellation are set per run.
    pub fn context(mut self, context: ToolContext) -> Self {
        self.context = context;
        self
    }

    /// The most model calls in one run (default 10).
    pub fn max_iterations(mut self, iterations: usize) -> Self {
        self.settings.max_iterations = iterations.max(1);
        self
    }

    /// How many tool calls of one turn run at once (default 4).
    pub fn tool_concurrency(mut self, concurrency: usize) -> Self {
        self.settings.tool_concurrency = concurrency.max(1);
        self
    }

    /// Which tools the model may call (default `Auto`).
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.settings.tool_choice = choice;
        self
    }

    /// Whether the model may call several tools in one turn (default true).
    pub fn parallel_tool_calls(mut self, parallel: bool) -> Self {
        self.settings.parallel_tool_calls = parallel;
        self
    }

    /// The most tokens per model call.
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.settings.max_tokens = Some(max_tokens);
        self
    }

    /// Sampling temperature.
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.settings.temperature = Some(temperature);
        self
    }

    /// The most bytes one model turn may stream that are kept: its text, its
    /// thinking blocks and every call's id, name and arguments (default
    /// 8 MiB). Past it the
    /// model call is ended and the run ends with
    /// [`DoneReason::LimitExceeded`], so a model stuck in a loop, or a
    /// hostile endpoint, cannot grow memory without bound.
    pub fn max_turn_bytes(mut self, bytes: usize) -> Self {
        self.settings.limits.turn_bytes = bytes;
        self
    }

    /// The most bytes of arguments one tool call may have (default 1 MiB).
    /// Past it the model call is ended, as for
    /// [`AgentBuilder::max_turn_bytes`].
    pub fn max_call_argument_bytes(mut self, bytes: usize) -> Self {
        self.settings.limits.argument_bytes = bytes;
        self
    }

    /// The most tool calls of one turn that run (default 64). The calls past
    /// it are answered with an error result without running, which tells
    /// the model to make them again in a later turn.
    pub fn max_calls_per_turn(mut self, calls: usize) -> Self {
        self.settings.max_calls_per_turn = calls.max(1);
        self
    }

    /// The longest one model call may take, first byte to last (default
    /// 10 minutes; `None`: no limit). Past it the run ends with
    /// [`ModelError::Timeout`]. The adapters' HTTP timeouts only bound the
    /// gap between two events; this bounds the whole turn.
    pub fn model_call_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.settings.model_call_timeout = timeout.into();
        self
    }

    /// The time limit of a call whose tool declares no `timeout` (default
    /// [`crate::executor::DEFAULT_TIMEOUT`]; `None`: no limit). Each call
    /// runs in a task of its own and the limit is kept from outside that
    /// task, so it holds even for a tool that blocks its thread.
    pub fn tool_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.settings.tool_timeout = timeout.into();
        self
    }

    /// Makes conversations durable: suspended calls, transcripts and
    /// deadlines live in `store`, so they survive restarts and can be
    /// resolved from any process sharing it (see [`Agent::send`],
    /// [`Agent::resolve`], [`Agent::ensure_started`]).
    pub fn store(self, store: impl Store) -> Self {
        self.shared_store(Arc::new(store))
    }

    /// Like [`AgentBuilder::store`], with a store shared with other code.
    pub fn shared_store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// How long a suspended call waits when its tool declares no
    /// `suspend_timeout` (default 15 minutes). Applies once a store is set.
    pub fn suspend_timeout(mut self, timeout: Duration) -> Self {
        self.durable.suspend_timeout = timeout;
        self
    }

    /// How long a client call waits when no client is attached to its
    /// conversation (default 10 s), so that a headless run fails fast
    /// instead of parking. Applies once a store is set.
    pub fn client_grace(mut self, grace: Duration) -> Self {
        self.durable.client_grace = grace;
        self
    }

    /// How long this process holds a conversation between two saves before
    /// another may take it over after a crash (default 2 minutes). Needs a
    /// store.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.durable.lease = lease;
        self
    }

    /// Whether [`Agent::resolve`] starts the next turn in this process
    /// (default true). Turn it off in a process that only records
    /// resolutions (a short-lived CLI, a webhook that must not run model
    /// calls); the process that runs the conversation then picks it up
    /// with [`Agent::ensure_started`]. Applies once a store is set.
    pub fn resume_on_resolve(mut self, resume: bool) -> Self {
        self.durable.resume_on_resolve = resume;
        self
    }

    /// The name this process holds conversations under (default: random
    /// per agent). Applies once a store is set.
    pub fn instance_id(mut self, id: impl Into<String>) -> Self {
        self.durable.owner = Some(id.into());
        self
    }

    /// How often this agent sweeps the store for deadlines that passed,
    /// conversations a dead process held, and resolved conversations that
    /// nobody resumed (see [`Agent::sweep_deadlines`]). Default: every
    /// [`DEFAULT_SWEEP_INTERVAL`](durable::DEFAULT_SWEEP_INTERVAL), or every
    /// half lease if that is shorter, when
    /// [`AgentBuilder::resume_on_resolve`] is on, none when it is off (a
    /// process that must not run model calls must not resume conversations
    /// either). `None` turns the worker off; the application then calls
    /// [`Agent::sweep_deadlines`] itself. Applies once a store is set.
    pub fn deadline_worker(mut self, every: Option<Duration>) -> Self {
        self.durable.sweep_every = Some(every);
        self
    }

    /// Adjusts the executor (e.g. its default time limit).
    pub fn configure_executor(
        mut self,
        configure: impl FnOnce(Executor) -> Executor + 'static,
    ) -> Self {
        self.executor = Some(Box::new(configure));
        self
    }

    /// Lowers every tool to the model's dialect once, and builds the agent.
    pub fn build(self) -> Result<Agent, AgentError> {
        let model = self.model.ok_or(AgentError::NoModel)?;
        let catalog = self.catalog.ok_or(AgentError::NoCatalog)?;
        if let Some(refused) = catalog.definitions().find(|definition| {
            definition.executor() == ExecutorKind::Provider && !model.hosts_tool(definition.name())
        }) {
            return Err(AgentError::ProviderTool {
                tool: refused.name().to_owned(),
            });
        }
        let tools = lower_for_model(&catalog, model.dialect())?;
        let mut executor = Executor::new(catalog).with_default_timeout(self.settings.tool_timeout);
        if let Some(configure) = self.executor {
            executor = configure(executor);
        }
        let agent = Agent {
            inner: Arc::new(Inner {
                model,
                executor,
                tools: tools.into(),
                context: self.context,
                settings: self.settings,
                durable: self.store.map(|store| Durable::new(store, self.durable)),
            }),
        };
        // Deadlines fire without the application running a sweeper.
        agent.ensure_deadline_worker();
        Ok(agent)
    }
}

/// A model, a catalog and the loop between them. Cheap to clone.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

struct Inner {
    model: Arc<dyn ChatModel>,
    executor: Executor,
    tools: Arc<[Value]>,
    context: ToolContext,
    settings: Settings,
    durable: Option<Durable>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("catalog", self.inner.executor.catalog())
            .field("max_iterations", &self.inner.settings.max_iterations)
            .field("tool_concurrency", &self.inner.settings.tool_concurrency)
            .finish()
    }
}

/// What one executed call contributes to the transcript and the events.
struct Executed {
    id: String,
    name: String,
    result: CallResult,
}

pub(crate) enum CallResult {
    Finished(ResultText),
    Suspended(Awaiting),
}

impl Agent {
    /// Starts building an agent.
    pub fn builder() -> AgentBuilder {
        AgentBuilder {
            model: None,
            catalog: None,
            context: ToolContext::new(),
            settings: Settings {
                max_iterations: 10,
                tool_concurrency: 4,
                tool_choice: ToolChoice::Auto,
                parallel_tool_calls: true,
                max_tokens: None,
                temperature: None,
                limits: TurnLimits::default(),
                max_calls_per_turn: DEFAULT_MAX_CALLS_PER_TURN,
                model_call_timeout: Some(DEFAULT_MODEL_CALL_TIMEOUT),
                tool_timeout: Some(crate::executor::DEFAULT_TIMEOUT),
            },
            executor: None,
            store: None,
            durable: DurableSettings::default(),
        }
    }

    /// The executor the loop dispatches through.
    pub fn executor(&self) -> &Executor {
        &self.inner.executor
    }

    /// Runs the loop on `conversation` with `input`, until it ends.
    pub fn run<'a>(
        &'a self,
        conversation: &'a mut Conversation,
        input: Input,
    ) -> impl Stream<Item = AgentEvent> + Send + 'a {
        self.run_with_cancellation(conversation, input, CancellationToken::new())
    }

    /// Like [`Agent::run`], stopping early when `cancellation` is cancelled.
    pub fn run_with_cancellation<'a>(
        &'a self,
        conversation: &'a mut Conversation,
        input: Input,
        cancellation: CancellationToken,
    ) -> AgentStream<'a> {
        self.run_loop(conversation, input, cancellation, None)
    }

    /// The tool context of a run: the agent's base context with the
    /// conversation's ids and the run's cancellation.
    fn context_for(
        &self,
        conversation: &Conversation,
        cancellation: &CancellationToken,
    ) -> ToolContext {
        let mut context = self
            .inner
            .context
            .clone()
            .with_conversation_id(conversation.id.as_str())
            .with_cancellation(cancellation.clone());
        if let Some(session) = &conversation.session_id {
            context = context.with_session_id(session.as_str());
        }
        context
    }

    /// The loop itself. With a `ledger` (durable runs) every call is
    /// recorded in the store and the transcript is saved after every turn.
    fn run_loop<'a>(
        &'a self,
        conversation: &'a mut Conversation,
        input: Input,
        cancellation: CancellationToken,
        ledger: Option<Ledger<'a>>,
    ) -> AgentStream<'a> {
        let inner = &*self.inner;
        let span = tracing::info_span!(
            "agent_run",
            conversation_id = %conversation.id,
            catalog_fingerprint = %inner.executor.catalog().fingerprint(),
        );
        let started = Instant::now();
        let stream = async_stream::stream! {
            let mut usage = Usage::default();
            let mut tool_calls = 0usize;
            let context = self.context_for(conversation, &cancellation);
            let mut refused = None;
            match input {
                Input::User(text) => conversation.messages.push(Message::user(text)),
                Input::ToolResults(results) => match self.check_results(&conversation.messages, &results) {
                    Ok(()) => append_results(conversation, results),
                    Err(problem) => {
                        tracing::warn!(%problem, "results handed in were refused");
                        refused = Some(problem);
                    }
                },
                Input::Continue => {}
            }
            let (mut reason, iterations) = match refused {
                Some(problem) => (DoneReason::InvalidToolResults(problem), 0),
                None => (DoneReason::MaxIterations, inner.settings.max_iterations),
            };
            'turns: for iteration in 0..iterations {
                if cancellation.is_cancelled() {
                    reason = DoneReason::Cancelled;
                    break;
                }
                let fixes = crate::transcript::repair(&mut conversation.messages, Some(conversation.id.as_str()));
                if fixes > 0 {
                    tracing::warn!(fixes, "repaired the transcript before the model request");
                }
                let request = ChatRequest {
                    messages: conversation.messages.clone(),
                    tools: inner.tools.clone(),
                    tool_choice: inner.settings.tool_choice.clone(),
                    parallel_tool_calls: inner.settings.parallel_tool_calls,
                    max_tokens: inner.settings.max_tokens,
                    temperature: inner.settings.temperature,
                };
                let model_span = tracing::info_span!("model_call", iteration);
                let model_started = Instant::now();
                let mut assembler = TurnAssembler::with_limits(inner.settings.limits);
                let mut events = inner.model.stream(&request);
                let model_deadline = model_deadline(inner.settings.model_call_timeout);
                tokio::pin!(model_deadline);
                loop {
                    let next = tokio::select! {
                        biased;
                        () = cancellation.cancelled() => {
                            reason = DoneReason::Cancelled;
                            break 'turns;
                        }
                        () = &mut model_deadline => {
                            model_span.in_scope(|| tracing::warn!(
                                limit_ms = inner.settings.model_call_timeout.map_or(0, |limit| limit.as_millis() as u64),
                                "the model call took too long and was ended"
                            ));
                            reason = DoneReason::ModelError(ModelError::Timeout);
                            break 'turns;
                        }
                        next = events.next().instrument(model_span.clone()) => next,
                    };
                    let Some(event) = next else { break };
                    match event {
                        Ok(event) => {
                            if let crate::model::ModelEvent::TextDelta(text) = &event {
                                yield AgentEvent::TextDelta(text.clone());
                            }
                            if let Err(error) = assembler.push(event) {
                                reason = match assembler.limit_exceeded() {
                                    Some(exceeded) => {
                                        model_span.in_scope(|| tracing::warn!(%exceeded, "the model turn went past a limit"));
                                        DoneReason::LimitExceeded(exceeded.to_string())
                                    }
                                    None => DoneReason::ModelError(error),
                                };
                                break 'turns;
                            }
                        }
                        Err(error) => {
                            reason = DoneReason::ModelError(error);
                            break 'turns;
                        }
                    }
                }
                drop(events);
                let mut turn = match assembler.finish() {
                    Ok(turn) => turn,
                    Err(error) => {
                        reason = DoneReason::ModelError(error);
                        break;
                    }
                };
                model_span.in_scope(|| tracing::info!(
                    elapsed_ms = model_started.elapsed().as_millis() as u64,
                    tool_calls = turn.tool_calls.len(),
                    finish = ?turn.finish_reason,
                    "model turn finished"
                ));
                if let Some(turn_usage) = turn.usage {
                    usage += turn_usage;
                }
                for (original, renamed) in call_ids::make_ids_unique(&mut turn.tool_calls, &conversation.messages) {
                    tracing::warn!(
                        model_id = %original,
                        id = %renamed,
                        "the model reused a tool call id; the call goes by a new one"
                    );
                }
                conversation.messages.push(Message::Assistant {
                    content: turn.text.clone(),
                    tool_calls: turn
                        .tool_calls
                        .iter()
                        .map(|call| AssistantToolCall {
                            id: call.id.clone(),
                            name: call.name.clone(),
                            arguments: call.arguments.clone(),
                        })
                        .collect(),
                    thinking: std::mem::take(&mut turn.thinking),
                });
                if turn.tool_calls.is_empty() {
                    reason = DoneReason::Completed;
                    break;
                }
                // The calls are in the store before any of them runs, so a
                // crash from here on is noticed and recovered.
                if let Some(ledger) = ledger
                    && let Err(error) = ledger.durable.save(conversation, crate::store::ConversationStatus::Running).await
                {
                    reason = DoneReason::StoreFailed(error.to_string());
                    break;
                }
                for call in &turn.tool_calls {
                    yield AgentEvent::ToolCallStart {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        arguments: redact::redacted_arguments(&call.arguments, self.redactions(&call.name)),
                    };
                }
                tool_calls += turn.tool_calls.len();
                let made = turn.tool_calls.len();
                let allowed = inner.settings.max_calls_per_turn;
                if made > allowed {
                    tracing::warn!(made, allowed, "the model made more calls in one turn than may run");
                }
                let mut executed = futures_util::stream::iter(turn.tool_calls.into_iter().enumerate())
                    .map(|(position, call)| {
                        let over = (position >= allowed).then_some((made, allowed));
                        self.execute_in_task(call, over, &context, conversation.id.as_str(), ledger.is_some())
                    })
                    .buffered(inner.settings.tool_concurrency);
                let mut suspended = Vec::new();
                while let Some(done) = executed.next().await {
                    match done.result {
                        CallResult::Finished(result) => {
                            yield AgentEvent::ToolCallResult {
                                id: done.id.clone(),
                                name: done.name.clone(),
                                envelope: redact::redacted_envelope(result.to_value(), self.redactions(&done.name)),
                            };
                            conversation.messages.push(Message::Tool {
                                tool_call_id: done.id,
                                name: done.name,
                                content: result.json,
                                is_error: !result.ok,
                            });
                        }
                        CallResult::Suspended(awaiting) => {
                            let redaction = self.redactions(&done.name);
                            suspended.push(SuspendedCall::new(done.id, done.name, awaiting, redaction));
                        }
                    }
                }
                drop(executed);
                // A suspending turn is saved once, by the durable run, as
                // `Suspended`; finished results are in the ledger meanwhile.
                if let Some(ledger) = ledger
                    && suspended.is_empty()
                    && let Err(error) = ledger.durable.save(conversation, crate::store::ConversationStatus::Running).await
                {
                    reason = DoneReason::StoreFailed(error.to_string());
                    break;
                }
                if !suspended.is_empty() {
                    reason = DoneReason::Suspended(suspended);
                    break;
                }
            }
            tracing::info!(
                tool_calls,
                input_tokens = usage.input_tokens,
                output_tokens = usage.output_tokens,
                elapsed_ms = started.elapsed().as_millis() as u64,
                reason = reason_name(&reason),
                "agent run finished"
            );
            yield AgentEvent::Done { reason, usage };
        };
        Box::pin(tracing_futures::Instrument::instrument(stream, span))
    }

    pub(crate) fn redactions(&self, name: &str) -> Redaction {
        self.inner
            .executor
            .catalog()
            .get(name)
            .map_or(Redaction::Undeclared, |definition| definition.redaction())
    }

    /// The time limit of a call of `name`, kept from outside its task.
    fn call_time_limit(&self, name: &str) -> Option<Duration> {
        self.inner
            .executor
            .catalog()
            .get(name)
            .and_then(ToolDefinition::timeout)
            .or(self.inner.executor.default_timeout())
    }

    /// Runs one call of a turn in a task of its own, so that a tool that
    /// blocks its thread (sync I/O, a CPU loop) stalls neither the other
    /// calls of the turn nor this call's time limit: the limit is kept here,
    /// outside the task, and answers `timeout` even while the tool's thread
    /// is still blocked (the task is aborted, and stops at its next await).
    /// `over` is `(calls made, calls allowed)` for a call past the turn's
    /// limit, which is answered without running.
    async fn execute_in_task(
        &self,
        call: AssembledCall,
        over: Option<(usize, usize)>,
        context: &ToolContext,
        conversation_id: &str,
        durable: bool,
    ) -> Executed {
        let ids = |id: &str| EnvelopeIds {
            tool_call_id: id.into(),
            conversation_id: Some(conversation_id.into()),
            session_id: context.session_id().map(Into::into),
        };
        let finished = |id: String, name: String, envelope: Envelope| Executed {
            id,
            name,
            result: CallResult::Finished(ResultText::from_envelope(envelope)),
        };
        if let Some((made, allowed)) = over {
            let envelope = Envelope::error(
                ids(&call.id),
                ErrorCode::Failed,
                format!(
                    "This turn made {made} tool calls and at most {allowed} run per turn, so this call was not run. Make it again in a later turn if it is still needed."
                ),
            );
            return finished(call.id, call.name, envelope);
        }
        let ledger = || {
            self.inner
                .durable
                .as_ref()
                .filter(|_| durable)
                .map(|durable| Ledger { durable })
        };
        if call.status != CallStatus::Complete || tokio::runtime::Handle::try_current().is_err() {
            // Nothing runs (or there is no runtime to spawn on): inline.
            return self.execute(call, context, conversation_id, ledger()).await;
        }
        let limit = self.call_time_limit(&call.name);
        let (id, name) = (call.id.clone(), call.name.clone());
        let task = {
            let agent = self.clone();
            let context = context.clone();
            let conversation_id = conversation_id.to_owned();
            tokio::spawn(async move {
                let ledger = agent
                    .inner
                    .durable
                    .as_ref()
                    .filter(|_| durable)
                    .map(|durable| Ledger { durable });
                agent
                    .execute(call, &context, &conversation_id, ledger)
                    .await
            })
        };
        let mut task = AbortOnDrop(task);
        // The grace lets a tool that does reach an await point be stopped
        // by the executor's own limit, which also records it in the ledger.
        let joined = match limit {
            Some(limit) => tokio::time::timeout(limit + TIMEOUT_GRACE, &mut task.0)
                .await
                .map_err(|_| limit),
            None => Ok((&mut task.0).await),
        };
        match joined {
            Ok(Ok(executed)) => executed,
            Ok(Err(error)) => {
                tracing::error!(%error, tool = %name, tool_call_id = %id, "the task running the call failed");
                let envelope = Envelope::error(
                    ids(&id),
                    ErrorCode::Internal,
                    crate::error::INTERNAL_MESSAGE,
                );
                finished(id, name, envelope)
            }
            Err(limit) => {
                task.0.abort();
                tracing::warn!(
                    tool = %name,
                    tool_call_id = %id,
                    limit_ms = limit.as_millis() as u64,
                    "tool timed out without yielding (it blocks its thread); its task is aborted"
                );
                let envelope = Envelope::error(
                    ids(&id),
                    ErrorCode::Timeout,
                    format!(
                        "The tool `{name}` did not finish within {} and was stopped.",
                        humanize(limit)
                    ),
                );
                // The aborted task will never close its ledger row: close
                // it here with the result the model gets. (Should the tool
                // still finish in the poll it is stuck in, its own close
                // finds the row settled and drops its result.)
                if let Some(ledger) = ledger() {
                    ledger::close_in_background(
                        ledger.durable.store.clone(),
                        conversation_id.to_owned(),
                        id.clone(),
                        Some(envelope.to_json_string()),
                    );
                }
                finished(id, name, envelope)
            }
        }
    }

    /// Checks results handed in with [`Input::ToolResults`] as
    /// [`Agent::resolve`] checks a client's result: each answers a call of
    /// the conversation, of a catalogued tool, and a successful one matches
    /// the tool's declared output. Client results are user-controlled data
    /// headed for the model.
    fn check_results(
        &self,
        messages: &[Message],
        results: &[(String, Envelope)],
    ) -> Result<(), String> {
        for (tool_call_id, envelope) in results {
            let name = call_name(messages, tool_call_id).ok_or_else(|| {
                format!("no call in the conversation has the id `{tool_call_id}`")
            })?;
            let definition = self.inner.executor.catalog().get(name).ok_or_else(|| {
                format!("the tool `{name}` of call `{tool_call_id}` is not in the catalog")
            })?;
            if let Some(result) = envelope.result() {
                definition.check_output(&result.to_value()).map_err(|problem| {
                    // The message travels in the `Done` event and the log:
                    // violations quote the refused values, so a tool that
                    // hides anything gets none of them.
                    if definition.redaction().hides_anything() {
                        format!(
                            "the result for call `{tool_call_id}` does not match the output of `{name}` (the violations are not shown because the tool declares secrets; `ToolDefinition::check_output` lists them)"
                        )
                    } else {
                        format!(
                            "the result for call `{tool_call_id}` does not match the output of `{name}`: {problem}"
                        )
                    }
                })?;
            }
        }
        Ok(())
    }

    async fn execute(
        &self,
        call: AssembledCall,
        context: &ToolContext,
        conversation_id: &str,
        ledger: Option<Ledger<'_>>,
    ) -> Executed {
        let ids = || EnvelopeIds {
            tool_call_id: call.id.as_str().into(),
            conversation_id: Some(conversation_id.into()),
            session_id: context.session_id().map(Into::into),
        };
        let finished =
            |envelope: Envelope| CallResult::Finished(ResultText::from_envelope(envelope));
        let result = match call.status {
            CallStatus::Truncated => finished(Envelope::error(
                ids(),
                ErrorCode::InvalidJson,
                "The arguments were cut off because the model reached its output token limit. Call the tool again with complete (and, if possible, shorter) arguments.",
            )),
            CallStatus::Unnamed => finished(Envelope::error(
                ids(),
                ErrorCode::UnknownTool,
                "The tool call has no tool name. Call a tool by its name.",
            )),
            CallStatus::Complete => {
                let tool_call = ToolCall::new(
                    call.id.as_str(),
                    call.name.as_str(),
                    call.arguments.as_str(),
                );
                if let Some(ledger) = ledger {
                    match self
                        .execute_recorded(&tool_call, context, ledger, false)
                        .await
                    {
                        Ok(result) => result,
                        Err(error) => {
                            tracing::error!(%error, tool = %call.name, tool_call_id = %call.id, "the call could not be recorded, so it was not run");
                            // The ledger's error means the call did not run.
                            finished(Envelope::error(
                                ids(),
                                ErrorCode::Failed,
                                "This call was not run: the conversation store could not record it. Nothing happened; call the tool again if it is still needed.",
                            ))
                        }
                    }
                } else {
                    let execution = self.inner.executor.execute(&tool_call, context).await;
                    match execution.outcome {
                        Outcome::Final(envelope) => finished(envelope),
                        Outcome::Awaiting(awaiting) => CallResult::Suspended(awaiting),
                        // Provider tools run at the provider, which returns their
                        // results itself; there is nothing to add here.
                        Outcome::PassThrough => finished(Envelope::error(
                            ids(),
                            ErrorCode::Failed,
                            "This tool runs at the model provider and cannot be called as a function here.",
                        )),
                    }
                }
            }
        };
        Executed {
            id: call.id,
            name: call.name,
            result,
        }
    }
}

fn reason_name(reason: &DoneReason) -> &'static str {
    match reason {
        DoneReason::Completed => "completed",
        DoneReason::Suspended(_) => "suspended",
        DoneReason::MaxIterations => "max_iterations",
        DoneReason::Cancelled => "cancelled",
        DoneReason::ModelError(_) => "model_error",
        DoneReason::StoreFailed(_) => "store_failed",
        DoneReason::LimitExceeded(_) => "limit_exceeded",
        DoneReason::InvalidToolResults(_) => "invalid_tool_results",
    }
}

/// How much longer than a call's time limit the loop waits for its task
/// before answering `timeout` itself.
const TIMEOUT_GRACE: Duration = Duration::from_millis(250);

/// Aborts the task when dropped: a run that is dropped mid-turn stops its
/// calls, as it did when they ran inside it.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn humanize(duration: Duration) -> String {
    if duration.subsec_nanos() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}

/// Completes after `limit`, or never.
async fn model_deadline(limit: Option<Duration>) {
    match limit {
        Some(limit) => tokio::time::sleep(limit).await,
        None => std::future::pending().await,
    }
}

/// What the model sees of a tool: the description, then when to call it.
/// Providers show the model only the description, so the usage goes there.
fn model_description(definition: &ToolDefinition) -> String {
    let usage = definition.usage().trim();
    if usage.is_empty() {
        definition.description().to_owned()
    } else {
        format!("{}\n\nUsage: {usage}", definition.description())
    }
}

/// Every tool of `catalog` in the model's dialect, each described with its
/// usage.
fn lower_for_model(catalog: &Catalog, dialect: Dialect) -> Result<Vec<Value>, DialectError> {
    catalog
        .definitions()
        .map(|definition| {
            let mut tool = definition.lower(dialect)?;
            if let Some(fields) = tool.as_object_mut() {
                fields.insert(
                    "description".into(),
                    Value::String(model_description(definition)),
                );
            }
            Ok(tool)
        })
        .collect()
}

/// The tool name of the call `tool_call_id`, latest turn first.
fn call_name<'m>(messages: &'m [Message], tool_call_id: &str) -> Option<&'m str> {
    messages.iter().rev().find_map(|message| match message {
        Message::Assistant { tool_calls, .. } => tool_calls
            .iter()
            .find(|call| call.id == tool_call_id)
            .map(|call| call.name.as_str()),
        _ => None,
    })
}

/// Appends results handed in for suspended calls, right after the
/// assistant turn and results already there; the repair before the next
/// request puts them in call order and drops any that answer nothing.
fn append_results(conversation: &mut Conversation, results: Vec<(String, Envelope)>) {
    for (tool_call_id, envelope) in results {
        let name = conversation
            .messages
            .iter()
            .rev()
            .find_map(|message| match message {
                Message::Assistant { tool_calls, .. } => tool_calls
                    .iter()
                    .find(|call| call.id == tool_call_id)
                    .map(|call| call.name.clone()),
                _ => None,
            })
            .unwrap_or_default();
        conversation.messages.push(Message::Tool {
            tool_call_id,
            name,
            content: envelope.to_json_string(),
            is_error: !envelope.is_ok(),
        });
    }
}
