//! Durable state of conversations that outlive a process: the transcript,
//! the per-call ledger, and the deadlines of suspended calls.
//!
//! The agent never keeps a suspended call only in memory. Every fact that a
//! restart or a second process needs is a row here, and every change to the
//! ledger is a compare-and-swap ([`Store::transition`]), so two processes
//! resolving the same call cannot both win. Time is passed in by the caller
//! (milliseconds since the Unix epoch), never read by the store, so the same
//! semantics hold for every backend and tests can move the clock.
//!
//! The writes of one step of a run (a suspension, a resolution, the end of
//! a resumed run) go to the store as one [`Batch`]: one transaction, so one
//! commit (and one `fsync`) per step, and a crash or a refused
//! compare-and-swap in the middle leaves none of them behind.
//!
//! | backend | for |
//! | --- | --- |
//! | [`MemoryStore`] | tests, single-process programs that need no restart |
//! | `SqliteStore` (feature `sqlite`) | the embedded default: one file, WAL mode |
//! | `PostgresStore` (feature `postgres`) | many processes sharing conversations |

mod memory;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;

use std::fmt;
use std::future::Future;
use std::pin::Pin;

pub use memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;

use serde::{Deserialize, Serialize};

use crate::transcript::Conversation;

/// The future every store operation returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or refused the statement.
    #[error("the conversation store failed: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A row could not be read back (e.g. a transcript that is not JSON).
    #[error("the conversation store holds unreadable data: {0}")]
    Corrupt(String),
    /// A save by a process that no longer holds the conversation: another
    /// process claimed it after this one's lease ran out.
    #[error("conversation `{conversation_id}` is no longer held by `{owner}`")]
    LostLease {
        /// The conversation.
        conversation_id: String,
        /// The owner that tried to save.
        owner: String,
    },
    /// The database was set up by a newer Aptix, whose tables this one
    /// could misread: upgrade every process before any of them writes.
    #[error(
        "the conversation store's schema is version {found}, newer than the {supported} this \
         Aptix knows: upgrade this process"
    )]
    SchemaTooNew {
        /// The version the database holds.
        found: i64,
        /// The newest version this build reads and writes.
        supported: i64,
    },
}

impl StoreError {
    /// Wraps a backend's error.
    pub fn backend(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        StoreError::Backend(Box::new(error))
    }
}

/// Where a stored conversation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConversationStatus {
    /// Nobody is working on it; it waits for user input.
    Idle,
    /// A process holds it (until its lease runs out) and is running turns.
    Running,
    /// Calls of its last turn wait for approvals, clients or people.
    Suspended,
}

impl ConversationStatus {
    /// The stored spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            ConversationStatus::Idle => "idle",
            ConversationStatus::Running => "running",
            ConversationStatus::Suspended => "suspended",
        }
    }

    /// Reads the stored spelling.
    pub fn parse(text: &str) -> Result<Self, StoreError> {
        match text {
            "idle" => Ok(ConversationStatus::Idle),
            "running" => Ok(ConversationStatus::Running),
            "suspended" => Ok(ConversationStatus::Suspended),
            other => Err(StoreError::Corrupt(format!(
                "unknown conversation status `{other}`"
            ))),
        }
    }
}

/// A conversation as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredConversation {
    /// The conversation and its transcript.
    pub conversation: Conversation,
    /// Where it stands.
    pub status: ConversationStatus,
    /// The process that holds it while `Running`.
    pub owner: Option<String>,
    /// Until when the owner's hold is valid (ms since the epoch).
    pub lease_until: i64,
    /// Bumped by every save; tells readers the transcript changed.
    pub version: i64,
}

/// Which wait (or which execution) of a call a ledger entry records. A gated
/// client call has two entries: `Approval`, then `Client`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Waiting for a person to approve, change or deny the call.
    Approval,
    /// Waiting for a client (browser, IDE) to execute it and send the result.
    Client,
    /// Waiting for a person's answer, which is the result.
    Human,
    /// A server tool running here: recorded before it starts, so that a
    /// crash is noticed and the call is never silently run twice.
    Execution,
}

