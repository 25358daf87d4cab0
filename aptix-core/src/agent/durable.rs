//! Durable conversations: runs whose state lives in a [`Store`], so that a
//! call waiting on a browser, a person or an approval survives restarts and
//! can be resolved from any process.
//!
//! The rules, each enforced here:
//! - A conversation is driven by one process at a time: the one that
//!   claimed it (a lease in the store, renewed at every save).
//! - Every wait is a ledger entry with a deadline, written before the run
//!   reports the suspension; every server execution is recorded as
//!   `executing` before the tool runs and `done` (with its envelope) after,
//!   so a crash is noticed and no call runs twice unless its tool is
//!   declared `idempotent`.
//! - Before any model turn, the ledger is turned into results for every
//!   call of the last turn (`ledger.rs`); the model is only asked again
//!   when nothing is pending.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::ledger::{Ledger, has_unanswered_calls};
use super::{Agent, AgentEvent, AgentStream, Conversation, DoneReason, Input};
use crate::envelope::EnvelopeIds;
use crate::model::{Message, Usage};
use crate::store::{
    CallRecord, CallState, ConversationStatus, Step, Store, StoreError, StoredConversation,
};

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
/// [`Agent::sweep_deadlines`]), or every half lease if that is shorter:
/// short beside the default client grace, so
/// a headless client call fails close to its deadline, and long enough
/// that the sweep's few reads stay negligible for the database.
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// Milliseconds since the Unix epoch: the store's clock.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// The durable half of an agent, present when it was built with a store.
pub(crate) struct Durable {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) owner: String,
    pub(crate) suspend_timeout: Duration,
    pub(crate) client_grace: Duration,
    pub(crate) lease: Duration,
    pub(crate) resume_on_resolve: bool,
    pub(crate) events: broadcast::Sender<ConversationEvent>,
    clients: Mutex<HashMap<String, usize>>,
    /// Conversations a run of this process is driving right now. The
    /// store's lease lets the same owner claim again, so without this a
    /// revival could start a second run beside a live one.
    active: Arc<Mutex<BTreeSet<String>>>,
    /// Counts the ends of this process's runs: a resume that found the
    /// conversation held by a run here waits for the next one.
    released: Arc<watch::Sender<u64>>,
    /// How often the agent's own deadline worker sweeps; `None`: no worker.
    sweep_every: Option<Duration>,
    worker_started: std::sync::atomic::AtomicBool,
}

/// Marks a conversation as driven by this process while it lives.
pub(crate) struct ActiveRun {
    active: Arc<Mutex<BTreeSet<String>>>,
    released: Arc<watch::Sender<u64>>,
    conversation_id: String,
}

impl Drop for ActiveRun {
    fn drop(&mut self) {
        self.active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.conversation_id);
        self.released
            .send_modify(|ends| *ends = ends.wrapping_add(1));
    }
}

/// Settings of the durable half, as the builder collects them.
#[derive(Clone)]
pub(crate) struct DurableSettings {
    pub(crate) owner: Option<String>,
    pub(crate) suspend_timeout: Duration,
    pub(crate) client_grace: Duration,
    pub(crate) lease: Duration,
    pub(crate) resume_on_resolve: bool,
    /// `None`: the default (on when `resume_on_resolve`); `Some(None)`: off.
    pub(crate) sweep_every: Option<Option<Duration>>,
}

impl Default for DurableSettings {
    fn default() -> Self {
        DurableSettings {
            owner: None,
            suspend_timeout: DEFAULT_SUSPEND_TIMEOUT,
            client_grace: DEFAULT_CLIENT_GRACE,
            lease: DEFAULT_LEASE,
            resume_on_resolve: true,
            sweep_every: None,
        }
    }
}

