//! Who drives a conversation: one process at a time, the one holding its
//! lease in the store, and within that process one run at a time.
//!
//! A lease is taken by a claim, extended by every save and by a heartbeat
//! while a run's tools or model take long, and given up when the run
//! suspends or ends. A process that dies stops renewing, so its lease runs
//! out and another process may take the conversation over.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::store::{
    Applied, Batch, ConversationStatus, Store, StoreError, StoredConversation, Write,
};
use crate::transcript::Conversation;

/// Milliseconds since the Unix epoch: the store's clock.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A duration in the store's unit, milliseconds.
pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// This process's hold on conversations: its name in the store and how
/// long a claim or a save holds.
#[derive(Clone)]
pub(crate) struct Lease {
    store: Arc<dyn Store>,
    owner: String,
    duration: Duration,
}

impl Lease {
    pub(crate) fn new(store: Arc<dyn Store>, owner: String, duration: Duration) -> Self {
        Lease {
            store,
            owner,
            duration,
        }
    }

    /// The store the leases are kept in.
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The name this process holds conversations under.
    pub(crate) fn owner(&self) -> &str {
        &self.owner
    }

    /// How long a hold lasts without a save or a renewal.
    pub(crate) fn duration(&self) -> Duration {
        self.duration
    }

    /// When a hold taken now runs out.
    pub(crate) fn until(&self) -> i64 {
        now_ms().saturating_add(millis(self.duration))
    }

    /// Takes the conversation (see [`Store::claim_conversation`]).
    pub(crate) async fn claim(
        &self,
        conversation_id: &str,
    ) -> Result<Option<StoredConversation>, StoreError> {
        self.store
            .claim_conversation(conversation_id, &self.owner, now_ms(), self.until())
            .await
    }

    /// The write that takes the conversation, for a batch that must take
    /// it together with other writes.
    pub(crate) fn claim_write<'a>(&'a self, conversation_id: &'a str) -> Write<'a> {
        self.claim_at_version(conversation_id, None)
    }

    /// [`Lease::claim_write`], refused unless the conversation still has
    /// `version` (when given).
    fn claim_at_version<'a>(&'a self, conversation_id: &'a str, version: Option<i64>) -> Write<'a> {
        Write::ClaimConversation {
            id: conversation_id,
            owner: &self.owner,
            now: now_ms(),
            lease_until: self.until(),
            version,
        }
    }

    /// Takes the conversation, storing it empty first when it does not
    /// exist: one batch, so one commit. `None` when another process holds
    /// it (and then nothing is created).
    pub(crate) async fn claim_or_create(
        &self,
        conversation_id: &str,
    ) -> Result<Option<StoredConversation>, StoreError> {
        let empty = Conversation::new(conversation_id);
        let batch = Batch::new()
            .with(Write::EnsureConversation(&empty))
            .with(self.claim_write(conversation_id));
        Ok(match self.store.apply(&batch).await? {
            Applied::All { claimed } => claimed,
            Applied::Refused { .. } => None,
        })
    }

    /// Takes the conversation and saves `conversation` as running, in one
    /// batch: what was read at `version` with the user's new message, or
    /// (`version` `None`) a conversation that did not exist, created in the
    /// same batch. `false`, with nothing written, when it changed since it
    /// was read, exists by now, or another process holds it.
    pub(crate) async fn claim_with(
        &self,
        conversation: &Conversation,
        version: Option<i64>,
    ) -> Result<bool, StoreError> {
        let empty = version
            .is_none()
            .then(|| Conversation::new(conversation.id.clone()));
        let mut batch = Batch::new();
        if let Some(empty) = &empty {
            batch.push(Write::CreateConversation(empty));
        }
        batch
            .push(self.claim_at_version(&conversation.id, version))
            .push(Write::SaveConversation {
                conversation,
                owner: &self.owner,
                status: ConversationStatus::Running,
                lease_until: self.until(),
            });
        Ok(matches!(
            self.store.apply(&batch).await?,
            Applied::All { .. }
        ))
    }

    /// Saves the transcript with `status`, holding it a lease longer.
    pub(crate) async fn save(
        &self,
        conversation: &Conversation,
        status: ConversationStatus,
    ) -> Result<(), StoreError> {
        self.save_until(conversation, status, self.until()).await
    }

    /// Saves the transcript with `status`, held until `lease_until`.
    pub(crate) async fn save_until(
        &self,
        conversation: &Conversation,
        status: ConversationStatus,
        lease_until: i64,
    ) -> Result<(), StoreError> {
        self.store
            .save_conversation(conversation, &self.owner, status, lease_until)
            .await
    }

    /// After a store error ended a run: gives up the conversation's lease
    /// (it stays running, as saved last), so that a sweep or
    /// `ensure_started` continues it at once rather than after a whole
    /// lease. Best effort: a store that is down keeps the lease, which then
    /// runs out by itself.
    pub(crate) async fn give_up(&self, conversation_id: &str) {
        if let Err(error) = self
            .store
            .renew_lease(conversation_id, &self.owner, now_ms())
            .await
        {
            tracing::debug!(%conversation_id, %error, "could not give up the lease after a store error");
        }
    }

    /// Renews the lease of `conversation_id` until the returned heartbeat
    /// is dropped.
    pub(crate) fn heartbeat(&self, conversation_id: &str) -> Heartbeat {
        let store = self.store.clone();
        let owner = self.owner.clone();
        let lease = self.duration;
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

/// Renews a run's lease while its tools or its model take longer than a
/// lease, so that no other process takes over a live run. Stops when
/// dropped, with the run.
pub(crate) struct Heartbeat(tokio::task::JoinHandle<()>);

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The conversations a run of this process drives right now. The store's
/// lease lets the same owner claim again, so without this a revival could
/// start a second run beside a live one.
pub(crate) struct Runs {
    active: Arc<Mutex<BTreeSet<String>>>,
    /// Counts the ends of this process's runs: a resume that found the
    /// conversation held by a run here waits for the next one.
    released: Arc<watch::Sender<u64>>,
}

impl Runs {
    pub(crate) fn new() -> Self {
        Runs {
            active: Arc::default(),
            released: Arc::new(watch::channel(0).0),
        }
    }

    /// Whether a run of this process drives the conversation now.
    pub(crate) fn is_active(&self, conversation_id: &str) -> bool {
        self.active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(conversation_id)
    }

    /// Registers a run of `conversation_id`, unless one is live here.
    pub(crate) fn begin(&self, conversation_id: &str) -> Option<ActiveRun> {
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

    /// Notified at the end of every run of this process.
    pub(crate) fn ends(&self) -> watch::Receiver<u64> {
        self.released.subscribe()
    }
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
