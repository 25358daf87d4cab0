//! The agent loop: model → tool calls → execute → feed back, until the
//! model answers without tools, a call suspends, the iteration limit is
//! reached, or the run is cancelled.
//!
//! A run is a stream of [`AgentEvent`]s that ends with exactly one
//! [`AgentEvent::Done`], whatever happens. It runs in a task of its own
//! ([`Agent::start`]), which its reader only watches: a reader that goes
//! away stops nothing. The run hands back the [`Conversation`] holding
//! everything it added ([`Run::finish`]), so the caller persists it, or
//! hands it to the next run. An [`Agent`] keeps nothing between runs;
//! [`DurableAgent`](crate::durable::DurableAgent) adds a store for
//! conversations that outlive a process.
//!
//! | file | holds |
//! | --- | --- |
//! | `mod.rs` | `Agent` and what a run takes and reports |
//! | `builder.rs` | `AgentBuilder`: the model, the catalog, the limits |
//! | `handle.rs` | `Agent::start`: a run in a task of its own, and its `Run` handle |
//! | `run.rs` | the loop over model turns |
//! | `call.rs` | one tool call of a turn, in a task of its own |
//! | `journal.rs` | what a durable run adds to the loop |
//! | `call_ids.rs` | unique tool call ids |
//! | `step.rs` | per-step tool selection (`prepare_step`) |
//! | `search.rs` | tool search: the tools each request offers, revealed by searches |
//! | `composed.rs` | composed calls: tools as one structured-output schema |
//! | `redact.rs` | declared secrets hidden in events |
//! | `hook.rs` | the `ToolHook` port: steer, repair or halt calls |
//! | `approval.rs` | the `ApprovalPolicy` port: approvals decided at run time |
//! | `steer.rs` | hooks and the approval policy applied to one call |
//! | `live_feed.rs` | progress and partial results of running calls |
//! | `summary.rs` | the `RunSummary` on `Done` |
//! | `retention.rs` | old tool results stubbed in requests (`retention`, `context_budget`) |
//! | `watchdog.rs` | a clock outside the runtime for calls' time limits |

mod approval;
mod builder;
mod call;
mod call_ids;
mod composed;
mod handle;
mod hook;
mod journal;
mod live_feed;
mod members;
pub mod redact;
mod retention;
mod run;
#[cfg(feature = "tool-search")]
mod search;
mod steer;
mod step;
mod summary;
mod turn;
mod turn_calls;
mod watchdog;

pub(crate) use approval::arguments_hash;
pub use approval::{ApprovalCall, ApprovalDecision, ApprovalPolicy};
pub use builder::{AgentBuilder, AgentError};
pub(crate) use call::{CallResult, ResultText, requested, split_reasoning};
pub use composed::{CallMode, composed_schema, composed_schema_in};
pub use handle::{Run, RunError, RunEvents, RunHandle};
pub use hook::{
    AfterCall, BeforeCall, HookCall, HookFuture, Invalid, InvalidCall, Repair, ToolHook,
};
pub(crate) use journal::{Journal, JournalFuture};
pub(crate) use steer::{After, Before};
pub(crate) use step::kept_runnable;
pub use step::{PreparedStep, Step};
pub use summary::{RunSummary, ToolCallStats};

use std::sync::Arc;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::context::ToolContext;
use crate::definition::ToolDefinition;
use crate::envelope::{Envelope, JsonText};
use crate::executor::{Awaiting, Executor};
use crate::meta::{Approval, ExecutorKind, Redaction};
use crate::model::{ChatModel, ModelError, Usage};
use crate::transcript::Conversation;
use builder::Settings;

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
/// (durable runs also from
/// [`DurableAgent::pending`](crate::durable::DurableAgent::pending)).
#[derive(Clone)]
pub struct SuspendedCall {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub name: String,
    /// Who it waits for, and the prepared payload with the tool's declared
    /// secrets redacted: safe to print and log, not to act on.
    pub awaiting: Awaiting,
    /// Why the model made the call, when it said so (`_reasoningForCall`,
    /// see [`AgentBuilder::ask_reasoning`]): for whoever approves it.
    pub reasoning: Option<String>,
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
            reasoning: None,
            payload,
        }
    }

    /// The real payload, secrets included: what the approver must see or
    /// the client must execute. Do not log it.
    pub fn payload(&self) -> &JsonText {
        &self.payload
    }

    /// The hash an approval of this call is bound to: SHA-256 (hex) of
    /// the real payload the approver is shown, key order and spacing
    /// aside. A durable approval given as
    /// [`Resolution::approve_exactly`](crate::durable::Resolution::approve_exactly)
    /// carries it (so does [`PendingCall::arguments_hash`](crate::durable::PendingCall::arguments_hash)), and is refused (`Conflict`) if the call waiting under
    /// this id holds anything else by the time it arrives.
    pub fn arguments_hash(&self) -> String {
        arguments_hash(self.payload.as_str())
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
            .field("reasoning", &self.reasoning)
            .finish_non_exhaustive()
    }
}