impl Durable {
    pub(crate) fn new(store: Arc<dyn Store>, settings: DurableSettings) -> Self {
        let (events, _) = broadcast::channel(1024);
        let sweep_every = match settings.sweep_every {
            Some(every) => every,
            // Within half a lease: a conversation whose holder died is
            // taken over soon after its lease runs out, also with short
            // leases.
            None => settings.resume_on_resolve.then_some(
                DEFAULT_SWEEP_INTERVAL
                    .min(settings.lease / 2)
                    .max(Duration::from_millis(10)),
            ),
        };
        Durable {
            store,
            owner: settings
                .owner
                .unwrap_or_else(|| format!("aptix-{}", uuid::Uuid::new_v4())),
            suspend_timeout: settings.suspend_timeout,
            client_grace: settings.client_grace,
            lease: settings.lease,
            resume_on_resolve: settings.resume_on_resolve,
            events,
            clients: Mutex::new(HashMap::new()),
            active: Arc::default(),
            released: Arc::new(watch::channel(0).0),
            sweep_every,
            worker_started: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether a run of this process drives the conversation now.
    fn is_active(&self, conversation_id: &str) -> bool {
        self.active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(conversation_id)
    }

    /// Registers a run of `conversation_id`, unless one is live here.
    fn begin(&self, conversation_id: &str) -> Option<ActiveRun> {
        let mut active = self
            .active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        active
            .insert(conversation_id.to_owned())
            .then(|| ActiveRun {
                active: self.active.clone(),
                released: self.released.clone(),
                conversation_id: conversation_id.to_owned(),
            })
    }

    fn lease_until(&self) -> i64 {
        now_ms().saturating_add(millis(self.lease))
    }

    pub(crate) async fn save(
        &self,
        conversation: &Conversation,
        status: ConversationStatus,
    ) -> Result<(), StoreError> {
        self.store
            .save_conversation(conversation, &self.owner, status, self.lease_until())
            .await
    }

    /// How many waits of the conversation are still pending.
    pub(crate) async fn pending_count(&self, conversation_id: &str) -> Result<usize, StoreError> {
        Ok(self
            .store
            .calls(conversation_id)
            .await?
            .iter()
            .filter(|record| record.state == CallState::Pending)
            .count())
    }

    /// Expires `record` if it is a pending wait whose deadline has passed:
    /// the one place a deadline fires, whoever notices it (a sweep, a
    /// revival, a late resolution). Returns whether this call expired it.
    pub(crate) async fn expire_if_due(
        &self,
        record: &CallRecord,
        now: i64,
    ) -> Result<bool, StoreError> {
        if record.state != CallState::Pending || record.deadline.is_none_or(|at| at > now) {
            return Ok(false);
        }
        let moved = self
            .store
            .transition(
                &record.conversation_id,
                &record.tool_call_id,
                record.step,
                CallState::Pending,
                CallState::Expired,
                None,
                now,
            )
            .await?;
        if moved {
            tracing::info!(
                conversation_id = %record.conversation_id,
                tool_call_id = %record.tool_call_id,
                tool = %record.tool,
                step = %record.step,
                "suspended call expired"
            );
        }
        Ok(moved)
    }

    pub(crate) fn client_attached(&self, conversation_id: &str) -> bool {
        self.clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(conversation_id)
            .is_some_and(|count| *count > 0)
    }
}

/// Renews a run's lease while its tools or its model take longer than a
/// lease, so that no other process takes over a live run. Stops when
/// dropped, with the run.
struct Heartbeat(tokio::task::JoinHandle<()>);

impl Heartbeat {
    fn start(durable: &Durable, conversation_id: &str) -> Self {
        let store = durable.store.clone();
        let owner = durable.owner.clone();
        let lease = durable.lease;
        let conversation_id = conversation_id.to_owned();
        Heartbeat(tokio::spawn(async move {
            let every = (lease / 3).max(Duration::from_millis(10));
            loop {
                tokio::time::sleep(every).await;
                let until = now_ms().saturating_add(millis(lease));
                match store.renew_lease(&conversation_id, &owner, until).await {
                    Ok(true) => {}
                    // Released between two turns (suspended, then taken
                    // back): nothing to renew until the next claim.
                    Ok(false) => tracing::debug!(%conversation_id, "no lease to renew"),
                    Err(error) => {
                        tracing::warn!(%conversation_id, %error, "could not renew the lease")
                    }
                }
            }
        }))
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.0.abort();
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
/// or a person needs to act on it.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingCall {
    /// The conversation.
    pub conversation_id: String,
    /// The call's id: pass it to [`Agent::resolve`].
    pub tool_call_id: String,
    /// The tool's name.
    pub tool: String,
    /// What it waits for.
    pub step: Step,
    /// The validated arguments.
    pub arguments: Value,
    /// What the approver sees or the client executes.
    pub payload: Value,
    /// When it expires (ms since the Unix epoch).
    pub deadline_ms: Option<i64>,
}

/// What [`Agent::ensure_started`] found and did.
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
    /// The agent was built without a store.
    #[error("the agent has no store: build it with `.store(...)` for durable conversations")]
    NoStore,
    /// No conversation with that id is stored.
    #[error("no conversation `{0}` is stored")]
    Unknown(String),
    /// Another process is running the conversation.
    #[error("conversation `{0}` is being run by another process")]
    Busy(String),
    /// Calls of the conversation wait for resolutions; new input would
    /// abandon them.
    #[error(
        "conversation `{conversation_id}` has {pending} suspended call(s); resolve them with `Agent::resolve` first"
    )]
    Suspended {
        /// The conversation.
        conversation_id: String,
        /// How many waits are pending.
        pending: usize,
    },
    /// Results of suspended calls come through [`Agent::resolve`], which
    /// validates them and records them durably.
    #[error("send results of suspended calls with `Agent::resolve`, not as input")]
    ResultsThroughResolve,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Marks a conversation as having a client attached in this process, for
/// as long as it lives: client calls of the conversation then wait their
/// full `suspend_timeout` instead of the short headless grace period.
#[must_use = "the client counts as attached only while this value lives"]
pub struct ClientAttachment {
    agent: Agent,
    conversation_id: String,
}

impl std::fmt::Debug for ClientAttachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientAttachment")
            .field("conversation_id", &self.conversation_id)
            .finish()
    }
}