impl Step {
    /// The stored spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Step::Approval => "approval",
            Step::Client => "client",
            Step::Human => "human",
            Step::Execution => "execution",
        }
    }

    /// Reads the stored spelling.
    pub fn parse(text: &str) -> Result<Self, StoreError> {
        match text {
            "approval" => Ok(Step::Approval),
            "client" => Ok(Step::Client),
            "human" => Ok(Step::Human),
            "execution" => Ok(Step::Execution),
            other => Err(StoreError::Corrupt(format!("unknown call step `{other}`"))),
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The ledger's state machine. Waits go `Pending → Resolved | Expired |
/// Cancelled`; executions go `Executing → Done | Cancelled`. Nothing leaves
/// a final state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallState {
    /// Waiting for its resolution.
    Pending,
    /// Resolved; `outcome` holds the resolution.
    Resolved,
    /// Its deadline passed first.
    Expired,
    /// Abandoned (e.g. interrupted by a crash and not idempotent).
    Cancelled,
    /// A server tool started running and has not finished.
    Executing,
    /// A server tool finished; `outcome` holds its envelope.
    Done,
}

impl CallState {
    /// The stored spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            CallState::Pending => "pending",
            CallState::Resolved => "resolved",
            CallState::Expired => "expired",
            CallState::Cancelled => "cancelled",
            CallState::Executing => "executing",
            CallState::Done => "done",
        }
    }

    /// Reads the stored spelling.
    pub fn parse(text: &str) -> Result<Self, StoreError> {
        match text {
            "pending" => Ok(CallState::Pending),
            "resolved" => Ok(CallState::Resolved),
            "expired" => Ok(CallState::Expired),
            "cancelled" => Ok(CallState::Cancelled),
            "executing" => Ok(CallState::Executing),
            "done" => Ok(CallState::Done),
            other => Err(StoreError::Corrupt(format!("unknown call state `{other}`"))),
        }
    }

    /// Whether the entry can still change.
    pub const fn is_open(self) -> bool {
        matches!(self, CallState::Pending | CallState::Executing)
    }
}

impl fmt::Display for CallState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One ledger entry: one wait or one execution of one tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// The conversation.
    pub conversation_id: String,
    /// The call's id, as the model gave it (also the idempotency key).
    pub tool_call_id: String,
    /// Which wait or execution this is.
    pub step: Step,
    /// The tool's name.
    pub tool: String,
    /// The arguments as validated (JSON text).
    pub arguments: String,
    /// What the approver sees or the client executes (JSON text).
    pub payload: String,
    /// Where it stands.
    pub state: CallState,
    /// The resolution (for waits) or the result envelope (for executions),
    /// as JSON text, once there is one.
    pub outcome: Option<String>,
    /// When a pending wait expires (ms since the epoch).
    pub deadline: Option<i64>,
    /// When the entry was written (ms since the epoch).
    pub created_at: i64,
    /// When it last changed (ms since the epoch).
    pub updated_at: i64,
    /// Which call of the transcript this row is for: the SHA-256 of the
    /// tool name and argument text the model wrote (a hook may rename or
    /// rewrite a call, and its `_reasoningForCall` is taken out, before it
    /// is recorded, so `tool` and `arguments` need not be the model's).
    /// `None` in rows written before it was kept, which are matched by
    /// `tool` instead.
    pub requested: Option<String>,
    /// Why the model made the call, when it said so (its
    /// `_reasoningForCall`, which is taken out of `arguments`): kept for
    /// whoever decides on a wait after a restart. `None` when the model gave
    /// no reason, and in rows written before it was kept.
    pub reasoning: Option<String>,
}