/// Why a run ended. More reasons may come: match with a wildcard arm.
#[derive(Debug, Clone)]
#[non_exhaustive]
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
    /// [`DurableAgent::ensure_started`](crate::durable::DurableAgent::ensure_started)),
    /// and calls left unanswered are settled before any new input.
    StoreFailed(String),
    /// A model turn went past a bound set on the builder (the message names
    /// it): the model call was ended and the turn is not kept.
    LimitExceeded(String),
    /// Results handed in with [`Input::ToolResults`] were refused (the
    /// message names the call and the problem); the conversation is as it
    /// was, so the corrected results can be handed in again.
    InvalidToolResults(String),
    /// A hook ended the run ([`BeforeCall::Halt`] or [`AfterCall::Halt`]):
    /// a guardrail tripped. The turn's calls all have results.
    Halted {
        /// The hook's name.
        by: String,
        /// Why, in the hook's words.
        message: String,
    },
}

/// What kind of tool a call is of: on every event of a call, so that a
/// renderer needs no catalog (`None` when the model named no tool of the
/// catalog).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolKind {
    /// Where its final behaviour happens.
    pub executor: ExecutorKind,
    /// Whether a call waits for an approval first.
    pub approval: Approval,
}

/// What a run reports as it goes. More kinds of events may come: match
/// with a wildcard arm.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AgentEvent {
    /// More answer text.
    TextDelta(String),
    /// More of the model's reasoning, as it streams: Anthropic's thinking,
    /// a Responses reasoning summary, a Gemini thought, an OpenAI-compatible
    /// server's `reasoning_content`. For people only: it is kept with the
    /// turn and sent back to the provider as the provider requires
    /// ([`ThinkingBlock`](crate::transcript::ThinkingBlock)), never logged;
    /// thinking the provider redacted or encrypted has no text and is never
    /// shown.
    ReasoningDelta(String),
    /// A call's tool name arrived while the model still streams its
    /// arguments: show the call as it forms. Native tool calls only (a
    /// composed answer is read whole).
    ToolCallOpened {
        /// The call's id, the same in its later events (unless the model
        /// reuses an id and the call is renamed; see `ToolCallStart`).
        id: String,
        /// The tool name.
        name: String,
        /// The tool's executor and approval.
        kind: Option<ToolKind>,
    },
    /// More of a call's arguments text, as the model streams it: not yet
    /// valid JSON. None for a tool that declares secrets (`redact` or
    /// `log_fields`): its arguments are shown once, redacted, in
    /// `ToolCallStart`.
    ToolCallDelta {
        /// The call's id.
        id: String,
        /// The next piece of the arguments text.
        text: String,
    },
    /// A tool call the model made; `arguments` are redacted for display.
    ToolCallStart {
        /// The call's id, the same in its result.
        id: String,
        /// Why the model made the call, when it said so (`_reasoningForCall`,
        /// see [`AgentBuilder::ask_reasoning`]); not part of `arguments`.
        reasoning: Option<String>,
        /// The tool name.
        name: String,
        /// The tool's executor and approval.
        kind: Option<ToolKind>,
        /// The arguments (parsed when they are JSON), secrets redacted.
        arguments: Value,
    },
    /// How far a running call is, as its tool reported it
    /// ([`ToolContext::progress`]). Coalesced: a reader slower than the tool
    /// sees the latest report, not every one. Never reaches the model.
    ToolProgress {
        /// The call's id.
        id: String,
        /// The tool name.
        name: String,
        /// The tool's executor and approval.
        kind: Option<ToolKind>,
        /// How far, in the tool's own unit.
        done: f64,
        /// Where `done` ends, when the tool knows.
        total: Option<f64>,
        /// What it is doing, for people.
        message: Option<String>,
    },
    /// A partial result of a running call ([`ToolContext::partial`]), a
    /// value of the tool's partial type, redacted as its result is. Every
    /// one arrives, in order, before the call's result. Never reaches the
    /// model.
    ToolPartial {
        /// The call's id.
        id: String,
        /// The tool name.
        name: String,
        /// The tool's executor and approval.
        kind: Option<ToolKind>,
        /// The value, secrets redacted.
        value: Value,
    },
    /// A running call asks a person something: an MCP server's elicitation
    /// during a remote call, or a local tool's
    /// [`ToolContext::elicit`](crate::ToolContext::elicit). The call waits
    /// (within its time limit) until `reply` is answered; dropping every
    /// copy of the event unanswered answers
    /// [`ElicitationAnswer::Cancel`](crate::live::ElicitationAnswer::Cancel),
    /// so a reader that ignores it never hangs the run. Never reaches the
    /// model: the answer goes to the call.
    Elicitation {
        /// The asking call's id.
        id: String,
        /// The tool name.
        name: String,
        /// The tool's executor and approval.
        kind: Option<ToolKind>,
        /// The question.
        request: crate::live::ElicitationRequest,
        /// Where the answer goes.
        reply: crate::live::ElicitationReply,
    },
    /// The result of a call that finished; the envelope is redacted.
    ToolCallResult {
        /// The call's id.
        id: String,
        /// The tool name.
        name: String,
        /// The tool's executor and approval.
        kind: Option<ToolKind>,
        /// The envelope, secrets redacted.
        envelope: Value,
    },
    /// The model's turn was cut off before its end: at its output token
    /// limit ([`FinishReason::Length`](crate::model::FinishReason::Length))
    /// or by the provider's content filter
    /// ([`FinishReason::ContentFilter`](crate::model::FinishReason::ContentFilter)).
    /// Its text may stop mid-way, and none of its calls runs, whole as
    /// their arguments may be: a turn read in part may have meant more, or
    /// other calls. Each call still gets its `ToolCallStart` and a `failed`
    /// result saying it was not run and why, so the transcript stays
    /// paired, and the model is asked again (within `max_iterations`).
    /// Comes right after the turn, before its calls' events. Native tool
    /// calls only: a composed answer is read whole or not at all.
    TurnCutOff {
        /// Why the model stopped.
        reason: crate::model::FinishReason,
        /// The ids of the turn's calls, none of which ran.
        calls: Vec<String>,
    },
    /// A tool asked the model for another try (`ToolError::retry`) more
    /// often in this run than its `retries` allow: this call's result is
    /// `failed` instead, telling the model not to try again.
    RetriesExhausted {
        /// The call's id.
        id: String,
        /// The tool name.
        name: String,
        /// The tool's executor and approval.
        kind: Option<ToolKind>,
        /// The tool's budget, spent.
        retries: u8,
    },
    /// The end of the run: always the last event, exactly once.
    Done {
        /// Why the run ended.
        reason: DoneReason,
        /// Tokens used by every model call of the run.
        usage: Usage,
        /// What the run did: calls by tool with their latency, model turns,
        /// and the hashes of what the model was offered.
        summary: RunSummary,
    },
}