impl Drop for ClientAttachment {
    fn drop(&mut self) {
        if let Some(durable) = self.agent.durable() {
            let mut clients = durable
                .clients
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(count) = clients.get_mut(&self.conversation_id) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    clients.remove(&self.conversation_id);
                }
            }
        }
    }
}

impl Agent {
    pub(crate) fn durable(&self) -> Option<&Durable> {
        self.inner.durable.as_ref()
    }

    pub(crate) fn ids_for(&self, conversation: &Conversation, tool_call_id: &str) -> EnvelopeIds {
        EnvelopeIds {
            tool_call_id: tool_call_id.into(),
            conversation_id: Some(conversation.id.as_str().into()),
            session_id: conversation.session_id.as_deref().map(Into::into),
        }
    }

    pub(crate) fn wait_timeout(&self, durable: &Durable, tool: &str) -> Duration {
        self.inner
            .executor
            .catalog()
            .get(tool)
            .and_then(|definition| definition.suspend_timeout())
            .unwrap_or(durable.suspend_timeout)
    }

    /// The events of background runs (after resolutions, deadlines and
    /// revivals), of every conversation this agent drives.
    pub fn subscribe(&self) -> broadcast::Receiver<ConversationEvent> {
        match self.durable() {
            Some(durable) => durable.events.subscribe(),
            None => broadcast::channel(1).1,
        }
    }

    /// Stores `conversation` (e.g. with its system prompt) unless one with
    /// its id exists. Returns whether it was stored.
    pub async fn create_conversation(
        &self,
        conversation: &Conversation,
    ) -> Result<bool, DurableError> {
        let durable = self.durable().ok_or(DurableError::NoStore)?;
        Ok(durable
            .store
            .create_conversation(conversation, now_ms())
            .await?)
    }