/// One write of a [`Batch`]. Each is the write of the [`Store`] method of
/// the same name, with the same condition; a write whose condition does not
/// hold is refused, and a refused write undoes the whole batch.
#[derive(Debug, Clone, PartialEq)]
pub enum Write<'a> {
    /// [`Store::create_conversation`]: stores the conversation as `Idle`;
    /// refused when one with its id exists.
    CreateConversation(&'a Conversation),
    /// Stores the conversation as `Idle` when none with its id exists;
    /// never refused (an existing one is left as it is).
    EnsureConversation(&'a Conversation),
    /// [`Store::claim_conversation`]; refused where that returns `None`,
    /// and, when `version` is given, where the stored version is another.
    /// The claimed conversation is in [`Applied::All`].
    ClaimConversation {
        /// The conversation.
        id: &'a str,
        /// Who takes it.
        owner: &'a str,
        /// The time the lease is compared with.
        now: i64,
        /// Until when `owner` holds it.
        lease_until: i64,
        /// The version the conversation must still have: a claim made
        /// together with a save of what was read at that version, so that
        /// the save cannot overwrite a change made since.
        version: Option<i64>,
    },
    /// [`Store::save_conversation`]; refused where that fails with
    /// [`StoreError::LostLease`].
    SaveConversation {
        /// The conversation and its transcript.
        conversation: &'a Conversation,
        /// Who holds it.
        owner: &'a str,
        /// Where it stands after the save.
        status: ConversationStatus,
        /// Until when `owner` keeps holding it (`Running` only).
        lease_until: i64,
    },
    /// [`Store::insert_call`]; refused where that returns false.
    InsertCall(&'a CallRecord),
    /// [`Store::transition`]; refused where that returns false.
    Transition {
        /// The conversation.
        conversation_id: &'a str,
        /// The call.
        tool_call_id: &'a str,
        /// Which of its entries.
        step: Step,
        /// The state it must be in.
        from: CallState,
        /// The state it moves to.
        to: CallState,
        /// The outcome to set, when given.
        outcome: Option<&'a str>,
        /// The new `updated_at`.
        now: i64,
    },
    /// [`Store::set_deadline`]; refused where that returns false.
    SetDeadline {
        /// The conversation.
        conversation_id: &'a str,
        /// The call.
        tool_call_id: &'a str,
        /// Which of its entries.
        step: Step,
        /// The new deadline.
        deadline: Option<i64>,
    },
}

/// Writes that take effect together, in order, in one transaction: all of
/// them, or none when one is refused or the store fails. One batch is one
/// commit, however many rows it changes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch<'a> {
    writes: Vec<Write<'a>>,
}

impl<'a> Batch<'a> {
    /// An empty batch (applying it changes nothing and commits nothing).
    pub fn new() -> Self {
        Batch { writes: Vec::new() }
    }

    /// Adds a write at the end.
    pub fn push(&mut self, write: Write<'a>) -> &mut Self {
        self.writes.push(write);
        self
    }

    /// Adds a write at the end.
    pub fn with(mut self, write: Write<'a>) -> Self {
        self.writes.push(write);
        self
    }

    /// The writes, in the order they are applied.
    pub fn writes(&self) -> &[Write<'a>] {
        &self.writes
    }

    /// Whether the batch has no write.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// How many writes it has.
    pub fn len(&self) -> usize {
        self.writes.len()
    }
}

/// What applying a [`Batch`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// Every write took effect.
    All {
        /// The conversation as the batch's last
        /// [`Write::ClaimConversation`] left it, if it had one.
        claimed: Option<StoredConversation>,
    },
    /// The write at `index` was refused (its condition did not hold when
    /// the batch reached it); nothing of the batch was written.
    Refused {
        /// Its position in [`Batch::writes`].
        index: usize,
    },
}

impl Applied {
    /// Whether every write took effect.
    pub fn is_all(&self) -> bool {
        matches!(self, Applied::All { .. })
    }
}

