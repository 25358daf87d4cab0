//! The transcript save a durable run puts off until its next write.
//!
//! A run must have the model's turn in the store before any of its calls
//! is recorded (a crash would otherwise leave ledger rows for calls no
//! stored turn made), but it need not be there sooner: nothing happens in
//! between that a crash could lose. So the loop's checkpoint only parks the
//! transcript here, and the next ledger write of the run takes it along in
//! the same batch: the turn and the first record of its calls are one
//! commit. A turn whose calls write nothing (each refused before running)
//! leaves it to the run's final save, which supersedes it.
//!
//! Results the loop adds after the calls are parked too: they are in the
//! ledger already, and settling turns the ledger back into them after a
//! crash.

use tokio::sync::Mutex;

use super::lease::Lease;
use crate::store::{Applied, Batch, CallRecord, ConversationStatus, StoreError, Write};
use crate::transcript::Conversation;

/// The parked transcript of one run, and the lease it is saved under.
pub(crate) struct Checkpoint {
    lease: Lease,
    /// Locked across a whole write: a second call of the same turn must not
    /// record itself (and run) before the batch carrying the turn commits.
    parked: Mutex<Option<Conversation>>,
    /// Why a batch carrying the transcript failed, if one did: the run
    /// must stop at its next checkpoint, as it did when the save itself
    /// came first.
    failure: std::sync::OnceLock<String>,
}

/// What a ledger write carrying a parked transcript came to.
pub(crate) enum Carried {
    /// The batch committed: the transcript and the row are in the store.
    Inserted,
    /// Another row holds the id and step; nothing was written (the
    /// transcript is parked again for the next write).
    Taken,
}

impl Checkpoint {
    pub(crate) fn new(lease: Lease) -> Self {
        Checkpoint {
            lease,
            parked: Mutex::new(None),
            failure: std::sync::OnceLock::new(),
        }
    }

    /// Parks `conversation` as it stands, replacing what was parked. An
    /// `Err` when a batch that carried an earlier one failed: the calls
    /// of that turn were not run, and the run stops.
    pub(crate) async fn park(&self, conversation: &Conversation) -> Result<(), String> {
        if let Some(failure) = self.failure.get() {
            return Err(failure.clone());
        }
        *self.parked.lock().await = Some(conversation.clone());
        Ok(())
    }

    /// Marks the run as stopped by the store: a batch carrying the
    /// transcript failed, and reading back could not show it was written.
    pub(crate) fn failed(&self, error: &StoreError) {
        let _ = self.failure.set(error.to_string());
    }

    /// Inserts `record`, with the parked transcript (if any) saved in the
    /// same batch. `None` when nothing was parked: the caller inserts the
    /// row on its own. On an error the transcript stays parked (saving it
    /// twice is harmless); the caller reads the row back to learn whether
    /// the batch was written, and reports [`Checkpoint::failed`] if not.
    pub(crate) async fn insert_with(
        &self,
        record: &CallRecord,
    ) -> Option<Result<Carried, StoreError>> {
        // Kept parked until the batch is in: a task aborted while it waits
        // leaves it for the next write.
        let mut parked = self.parked.lock().await;
        let conversation = parked.as_ref()?;
        let batch = Batch::new()
            .with(Write::SaveConversation {
                conversation,
                owner: self.lease.owner(),
                status: ConversationStatus::Running,
                lease_until: self.lease.until(),
            })
            .with(Write::InsertCall(record));
        let applied = self.lease.store().apply(&batch).await;
        Some(match applied {
            Ok(Applied::All { .. }) => {
                *parked = None;
                Ok(Carried::Inserted)
            }
            Ok(Applied::Refused { index: 0 }) => Err(StoreError::LostLease {
                conversation_id: conversation.id.clone(),
                owner: self.lease.owner().to_owned(),
            }),
            Ok(Applied::Refused { .. }) => Ok(Carried::Taken),
            Err(error) => Err(error),
        })
    }
}
