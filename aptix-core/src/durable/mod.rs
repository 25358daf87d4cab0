//! Durable conversations: an [`Agent`] plus a [`Store`], so that a call
//! waiting on a browser, a person or an approval survives restarts and can
//! be resolved from any process sharing the store.
//!
//! ```no_run
//! # use aptix_core::{Agent, Catalog, Input};
//! # use aptix_core::durable::DurableAgent;
//! # use aptix_core::store::MemoryStore;
//! # async fn demo(model: impl aptix_core::model::ChatModel + 'static, catalog: Catalog) -> Result<(), Box<dyn std::error::Error>> {
//! let agent = Agent::builder().model(model).catalog(catalog).build()?;
//! let durable = DurableAgent::new(agent, MemoryStore::new());
//! let run = durable.send("conversation-1", Input::User("hello".into())).await?;
//! # drop(run);
//! # Ok(()) }
//! ```
//!
//! The rules, each enforced here:
//! - A conversation is driven by one process at a time: the one that
//!   claimed it (a lease in the store, renewed at every save; `lease.rs`).
//! - Every wait is a ledger entry with a deadline, written before the run
//!   reports the suspension; every server execution is recorded as
//!   `executing` before the tool runs and `done` (with its envelope) after,
//!   so a crash is noticed and no call runs twice unless its tool is
//!   declared `idempotent` (`ledger.rs`).
//! - Before any model turn, the ledger is turned into results for every
//!   call of the last turn; the model is only asked again when nothing is
//!   pending (`run.rs`).
//! - A resolution is checked and recorded by one compare-and-swap, then
//!   acknowledged; the next turn starts in the background (`resolve.rs`),
//!   and its events are kept for whoever watches the conversation
//!   (`watch.rs`).
//! - Deadlines live in the store: any process's sweep fires them, also
//!   after a restart (`deadlines.rs`).

mod checkpoint;
mod clients;
mod deadlines;
mod in_flight;
mod lease;
mod ledger;
mod resolve;
mod run;
mod watch;

pub use clients::ClientAttachment;
pub use in_flight::{CallProgress, CallStatus};
pub use resolve::{Resolution, ResolveError, Resolved};
pub use watch::{ConversationWatch, WATCH_BUFFER, WATCH_FINISHED_RUNS};

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast;

use crate::agent::{Agent, AgentEvent, AgentStream, Input};
use crate::meta::ExecutorKind;
use crate::store::{CallState, ConversationStatus, Step, Store, StoreError, StoredConversation};
use crate::transcript::{Conversation, Message};
use clients::Clients;
use lease::{Lease, Runs, now_ms};
use ledger::Ledger;

/// How long a suspended call waits when its tool declares no
/// `suspend_timeout`.
pub const DEFAULT_SUSPEND_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// How long a client call waits when no client is attached to its
/// conversation (a headless run) before it fails.
pub const DEFAULT_CLIENT_GRACE: Duration = Duration::from_secs(10);
/// How long a process holds a conversation between two saves before
/// another process may take it over.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(120);
/// How often a durable agent's own worker sweeps the store (see
/// [`DurableAgent::sweep_deadlines`]), or every half lease if that is
/// shorter: short beside the default client grace, so a headless client
/// call fails close to its deadline, and long enough that the sweep's few
/// reads stay negligible for the database.
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// An [`Agent`] whose conversations live in a [`Store`]. Cheap to clone.
///
/// Where [`Agent::run`] borrows a conversation the caller keeps,
/// [`DurableAgent::send`] runs a stored one: its transcript, its calls and
/// their deadlines are saved as the run goes, a call that waits for an
/// approval, a client or a person ends the run `Suspended`, and
/// [`DurableAgent::resolve`] (from this process or any other sharing the
/// store) continues it in the background.
#[derive(Clone)]
pub struct DurableAgent {
    inner: Arc<Inner>,
}