/// The durable state behind [`crate::Agent`]'s suspension and resolution.
///
/// Implementations must make [`Store::claim_conversation`] and
/// [`Store::transition`] atomic compare-and-swaps across every process that
/// shares the store, and [`Store::apply`] one transaction; everything else
/// is plain reads and writes.
/// `aptix_testkit::store_suite` is the conformance suite every backend passes.
pub trait Store: Send + Sync + 'static {
    /// Stores a new conversation as `Idle`. Returns false, changing nothing,
    /// when one with that id exists.
    fn create_conversation<'a>(
        &'a self,
        conversation: &'a Conversation,
        now: i64,
    ) -> StoreFuture<'a, bool>;

    /// The conversation `id`, if stored.
    fn load_conversation<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredConversation>>;

    /// Takes the conversation for `owner` until `lease_until`: succeeds when
    /// it is not `Running`, or its lease ran out before `now`, or `owner`
    /// already holds it. On success it is `Running` and held by `owner`, and
    /// the stored conversation is returned; otherwise `None` (also when it
    /// does not exist).
    fn claim_conversation<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        now: i64,
        lease_until: i64,
    ) -> StoreFuture<'a, Option<StoredConversation>>;

    /// Writes the transcript and status of a conversation `owner` holds, and
    /// extends (`Running`) or gives up (`Idle`, `Suspended`) its hold.
    /// Fails with [`StoreError::LostLease`] when `owner` does not hold it.
    fn save_conversation<'a>(
        &'a self,
        conversation: &'a Conversation,
        owner: &'a str,
        status: ConversationStatus,
        lease_until: i64,
    ) -> StoreFuture<'a, ()>;

    /// Extends the hold of `owner` on a `Running` conversation to
    /// `lease_until`, changing nothing else: the heartbeat of a run whose
    /// tools or model take longer than a lease. Returns false (changing
    /// nothing) when `owner` does not hold it.
    fn renew_lease<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        lease_until: i64,
    ) -> StoreFuture<'a, bool>;

    /// Ids of the conversations with `status`, oldest change first, at most
    /// `limit`: what a restarted process looks at to revive conversations.
    fn conversations_with_status<'a>(
        &'a self,
        status: ConversationStatus,
        limit: usize,
    ) -> StoreFuture<'a, Vec<String>>;

    /// Adds a ledger entry. Returns false, changing nothing, when an entry
    /// for the same conversation, call and step exists.
    fn insert_call<'a>(&'a self, record: &'a CallRecord) -> StoreFuture<'a, bool>;

    /// One ledger entry.
    fn call<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        step: Step,
    ) -> StoreFuture<'a, Option<CallRecord>>;

    /// Every ledger entry of a conversation, by creation time then call id
    /// then step.
    fn calls<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Vec<CallRecord>>;

    /// Moves an entry from `from` to `to`, setting `outcome` (when given)
    /// and `updated_at = now`, only if it is in `from`: the compare-and-swap
    /// that makes one resolution win. Returns whether it moved.
    // One atomic statement needs the whole key, both states and the change.
    #[allow(clippy::too_many_arguments)]
    fn transition<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        step: Step,
        from: CallState,
        to: CallState,
        outcome: Option<&'a str>,
        now: i64,
    ) -> StoreFuture<'a, bool>;

    /// Changes the deadline of a `Pending` entry. Returns whether it did.
    fn set_deadline<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        step: Step,
        deadline: Option<i64>,
    ) -> StoreFuture<'a, bool>;

    /// `Pending` entries whose deadline is at or before `now`, earliest
    /// first, at most `limit`, across all conversations.
    fn due_calls<'a>(&'a self, now: i64, limit: usize) -> StoreFuture<'a, Vec<CallRecord>>;

    /// Applies `batch` in one transaction: every write, in order, or
    /// (when one is refused, or the store fails) none of them.
    ///
    /// Every store must make this one transaction: the durable runs put a
    /// step's writes in one batch and rely on none of them taking effect
    /// when one is refused (a resolution with the claim of the run it
    /// resumes, a turn with the first record of its calls). A wrapper
    /// forwards it whole.
    fn apply<'a>(&'a self, batch: &'a Batch<'a>) -> StoreFuture<'a, Applied>;

    /// Ids of the `Suspended` conversations that have no `Pending` entry,
    /// oldest change first, at most `limit`: every wait was resolved or
    /// expired, and nobody resumed the conversation yet (its resolver does
    /// not resume, or failed before it could). A sweep resumes them.
    ///
    /// The provided body reads every suspended conversation's ledger; the
    /// stores of this crate answer with one query.
    fn suspended_without_pending<'a>(&'a self, limit: usize) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let mut found = Vec::new();
            for id in self
                .conversations_with_status(ConversationStatus::Suspended, usize::MAX)
                .await?
            {
                if found.len() >= limit {
                    break;
                }
                let calls = self.calls(&id).await?;
                if calls
                    .iter()
                    .all(|record| record.state != CallState::Pending)
                {
                    found.push(id);
                }
            }
            Ok(found)
        })
    }
}

