//! Which conversations have a client (a browser tab, an IDE) attached in
//! this process: their client calls wait their full `suspend_timeout`;
//! without one, a headless run's client call fails after a short grace.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::lease::{millis, now_ms};
use super::{DurableAgent, DurableError};
use crate::store::{CallState, Step};

/// How many clients are attached to each conversation in this process.
#[derive(Default)]
pub(crate) struct Clients(Mutex<HashMap<String, usize>>);

impl Clients {
    /// Whether a client is attached to `conversation_id` now.
    pub(crate) fn attached(&self, conversation_id: &str) -> bool {
        self.lock()
            .get(conversation_id)
            .is_some_and(|count| *count > 0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Marks a conversation as having a client attached in this process, for
/// as long as it lives: client calls of the conversation then wait their
/// full `suspend_timeout` instead of the short headless grace period.
#[must_use = "the client counts as attached only while this value lives"]
pub struct ClientAttachment {
    clients: Arc<Clients>,
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
        let mut clients = self.clients.lock();
        if let Some(count) = clients.get_mut(&self.conversation_id) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                clients.remove(&self.conversation_id);
            }
        }
    }
}

impl DurableAgent {
    /// Declares that a client (a browser tab, an IDE) is attached to the
    /// conversation in this process, and gives its pending client calls
    /// their full `suspend_timeout` from now.
    pub async fn attach_client(
        &self,
        conversation_id: &str,
    ) -> Result<ClientAttachment, DurableError> {
        let inner = &*self.inner;
        *inner
            .clients
            .lock()
            .entry(conversation_id.to_owned())
            .or_default() += 1;
        let attachment = ClientAttachment {
            clients: inner.clients.clone(),
            conversation_id: conversation_id.to_owned(),
        };
        let now = now_ms();
        for record in inner.store.calls(conversation_id).await? {
            if record.state == CallState::Pending && record.step == Step::Client {
                let deadline = now.saturating_add(millis(inner.ledger.wait_timeout(&record.tool)));
                inner
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
}