/// A model, a catalog and the loop between them. Cheap to clone.
///
/// It holds no conversation: each run takes one and hands it back
/// ([`Agent::start`], [`Agent::run`]). For conversations kept in a store, with calls that
/// wait for approvals, clients or people across restarts, wrap it in a
/// [`DurableAgent`](crate::durable::DurableAgent).
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

struct Inner {
    model: Arc<dyn ChatModel>,
    executor: Executor,
    tools: Arc<[crate::model::ToolSpec]>,
    context: ToolContext,
    settings: Settings,
    /// The application's per-step tool selection, if any.
    prepare_step: Option<step::PrepareStep>,
    /// Called around every call, in order.
    hooks: Vec<Arc<dyn ToolHook>>,
    /// Decides which calls wait for an approval, after the hooks.
    approval_policy: Option<Arc<dyn ApprovalPolicy>>,
    /// What each request keeps of old tool results.
    retainer: retention::Retainer,
    /// In composed mode, the response format of a request that offers every
    /// tool with the agent's tool choice.
    composed: Option<crate::model::ResponseFormat>,
    /// The tools each request offers when the catalog is searched.
    #[cfg(feature = "tool-search")]
    search: Option<search::Searching>,
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

impl Agent {
    /// Starts building an agent.
    pub fn builder() -> AgentBuilder {
        AgentBuilder::new()
    }

    /// The executor the loop dispatches through.
    pub fn executor(&self) -> &Executor {
        &self.inner.executor
    }