struct Inner {
    agent: Agent,
    store: Arc<dyn Store>,
    lease: Lease,
    ledger: Ledger,
    resume_on_resolve: bool,
    /// How often the agent's own deadline worker sweeps; `None`: no worker.
    sweep_every: Option<Duration>,
    worker_started: AtomicBool,
    events: broadcast::Sender<ConversationEvent>,
    /// The background runs' events by conversation, for `watch`.
    feeds: Arc<watch::Feeds>,
    clients: Arc<Clients>,
    runs: Runs,
}

impl std::fmt::Debug for DurableAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableAgent")
            .field("agent", &self.inner.agent)
            .field("instance_id", &self.inner.lease.owner())
            .finish_non_exhaustive()
    }
}

/// Builds a [`DurableAgent`]: every setting has a default, so
/// [`DurableAgent::new`] is this builder, built at once.
#[must_use]
pub struct DurableAgentBuilder {
    agent: Agent,
    store: Arc<dyn Store>,
    owner: Option<String>,
    suspend_timeout: Duration,
    client_grace: Duration,
    lease: Duration,
    resume_on_resolve: bool,
    /// `None`: the default (on when `resume_on_resolve`); `Some(None)`: off.
    sweep_every: Option<Option<Duration>>,
    /// What `watch` keeps: events per run, finished runs.
    watch_limits: (usize, usize),
}

impl DurableAgentBuilder {
    /// How long a suspended call waits when its tool declares no
    /// `suspend_timeout` (default 15 minutes).
    pub fn suspend_timeout(mut self, timeout: Duration) -> Self {
        self.suspend_timeout = timeout;
        self
    }

    /// How long a client call waits when no client is attached to its
    /// conversation (default 10 s), so that a headless run fails fast
    /// instead of parking.
    pub fn client_grace(mut self, grace: Duration) -> Self {
        self.client_grace = grace;
        self
    }

    /// How long this process holds a conversation between two saves before
    /// another may take it over after a crash (default 2 minutes).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Whether [`DurableAgent::resolve`] starts the next turn in this
    /// process (default true). Turn it off in a process that only records
    /// resolutions (a short-lived CLI, a webhook that must not run model
    /// calls); the process that runs the conversation then picks it up
    /// with [`DurableAgent::ensure_started`].
    pub fn resume_on_resolve(mut self, resume: bool) -> Self {
        self.resume_on_resolve = resume;
        self
    }

    /// The name this process holds conversations under (default: random
    /// per agent).
    pub fn instance_id(mut self, id: impl Into<String>) -> Self {
        self.owner = Some(id.into());
        self
    }

    /// How often this agent sweeps the store for deadlines that passed,
    /// conversations a dead process held, and resolved conversations that
    /// nobody resumed (see [`DurableAgent::sweep_deadlines`]). Default:
    /// every [`DEFAULT_SWEEP_INTERVAL`], or every half lease if that is
    /// shorter, when [`DurableAgentBuilder::resume_on_resolve`] is on, none
    /// when it is off (a process that must not run model calls must not
    /// resume conversations either). `None` turns the worker off; the
    /// application then calls [`DurableAgent::sweep_deadlines`] itself.
    pub fn deadline_worker(mut self, every: Option<Duration>) -> Self {
        self.sweep_every = Some(every);
        self
    }

    /// What [`DurableAgent::watch`] keeps in memory: the last `events` of
    /// each run (default [`WATCH_BUFFER`]; a watcher further behind skips
    /// the oldest it missed, never the `Done`), and the finished runs of at
    /// most `finished_runs` conversations (default [`WATCH_FINISHED_RUNS`])
    /// for watchers that come after a run ended. Both count events, whose
    /// size the agent's turn limits bound. At least 1 each.
    pub fn watch_limits(mut self, events: usize, finished_runs: usize) -> Self {
        self.watch_limits = (events.max(1), finished_runs.max(1));
        self
    }

