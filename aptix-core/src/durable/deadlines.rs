//! Deadlines and revival: waits expire in the store, whoever notices; a
//! conversation a dead process held, or whose waits were all resolved with
//! nobody resuming it, is resumed by a sweep, by `ensure_started` or by
//! `revive_all` at start-up.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::lease::now_ms;
use super::{DurableAgent, DurableError, Revival};
use crate::store::ConversationStatus;

impl DurableAgent {
    /// Revives a stored conversation after a restart, or in a process that
    /// never ran it: expires waits whose deadline passed, and when nothing
    /// is pending and nobody holds it, resumes it in the background (a run
    /// interrupted by a crash continues; a server call it was executing is
    /// run again only if its tool is idempotent).
    pub async fn ensure_started(&self, conversation_id: &str) -> Result<Revival, DurableError> {
        self.ensure_deadline_worker();
        let inner = &*self.inner;
        let store = &inner.store;
        let stored = store
            .load_conversation(conversation_id)
            .await?
            .ok_or_else(|| DurableError::Unknown(conversation_id.to_owned()))?;
        let now = now_ms();
        for record in store.calls(conversation_id).await? {
            inner.ledger.expire_if_due(&record, now).await?;
        }
        match stored.status {
            ConversationStatus::Idle => Ok(Revival::Idle),
            ConversationStatus::Running
                if stored.lease_until >= now
                    && stored.owner.as_deref() != Some(inner.lease.owner()) =>
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
    /// [`DurableAgent::ensure_started`]): what a process calls once at start-up.
    /// Returns how many it resumed.
    pub async fn revive_all(&self) -> Result<usize, DurableError> {
        let mut resumed = 0;
        for status in [ConversationStatus::Running, ConversationStatus::Suspended] {
            for id in self
                .inner
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
    /// [`DurableAgentBuilder::deadline_worker`](super::DurableAgentBuilder::deadline_worker)).
    pub async fn sweep_deadlines(&self) -> Result<usize, DurableError> {
        let inner = &*self.inner;
        let now = now_ms();
        let mut expired = 0;
        let mut conversations = BTreeSet::new();
        for record in inner.store.due_calls(now, 512).await? {
            if inner.ledger.expire_if_due(&record, now).await? {
                expired += 1;
                conversations.insert(record.conversation_id);
            }
        }
        // Conversations whose holder stopped renewing its lease (a crash)
        // are taken over here too, so a worker alone revives them.
        for conversation_id in inner
            .store
            .conversations_with_status(ConversationStatus::Running, 512)
            .await?
        {
            // This process's own live runs renew their leases.
            if inner.runs.is_active(&conversation_id) {
                continue;
            }
            if let Some(stored) = inner.store.load_conversation(&conversation_id).await?
                && stored.status == ConversationStatus::Running
                && stored.lease_until < now
            {
                conversations.insert(conversation_id);
            }
        }
        conversations.extend(inner.store.suspended_without_pending(512).await?);
        for conversation_id in conversations {
            self.resume_in_background(&conversation_id);
        }
        Ok(expired)
    }

    /// Starts the agent's own deadline worker, once, if it has one and a
    /// runtime is there to run it (called when the agent is built, and
    /// again by the durable entry points for an agent built outside one).
    pub(crate) fn ensure_deadline_worker(&self) {
        let Some(every) = self.inner.sweep_every else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_err()
            || self
                .inner
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
                let agent = DurableAgent { inner };
                if let Err(error) = agent.sweep_deadlines().await {
                    tracing::warn!(%error, "sweeping deadlines failed; retrying at the next tick");
                }
            }
        })
    }
}