impl<S: Store + ?Sized> Store for std::sync::Arc<S> {
    fn create_conversation<'a>(
        &'a self,
        conversation: &'a Conversation,
        now: i64,
    ) -> StoreFuture<'a, bool> {
        (**self).create_conversation(conversation, now)
    }

    fn load_conversation<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredConversation>> {
        (**self).load_conversation(id)
    }

    fn claim_conversation<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        now: i64,
        lease_until: i64,
    ) -> StoreFuture<'a, Option<StoredConversation>> {
        (**self).claim_conversation(id, owner, now, lease_until)
    }

    fn save_conversation<'a>(
        &'a self,
        conversation: &'a Conversation,
        owner: &'a str,
        status: ConversationStatus,
        lease_until: i64,
    ) -> StoreFuture<'a, ()> {
        (**self).save_conversation(conversation, owner, status, lease_until)
    }

    fn renew_lease<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        lease_until: i64,
    ) -> StoreFuture<'a, bool> {
        (**self).renew_lease(id, owner, lease_until)
    }

    fn conversations_with_status<'a>(
        &'a self,
        status: ConversationStatus,
        limit: usize,
    ) -> StoreFuture<'a, Vec<String>> {
        (**self).conversations_with_status(status, limit)
    }

    fn insert_call<'a>(&'a self, record: &'a CallRecord) -> StoreFuture<'a, bool> {
        (**self).insert_call(record)
    }

    fn call<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        step: Step,
    ) -> StoreFuture<'a, Option<CallRecord>> {
        (**self).call(conversation_id, tool_call_id, step)
    }

    fn calls<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Vec<CallRecord>> {
        (**self).calls(conversation_id)
    }

    #[allow(clippy::too_many_arguments)]
    fn transition<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        step: Step,
        from: CallState,
        to: CallState,
        outcome: Option<&'a str>,
        now: i64,
    ) -> StoreFuture<'a, bool> {
        (**self).transition(conversation_id, tool_call_id, step, from, to, outcome, now)
    }

    fn set_deadline<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        step: Step,
        deadline: Option<i64>,
    ) -> StoreFuture<'a, bool> {
        (**self).set_deadline(conversation_id, tool_call_id, step, deadline)
    }

    fn due_calls<'a>(&'a self, now: i64, limit: usize) -> StoreFuture<'a, Vec<CallRecord>> {
        (**self).due_calls(now, limit)
    }

    fn suspended_without_pending<'a>(&'a self, limit: usize) -> StoreFuture<'a, Vec<String>> {
        (**self).suspended_without_pending(limit)
    }

    fn apply<'a>(&'a self, batch: &'a Batch<'a>) -> StoreFuture<'a, Applied> {
        (**self).apply(batch)
    }
}

/// The transcript as stored: the messages as JSON text.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn encode_messages(conversation: &Conversation) -> Result<String, StoreError> {
    serde_json::to_string(&conversation.messages)
        .map_err(|error| StoreError::Corrupt(format!("transcript cannot be encoded: {error}")))
}

/// Reads a stored transcript back.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn decode_conversation(
    id: String,
    session_id: Option<String>,
    messages: &str,
) -> Result<Conversation, StoreError> {
    let messages = serde_json::from_str(messages).map_err(|error| {
        StoreError::Corrupt(format!("transcript of `{id}` is not readable: {error}"))
    })?;
    // The user and tenant ids are columns of their own, read by the caller.
    Ok(Conversation {
        id,
        session_id,
        messages,
        ..Conversation::default()
    })
}