    /// The stored conversation `conversation_id`.
    pub async fn conversation(
        &self,
        conversation_id: &str,
    ) -> Result<Option<StoredConversation>, DurableError> {
        let durable = self.durable().ok_or(DurableError::NoStore)?;
        Ok(durable.store.load_conversation(conversation_id).await?)
    }

    /// The unresolved waits of a conversation, in call order.
    pub async fn pending(&self, conversation_id: &str) -> Result<Vec<PendingCall>, DurableError> {
        let durable = self.durable().ok_or(DurableError::NoStore)?;
        self.ensure_deadline_worker();
        let records = durable.store.calls(conversation_id).await?;
        Ok(records
            .into_iter()
            .filter(|record| record.state == CallState::Pending)
            .map(|record| PendingCall {
                conversation_id: record.conversation_id,
                tool_call_id: record.tool_call_id,
                tool: record.tool,
                step: record.step,
                arguments: serde_json::from_str(&record.arguments).unwrap_or(Value::Null),
                payload: serde_json::from_str(&record.payload).unwrap_or(Value::Null),
                deadline_ms: record.deadline,
            })
            .collect())
    }

    /// Runs the stored conversation `conversation_id` (created empty if
    /// absent) with `input`, saving it as it goes. The returned stream ends
    /// with one `Done`; suspended calls are then in the store, and
    /// [`Agent::resolve`] continues the conversation in the background.
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
        let durable = self.durable().ok_or(DurableError::NoStore)?;
        self.ensure_deadline_worker();
        if matches!(input, Input::ToolResults(_)) {
            return Err(DurableError::ResultsThroughResolve);
        }
        let store = &durable.store;
        let run = durable
            .begin(conversation_id)
            .ok_or_else(|| DurableError::Busy(conversation_id.to_owned()))?;
        let claim = || {
            store.claim_conversation(
                conversation_id,
                &durable.owner,
                now_ms(),
                durable.lease_until(),
            )
        };
        // Most sends continue a stored conversation: claim first, and
        // create only when there is nothing to claim.
        let claimed = match claim().await? {
            Some(claimed) => claimed,
            None => {
                store
                    .create_conversation(&Conversation::new(conversation_id), now_ms())
                    .await?;
                claim()
                    .await?
                    .ok_or_else(|| DurableError::Busy(conversation_id.to_owned()))?
            }
        };
        let pending = durable.pending_count(conversation_id).await?;
        if pending > 0 {
            durable
                .save(&claimed.conversation, ConversationStatus::Suspended)
                .await?;
            return Err(DurableError::Suspended {
                conversation_id: conversation_id.to_owned(),
                pending,
            });
        }
        Ok(self.clone().drive(claimed.conversation, input, run))
    }

    /// Revives a stored conversation after a restart, or in a process that
    /// never ran it: expires waits whose deadline passed, and when nothing
    /// is pending and nobody holds it, resumes it in the background (a run
    /// interrupted by a crash continues; a server call it was executing is
    /// run again only if its tool is idempotent).
    pub async fn ensure_started(&self, conversation_id: &str) -> Result<Revival, DurableError> {
        let durable = self.durable().ok_or(DurableError::NoStore)?;
        self.ensure_deadline_worker();
        let store = &durable.store;
        let stored = store
            .load_conversation(conversation_id)
            .await?
            .ok_or_else(|| DurableError::Unknown(conversation_id.to_owned()))?;
        let now = now_ms();
        for record in store.calls(conversation_id).await? {
            durable.expire_if_due(&record, now).await?;
        }
        match stored.status {
            ConversationStatus::Idle => Ok(Revival::Idle),
            ConversationStatus::Running
                if stored.lease_until >= now && stored.owner.as_deref() != Some(&durable.owner) =>
            {
                // The holder may have died: take over when its lease runs
                // out, unless it finishes (or renews) first.
                self.resume_in_background(conversation_id);
                Ok(Revival::Busy)
            }
            _ => {
                let revival = self.resume_if_ready(conversation_id, 0).await?;
                if revival == Revival::Busy {
                    // Held by a run of this process that may be past the
                    // point where it looks for resolutions, or claimed by
                    // another process just now: resumed when that run ends
                    // or its lease runs out, as after a resolution.
                    self.resume_in_background(conversation_id);
                }
                Ok(revival)
            }
        }
    }

    /// Revives every conversation that was running or suspended (see
    /// [`Agent::ensure_started`]): what a process calls once at start-up.
    /// Returns how many it resumed.
    pub async fn revive_all(&self) -> Result<usize, DurableError> {
        let durable = self.durable().ok_or(DurableError::NoStore)?;
        let mut resumed = 0;
        for status in [ConversationStatus::Running, ConversationStatus::Suspended] {
            for id in durable
                .store
                .conversations_with_status(status, usize::MAX)
                .await?
            {
                if self.ensure_started(&id).await? == Revival::Resumed {
                    resumed += 1;
                }
            }
        }
        Ok(resumed)
    }

    /// Expires every wait whose deadline passed (in any conversation of the
    /// store) and resumes the conversations that then have nothing pending,
    /// those whose holder's lease ran out (it crashed), and suspended ones
    /// whose waits were all resolved but that nobody resumed (the resolver
    /// does not resume, or failed to).
    /// Returns how many waits it expired. Deadlines live in the store, so
    /// any process may sweep them, and they fire after a restart too.
    ///
    /// A durable agent runs this itself (see
    /// [`AgentBuilder::deadline_worker`](super::AgentBuilder::deadline_worker)).
    pub async fn sweep_deadlines(&self) -> Result<usize, DurableError> {
        let durable = self.durable().ok_or(DurableError::NoStore)?;
        let now = now_ms();
        let mut expired = 0;
        let mut conversations = BTreeSet::new();
        for record in durable.store.due_calls(now, 512).await? {
            if durable.expire_if_due(&record, now).await? {
                expired += 1;
                conversations.insert(record.conversation_id);
            }
        }
        // Conversations whose holder stopped renewing its lease (a crash)
        // are taken over here too, so a worker alone revives them.
        for conversation_id in durable
            .store
            .conversations_with_status(ConversationStatus::Running, 512)
            .await?
        {
            if let Some(stored) = durable.store.load_conversation(&conversation_id).await?
                && stored.status == ConversationStatus::Running
                && stored.lease_until < now
            {
                conversations.insert(conversation_id);
            }
        }
        conversations.extend(durable.store.suspended_without_pending(512).await?);
        for conversation_id in conversations {
            self.resume_in_background(&conversation_id);
        }
        Ok(expired)
    }

    /// Starts the agent's own deadline worker, once, if it has one and a
    /// runtime is there to run it (called when the agent is built, and
    /// again by the durable entry points for an agent built outside one).
    pub(crate) fn ensure_deadline_worker(&self) {
        let Some(durable) = self.durable() else {
            return;
        };
        let Some(every) = durable.sweep_every else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_err()
            || durable
                .worker_started
                .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return;
        }
        drop(self.spawn_deadline_worker(every));
    }

    /// Sweeps deadlines every `every` until the agent's last clone is
    /// dropped or the task is aborted.
    pub fn spawn_deadline_worker(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            // The first sweep comes one period after the start, not at it:
            // a process that has just started revives its conversations
            // itself (`revive_all`, `ensure_started`), and a sweep at the
            // same moment would only race it for the claim.
            let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                let agent = Agent { inner };
                if let Err(error) = agent.sweep_deadlines().await {
                    tracing::warn!(%error, "sweeping deadlines failed; retrying at the next tick");
                }
            }
        })
    }

    /// Declares that a client (a browser tab, an IDE) is attached to the
    /// conversation in this process, and gives its pending client calls
    /// their full `suspend_timeout` from now.
    pub async fn attach_client(
        &self,
        conversation_id: &str,
    ) -> Result<ClientAttachment, DurableError> {
        let durable = self.durable().ok_or(DurableError::NoStore)?;
        {
            let mut clients = durable
                .clients
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *clients.entry(conversation_id.to_owned()).or_default() += 1;
        }
        let attachment = ClientAttachment {
            agent: self.clone(),
            conversation_id: conversation_id.to_owned(),
        };
        let now = now_ms();
        for record in durable.store.calls(conversation_id).await? {
            if record.state == CallState::Pending && record.step == Step::Client {
                let deadline = now.saturating_add(millis(self.wait_timeout(durable, &record.tool)));
                durable
                    .store
                    .set_deadline(
                        conversation_id,
                        &record.tool_call_id,
                        Step::Client,
                        Some(deadline),
                    )
                    .await?;
            }
        }
        Ok(attachment)
    }

    /// Resumes the conversation in a background task if nothing of it is
    /// pending and nobody holds it; what a resolution or an expiry triggers.
    ///
    /// When another process holds it, this waits for that process's lease
    /// to run out and tries again: a live holder renews its lease and picks
    /// resolutions up itself when it saves, but a dead one never will.
    pub(crate) fn resume_in_background(&self, conversation_id: &str) {
        self.resume_in_background_after(conversation_id, 0);
    }

    /// [`Agent::resume_in_background`], counting `failures` store errors
    /// already met on the way (a resumed run the store stopped retries
    /// with the same budget).
    fn resume_in_background_after(&self, conversation_id: &str, failures: u32) {
        let agent = self.clone();
        let conversation_id = conversation_id.to_owned();
        tokio::spawn(async move {
            let Some(durable) = agent.durable() else {
                return;
            };
            let mut failures = failures;
            loop {
                // Subscribed before trying, so that the end of a run of this
                // process between the try and the wait is not missed.
                let mut released = durable.released.subscribe();
                let error = match agent.resume_if_ready(&conversation_id, failures).await {
                    Ok(Revival::Busy) => None,
                    Ok(_) => return,
                    Err(error) => Some(error),
                };
                if let Some(error) = error {
                    // A sweep picks the conversation up later if the store
                    // stays down.
                    failures += 1;
                    if failures > RESUME_RETRIES {
                        tracing::warn!(%conversation_id, %error, "could not resume the conversation; a sweep will");
                        return;
                    }
                    tracing::debug!(%conversation_id, %error, "could not resume the conversation; retrying");
                    tokio::time::sleep(Duration::from_millis(50 << failures)).await;
                    continue;
                }
                if durable.is_active(&conversation_id) {
                    // A run of this process holds it. It may be past the
                    // point where it looks for resolutions: try again when
                    // it ends (the lease bounds the wait, in case the end
                    // was missed).
                    let _ = tokio::time::timeout(durable.lease, released.changed()).await;
                    continue;
                }
                let held = match durable.store.load_conversation(&conversation_id).await {
                    Ok(Some(stored)) => stored,
                    Ok(None) => return,
                    Err(error) => {
                        tracing::warn!(%conversation_id, %error, "could not resume the conversation; a sweep will");
                        return;
                    }
                };
                if held.status != ConversationStatus::Running {
                    // Claimed and released in between: try again.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                let wait = held.lease_until.saturating_sub(now_ms()).max(0) + 20;
                tracing::debug!(%conversation_id, wait_ms = wait, "held by another process; retrying when its lease runs out");
                tokio::time::sleep(Duration::from_millis(u64::try_from(wait).unwrap_or(20))).await;
            }
        });
    }

    /// Resumes the conversation now if nothing is pending and nobody holds
    /// it. A resumed run the store stops is resumed again (with backoff,
    /// `failures` counting the store errors met so far, at most
    /// `RESUME_RETRIES`), so a transient store error does not leave the
    /// conversation to the next sweep.
    async fn resume_if_ready(
        &self,
        conversation_id: &str,
        failures: u32,
    ) -> Result<Revival, DurableError> {
        let durable = self.durable().ok_or(DurableError::NoStore)?;
        match durable.store.load_conversation(conversation_id).await? {
            // Finished meanwhile (by the run that held it): nothing to do.
            Some(stored) if stored.status == ConversationStatus::Idle => return Ok(Revival::Idle),
            None => return Ok(Revival::Idle),
            Some(_) => {}
        }
        let pending = durable.pending_count(conversation_id).await?;
        if pending > 0 {
            return Ok(Revival::Waiting { pending });
        }
        let Some(run) = durable.begin(conversation_id) else {
            return Ok(Revival::Busy);
        };
        let Some(claimed) = durable
            .store
            .claim_conversation(
                conversation_id,
                &durable.owner,
                now_ms(),
                durable.lease_until(),
            )
            .await?
        else {
            return Ok(Revival::Busy);
        };
        let mut run = self
            .clone()
            .drive(claimed.conversation, Input::Continue, run);
        let events = durable.events.clone();
        let conversation_id = conversation_id.to_owned();
        let agent = self.clone();
        tokio::spawn(async move {
            let mut store_failed = false;
            while let Some(event) = run.next().await {
                store_failed = matches!(
                    event,
                    AgentEvent::Done {
                        reason: DoneReason::StoreFailed(_),
                        ..
                    }
                );
                // Nobody listening is fine: the store has everything.
                let _ = events.send(ConversationEvent {
                    conversation_id: conversation_id.clone(),
                    event,
                });
            }
            drop(run);
            if store_failed {
                let failures = failures + 1;
                if failures > RESUME_RETRIES {
                    tracing::warn!(%conversation_id, "a resumed run stopped on store errors again; a sweep will continue it");
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50 << failures)).await;
                agent.resume_in_background_after(&conversation_id, failures);
            }
        });
        Ok(Revival::Resumed)
    }

    /// The run of a claimed conversation: settle the ledger into results,
    /// run model turns while nothing is pending, save, release.
    fn drive(
        self,
        mut conversation: Conversation,
        input: Input,
        active: ActiveRun,
    ) -> AgentStream<'static> {
        let span = tracing::info_span!("durable_run", conversation_id = %conversation.id);
        let stream = async_stream::stream! {
            // Held until the run is over: released (with the heartbeat)
            // before the final `Done` is handed out, so that a resolution
            // made by whoever reads it finds the conversation free.
            let mut active = Some(active);
            let agent = self;
            let Some(durable) = agent.durable() else {
                yield AgentEvent::Done { reason: DoneReason::StoreFailed("the agent has no store".into()), usage: Usage::default() };
                return;
            };
            let mut heartbeat = Some(Heartbeat::start(durable, &conversation.id));
            let ledger = Ledger { durable };
            let cancellation = CancellationToken::new();
            let context = agent.context_for(&conversation, &cancellation);
            let mut usage = Usage::default();
            // Added once the last turn's calls are settled: their results
            // belong right after their calls, before anything new.
            let mut new_input = match input {
                Input::User(text) => Some(text),
                _ => None,
            };
            loop {
                let settled = agent.settle(&mut conversation, &context, ledger).await;
                let (events, waiting) = match settled {
                    Ok(settled) => settled,
                    Err(error) => {
                        drop(heartbeat.take());
                        give_up_lease(durable, &conversation.id).await;
                        drop(active.take());
                        yield AgentEvent::Done { reason: DoneReason::StoreFailed(error.to_string()), usage };
                        return;
                    }
                };
                for event in events {
                    yield event;
                }
                if let Some(text) = new_input.take() {
                    if waiting.is_empty() {
                        conversation.messages.push(Message::user(text));
                    } else {
                        tracing::info!(waiting = waiting.len(), "settling the last turn left calls waiting; the new input was not added");
                    }
                }
                let reason = if !waiting.is_empty() {
                    DoneReason::Suspended(waiting)
                } else if !needs_model_turn(&conversation) {
                    DoneReason::Completed
                } else {
                    if let Err(error) = durable.save(&conversation, ConversationStatus::Running).await {
                        drop(heartbeat.take());
                        give_up_lease(durable, &conversation.id).await;
                        drop(active.take());
                        yield AgentEvent::Done { reason: DoneReason::StoreFailed(error.to_string()), usage };
                        return;
                    }
                    let mut reason = DoneReason::MaxIterations;
                    {
                        let mut run = agent.run_loop(&mut conversation, Input::Continue, cancellation.clone(), Some(ledger));
                        while let Some(event) = run.next().await {
                            match event {
                                AgentEvent::Done { reason: done, usage: used } => {
                                    reason = done;
                                    usage += used;
                                }
                                other => yield other,
                            }
                        }
                    }
                    reason
                };
                // A run the store stopped is not over, nor is one that left
                // calls of its last turn unanswered (the save right after the
                // model's turn failed, before any of them was recorded): it is
                // saved running with its lease given up, so that
                // `ensure_started`, a sweep or the next `send` settles those
                // calls and goes on. Saved idle, its calls would never get a
                // result.
                let status = match &reason {
                    DoneReason::Suspended(_) => ConversationStatus::Suspended,
                    DoneReason::StoreFailed(_) => ConversationStatus::Running,
                    _ if has_unanswered_calls(&conversation) => ConversationStatus::Running,
                    _ => ConversationStatus::Idle,
                };
                let lease_until = if status == ConversationStatus::Running {
                    now_ms()
                } else {
                    durable.lease_until()
                };
                if let Err(error) = durable.store.save_conversation(&conversation, &durable.owner, status, lease_until).await {
                    drop(heartbeat.take());
                    give_up_lease(durable, &conversation.id).await;
                    drop(active.take());
                    yield AgentEvent::Done { reason: DoneReason::StoreFailed(error.to_string()), usage };
                    return;
                }
                if status == ConversationStatus::Suspended {
                    // A resolution that landed while this run held the
                    // conversation could not resume it; this run must.
                    match agent.reclaim_if_settled(&conversation.id).await {
                        Ok(Some(stored)) => {
                            conversation = stored.conversation;
                            continue;
                        }
                        Ok(None) => {}
                        Err(error) => tracing::warn!(%error, "could not check for resolutions that arrived during the run"),
                    }
                }
                drop(heartbeat.take());
                drop(active.take());
                yield AgentEvent::Done { reason, usage };
                return;
            }
        };
        Box::pin(tracing_futures::Instrument::instrument(stream, span))
    }

    async fn reclaim_if_settled(
        &self,
        conversation_id: &str,
    ) -> Result<Option<StoredConversation>, StoreError> {
        let Some(durable) = self.durable() else {
            return Ok(None);
        };
        if durable.pending_count(conversation_id).await? > 0 {
            return Ok(None);
        }
        durable
            .store
            .claim_conversation(
                conversation_id,
                &durable.owner,
                now_ms(),
                durable.lease_until(),
            )
            .await
    }
}

/// After a store error ended a run: gives up the conversation's lease (it
/// stays running, as saved last), so that a sweep or `ensure_started`
/// continues it at once rather than after a whole lease. Best effort: a
/// store that is down keeps the lease, which then runs out by itself.
async fn give_up_lease(durable: &Durable, conversation_id: &str) {
    if let Err(error) = durable
        .store
        .renew_lease(conversation_id, &durable.owner, now_ms())
        .await
    {
        tracing::debug!(%conversation_id, %error, "could not give up the lease after a store error");
    }
}

/// How often a background resume retries after a store error before it
/// leaves the conversation to the sweep.
const RESUME_RETRIES: u32 = 5;

/// Whether the transcript ends where the model must speak next.
fn needs_model_turn(conversation: &Conversation) -> bool {
    matches!(
        conversation.messages.last(),
        Some(Message::User { .. } | Message::Tool { .. })
    )
}