    /// Builds the durable agent, and starts its deadline worker when a
    /// Tokio runtime is running (otherwise the first `send`, `resolve`,
    /// `pending` or `ensure_started` starts it).
    pub fn build(self) -> DurableAgent {
        let (events, _) = broadcast::channel(1024);
        let sweep_every = match self.sweep_every {
            Some(every) => every,
            // Within half a lease: a conversation whose holder died is
            // taken over soon after its lease runs out, also with short
            // leases.
            None => self.resume_on_resolve.then_some(
                DEFAULT_SWEEP_INTERVAL
                    .min(self.lease / 2)
                    .max(Duration::from_millis(10)),
            ),
        };
        let owner = self
            .owner
            .unwrap_or_else(|| format!("aptix-{}", uuid::Uuid::new_v4()));
        let clients = Arc::new(Clients::default());
        let durable = DurableAgent {
            inner: Arc::new(Inner {
                ledger: Ledger::new(
                    self.agent.clone(),
                    self.store.clone(),
                    self.suspend_timeout,
                    self.client_grace,
                    clients.clone(),
                ),
                lease: Lease::new(self.store.clone(), owner, self.lease),
                agent: self.agent,
                store: self.store,
                resume_on_resolve: self.resume_on_resolve,
                sweep_every,
                worker_started: AtomicBool::new(false),
                events,
                feeds: Arc::new(watch::Feeds::new(self.watch_limits.0, self.watch_limits.1)),
                clients,
                runs: Runs::new(),
            }),
        };
        // Deadlines fire without the application running a sweeper.
        durable.ensure_deadline_worker();
        durable
    }
}

/// An event of a run the agent drives in the background (after a
/// resolution, a deadline or a revival), with its conversation.
#[derive(Debug, Clone)]
pub struct ConversationEvent {
    /// The conversation the run belongs to.
    pub conversation_id: String,
    /// The event.
    pub event: AgentEvent,
}

/// A wait that has not been resolved yet: what an approval screen, a client
/// or a person needs to act on it. Read from the store, so a process that
/// restarted (or another one sharing the store) sees the same.
///
/// More fields may come: it is not built outside Aptix.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PendingCall {
    /// The conversation.
    pub conversation_id: String,
    /// The call's id: pass it to [`DurableAgent::resolve`].
    pub tool_call_id: String,
    /// The tool's name.
    pub tool: String,
    /// What it waits for, and so which resolutions fit:
    /// [`Step::Approval`] (a person approves, changes or denies the call),
    /// [`Step::Client`] (a client runs it and sends the result) or
    /// [`Step::Human`] (a person's answer is the result). A gated client
    /// call waits twice: for its approval, then for its client.
    pub step: Step,
    /// Who produces the call's result once it may go on, as the tool
    /// declares it in this agent's catalog (an approval of a client tool
    /// is `Client` here and [`Step::Approval`] in `step`). `None` for a
    /// tool the catalog no longer has.
    pub executor: Option<ExecutorKind>,
    /// The validated arguments.
    pub arguments: Value,
    /// What the approver sees, the client executes or the person is asked
    /// (the prompt): the tool's prepared payload, secrets included. Do not
    /// log it.
    pub payload: Value,
    /// Why the model made the call, when it said so (`_reasoningForCall`,
    /// see [`AgentBuilder::ask_reasoning`](crate::agent::AgentBuilder::ask_reasoning)):
    /// kept in the store with the call, for whoever decides on it. The
    /// model wrote it: show it as the model's claim, not as a fact.
    pub reasoning: Option<String>,
    /// When it expires (ms since the Unix epoch).
    pub deadline_ms: Option<i64>,
}

impl PendingCall {
    /// The hash an approval of this call is bound to (SHA-256 of the
    /// payload, key order and spacing aside): pass it to
    /// [`Resolution::approve_exactly`] or [`Resolution::approve_always`].
    pub fn arguments_hash(&self) -> String {
        crate::agent::arguments_hash(&self.payload.to_string())
    }
}

/// What [`DurableAgent::ensure_started`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revival {
    /// Waits are still pending; nothing to run until they are resolved.
    Waiting {
        /// How many.
        pending: usize,
    },
    /// The next step runs now, in the background.
    Resumed,
    /// A run holds the conversation (another process's, with a valid
    /// lease, or one of this process that is ending); it is resumed in the
    /// background once that run ends or its lease runs out.
    Busy,
    /// Nothing to do: the conversation waits for user input.
    Idle,
}