    /// Runs the loop on `conversation` with `input`, and streams its
    /// events: a convenience over [`Agent::start`] for a caller that reads
    /// the run to its end and keeps its conversation in place.
    ///
    /// The run starts when the stream is first polled, on a copy of
    /// `conversation`, in a task of its own ([`Agent::start`]). Right
    /// before the stream hands out [`AgentEvent::Done`], `conversation` is
    /// replaced by the run's transcript, holding everything the run added:
    /// read to `Done`, it is as if the run had worked on it in place.
    ///
    /// Dropped before `Done` (a client that went away), the stream stops
    /// nothing: the run goes on to its end in its task, its tools finish,
    /// and its transcript is dropped there, while `conversation` keeps
    /// what it had before the run, never half a turn. What the run's
    /// tools did is then in no transcript the caller holds: where that
    /// matters, use [`Agent::start`] and [`Run::finish`], or a
    /// [`DurableAgent`](crate::durable::DurableAgent). To stop a run, cancel
    /// it ([`Agent::run_with_cancellation`]) instead of dropping its stream.
    ///
    /// # Panics
    ///
    /// Polled outside a Tokio runtime. A panic of the run itself (in the
    /// model adapter, a hook, the approval policy or `prepare_step`) is
    /// resumed in the reader, as if the run had been polled in place.
    pub fn run<'c>(&self, conversation: &'c mut Conversation, input: Input) -> AgentStream<'c> {
        self.run_with_cancellation(conversation, input, CancellationToken::new())
    }

    /// Like [`Agent::run`], stopping early when `cancellation` is cancelled:
    /// the run ends with [`DoneReason::Cancelled`], every call of its turn
    /// answered.
    pub fn run_with_cancellation<'c>(
        &self,
        conversation: &'c mut Conversation,
        input: Input,
        cancellation: CancellationToken,
    ) -> AgentStream<'c> {
        let agent = self.clone();
        Box::pin(crate::generator::generate(move |out| async move {
            let run = agent.start_with_cancellation(conversation.clone(), input, cancellation);
            let (mut events, handle) = run.split();
            let mut done = None;
            while let Some(event) = events.next().await {
                if matches!(event, AgentEvent::Done { .. }) {
                    done = Some(event);
                    break;
                }
                out.emit(event).await;
            }
            drop(events);
            // `Done` is the loop's last act: the task returns right after.
            match handle.join().await {
                Ok(transcript) => *conversation = transcript,
                Err(error) => match error.try_into_panic() {
                    Ok(panic) => std::panic::resume_unwind(panic),
                    // Only a runtime shutting down drops the task.
                    Err(error) => {
                        tracing::warn!(%error, "the run's task was dropped before its end")
                    }
                },
            }
            if let Some(done) = done {
                out.emit(done).await;
            }
        }))
    }

    /// The tool context of a run: the agent's base context with the
    /// conversation's ids (user and tenant among them) and the run's
    /// cancellation.
    pub(crate) fn context_for(
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
        if let Some(user) = &conversation.user_id {
            context = context.with_user_id(user.as_str());
        }
        if let Some(tenant) = &conversation.tenant_id {
            context = context.with_tenant_id(tenant.as_str());
        }
        context
    }

    /// What kind of tool `name` is, for the events of its calls (`None`
    /// for a name no tool has).
    pub(crate) fn kind_of(&self, name: &str) -> Option<ToolKind> {
        self.inner
            .executor
            .catalog()
            .get(name)
            .map(|definition| ToolKind {
                executor: definition.executor(),
                approval: definition.approval(),
            })
    }

    /// The redaction policy of the tool `name` (none for an unknown tool).
    /// With hooks, a name no tool has shows nothing: a hook may rename the
    /// call to a tool that declares secrets.
    pub(crate) fn redactions(&self, name: &str) -> Redaction {
        match self.inner.executor.catalog().get(name) {
            Some(definition) => definition.redaction(),
            None if !self.inner.hooks.is_empty() => Redaction::Allow(&[]),
            None => Redaction::Undeclared,
        }
    }

    /// With tool search, the tools the next request after `messages`
    /// offers (`None`: every tool, as built).
    #[cfg(feature = "tool-search")]
    fn loaded_tools(&self, messages: &[crate::transcript::Message]) -> Option<step::Loaded> {
        let search = self.inner.search.as_ref()?;
        Some(search.loaded(messages, self.inner.executor.catalog()))
    }

    #[cfg(not(feature = "tool-search"))]
    fn loaded_tools(&self, _messages: &[crate::transcript::Message]) -> Option<step::Loaded> {
        None
    }

    /// The tools a turn may call: those offered, and those the provider's
    /// own tool search found in `turn` itself.
    #[cfg(feature = "tool-search")]
    fn widened(
        &self,
        offered: Option<crate::catalog::Catalog>,
        turn: &crate::transcript::Message,
    ) -> Option<crate::catalog::Catalog> {
        match (&self.inner.search, offered) {
            (Some(search), Some(offered)) => {
                Some(search.widen(offered, turn, self.inner.executor.catalog()))
            }
            (_, offered) => offered,
        }
    }

    #[cfg(not(feature = "tool-search"))]
    fn widened(
        &self,
        offered: Option<crate::catalog::Catalog>,
        _turn: &crate::transcript::Message,
    ) -> Option<crate::catalog::Catalog> {
        offered
    }

    /// Whether tools are found by searching (so a tool not offered may
    /// be one not found yet).
    fn searches_tools(&self) -> bool {
        #[cfg(feature = "tool-search")]
        return self.inner.search.is_some();
        #[cfg(not(feature = "tool-search"))]
        false
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
}