/// Why a durable operation could not start.
#[derive(Debug, thiserror::Error)]
pub enum DurableError {
    /// No conversation with that id is stored.
    #[error("no conversation `{0}` is stored")]
    Unknown(String),
    /// Another process is running the conversation.
    #[error("conversation `{0}` is being run by another process")]
    Busy(String),
    /// Calls of the conversation wait for resolutions; new input would
    /// abandon them.
    #[error(
        "conversation `{conversation_id}` has {pending} suspended call(s); resolve them with `DurableAgent::resolve` first"
    )]
    Suspended {
        /// The conversation.
        conversation_id: String,
        /// How many waits are pending.
        pending: usize,
    },
    /// Results of suspended calls come through [`DurableAgent::resolve`],
    /// which validates them and records them durably.
    #[error("send results of suspended calls with `DurableAgent::resolve`, not as input")]
    ResultsThroughResolve,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl DurableAgent {
    /// `agent` with its conversations in `store`, every setting at its
    /// default (see [`DurableAgent::builder`]).
    pub fn new(agent: Agent, store: impl Store) -> Self {
        Self::builder(agent, store).build()
    }

    /// Starts building a durable agent of `agent` with its conversations in
    /// `store` (an `Arc<dyn Store>` shared with other code is a store too).
    pub fn builder(agent: Agent, store: impl Store) -> DurableAgentBuilder {
        DurableAgentBuilder {
            agent,
            store: Arc::new(store),
            owner: None,
            suspend_timeout: DEFAULT_SUSPEND_TIMEOUT,
            client_grace: DEFAULT_CLIENT_GRACE,
            lease: DEFAULT_LEASE,
            resume_on_resolve: true,
            sweep_every: None,
            watch_limits: (WATCH_BUFFER, WATCH_FINISHED_RUNS),
        }
    }

    /// The agent that runs the turns.
    pub fn agent(&self) -> &Agent {
        &self.inner.agent
    }

    /// The store the conversations live in.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The events of background runs (after resolutions, deadlines and
    /// revivals), of every conversation this agent drives: for a process
    /// that forwards them all. To follow one conversation, use
    /// [`DurableAgent::watch`].
    pub fn subscribe(&self) -> broadcast::Receiver<ConversationEvent> {
        self.inner.events.subscribe()
    }

    /// Stores `conversation` (e.g. with its system prompt) unless one with
    /// its id exists. Returns whether it was stored.
    pub async fn create_conversation(
        &self,
        conversation: &Conversation,
    ) -> Result<bool, DurableError> {
        Ok(self
            .inner
            .store
            .create_conversation(conversation, now_ms())
            .await?)
    }

    /// The stored conversation `conversation_id`.
    pub async fn conversation(
        &self,
        conversation_id: &str,
    ) -> Result<Option<StoredConversation>, DurableError> {
        Ok(self.inner.store.load_conversation(conversation_id).await?)
    }

    /// The unresolved waits of a conversation, in call order.
    pub async fn pending(&self, conversation_id: &str) -> Result<Vec<PendingCall>, DurableError> {
        self.ensure_deadline_worker();
        let records = self.inner.store.calls(conversation_id).await?;
        Ok(records
            .into_iter()
            .filter(|record| record.state == CallState::Pending)
            .map(|record| PendingCall {
                executor: self.executor_of(&record.tool),
                conversation_id: record.conversation_id,
                tool_call_id: record.tool_call_id,
                tool: record.tool,
                step: record.step,
                arguments: serde_json::from_str(&record.arguments).unwrap_or(Value::Null),
                payload: serde_json::from_str(&record.payload).unwrap_or(Value::Null),
                reasoning: record.reasoning,
                deadline_ms: record.deadline,
            })
            .collect())
    }

    /// Who runs calls of `tool`, as this agent's catalog declares it.
    fn executor_of(&self, tool: &str) -> Option<ExecutorKind> {
        self.inner
            .agent
            .executor()
            .catalog()
            .get(tool)
            .map(|definition| definition.executor())
    }

    /// Runs the stored conversation `conversation_id` (created empty if
    /// absent) with `input`, saving it as it goes. The returned stream ends
    /// with one `Done`; suspended calls are then in the store, and
    /// [`DurableAgent::resolve`] continues the conversation in the
    /// background.
    ///
    /// For a conversation at rest (new, or idle with every call answered)
    /// the user's message is stored by the time this returns `Ok`, in the
    /// same commit as the claim: a stream dropped unread then leaves the
    /// conversation running, and once this process's lease runs out a
    /// sweep answers it (its events reach [`DurableAgent::subscribe`]).
    ///
    /// Calls of the last turn that were resolved but not yet settled (with
    /// `resume_on_resolve(false)`) are settled first, so their results
    /// follow their calls and precede `input`. If that leaves calls waiting
    /// (an approved client call now goes to its client), `input` is not
    /// added: the run ends `Suspended` with them; send it again once they
    /// are resolved.
    pub async fn send(
        &self,
        conversation_id: &str,
        input: Input,
    ) -> Result<AgentStream<'static>, DurableError> {
        self.ensure_deadline_worker();
        if matches!(input, Input::ToolResults(_)) {
            return Err(DurableError::ResultsThroughResolve);
        }
        let inner = &*self.inner;
        let run = inner
            .runs
            .begin(conversation_id)
            .ok_or_else(|| DurableError::Busy(conversation_id.to_owned()))?;
        if let Input::User(text) = &input
            && let Some(conversation) = self.claim_with_message(conversation_id, text).await?
        {
            return Ok(self.clone().drive(conversation, Input::Continue, run));
        }
        // Created (empty) when absent and claimed, in one commit.
        let claimed = inner
            .lease
            .claim_or_create(conversation_id)
            .await?
            .ok_or_else(|| DurableError::Busy(conversation_id.to_owned()))?;
        let pending = inner.ledger.pending_count(conversation_id).await?;
        if pending > 0 {
            inner
                .lease
                .save(&claimed.conversation, ConversationStatus::Suspended)
                .await?;
            return Err(DurableError::Suspended {
                conversation_id: conversation_id.to_owned(),
                pending,
            });
        }
        Ok(self.clone().drive(claimed.conversation, input, run))
    }

    /// The common `send`: a conversation at rest (new, or idle with every
    /// call answered and no wait pending) is claimed and stored with the
    /// user's message in one commit. `None` for any other, or one that
    /// changed between the read and the claim: `send` then settles the last
    /// turn first and adds the message after its results.
    async fn claim_with_message(
        &self,
        conversation_id: &str,
        text: &str,
    ) -> Result<Option<Conversation>, DurableError> {
        let inner = &*self.inner;
        let (mut conversation, version) = match inner
            .lease
            .store()
            .load_conversation(conversation_id)
            .await?
        {
            None => (Conversation::new(conversation_id), None),
            Some(stored)
                if stored.status == ConversationStatus::Idle
                    && !ledger::has_unanswered_calls(&stored.conversation) =>
            {
                (stored.conversation, Some(stored.version))
            }
            Some(_) => return Ok(None),
        };
        // A wait of this conversation is written by a run that claimed it,
        // and the claim changed the version: none can appear after this
        // read without the claim below being refused (a process whose
        // lease ran out writes no new wait either: its checkpointed inserts
        // carry a save that needs the lease).
        if version.is_some() && inner.ledger.pending_count(conversation_id).await? > 0 {
            return Ok(None);
        }
        conversation.messages.push(Message::user(text));
        match inner.lease.claim_with(&conversation, version).await {
            Ok(claimed) => Ok(claimed.then_some(conversation)),
            Err(error) => {
                // The batch may have been written all the same (the answer
                // was lost after the commit): then the message is stored and
                // this process holds the conversation, so the run goes on
                // rather than leave it for a sweep to answer a `send` that
                // reported failure (and a retry to add the message twice).
                match inner.lease.store().load_conversation(conversation_id).await {
                    Ok(Some(stored))
                        if stored.status == ConversationStatus::Running
                            && stored.owner.as_deref() == Some(inner.lease.owner())
                            && stored.conversation.messages == conversation.messages =>
                    {
                        Ok(Some(conversation))
                    }
                    _ => {
                        inner.lease.give_up(conversation_id).await;
                        Err(error.into())
                    }
                }
            }
        }
    }
}
