//! The session manager of the Streamable HTTP server: rmcp's
//! `LocalSessionManager` with a cap on open sessions and a short life for
//! sessions that never finish initialization.
//!
//! Every session costs a worker task and its buffers until it is closed,
//! and rmcp keeps an idle one for five minutes: without a cap, a client
//! that only ever sends `initialize` grows the server without bound.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::Stream;
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};

/// Why a session could not be created or used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionsError {
    /// The cap is reached.
    #[error(
        "the server already has its maximum of {0} open MCP sessions; close one (HTTP DELETE) or retry later"
    )]
    Full(usize),
    /// rmcp's own manager failed.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// A capped [`LocalSessionManager`].
#[derive(Debug, Clone)]
pub(crate) struct CappedSessions {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    local: LocalSessionManager,
    max: usize,
    uninitialized_life: Duration,
    /// Sessions that have not sent `notifications/initialized` (nor any
    /// request after `initialize`) yet.
    uninitialized: Mutex<HashSet<SessionId>>,
    /// Serializes creations, so that two at once cannot both pass the cap.
    creating: tokio::sync::Mutex<()>,
}

impl CappedSessions {
    pub(crate) fn new(max: usize, uninitialized_life: Duration) -> Self {
        CappedSessions {
            shared: Arc::new(Shared {
                local: LocalSessionManager::default(),
                max,
                uninitialized_life,
                uninitialized: Mutex::new(HashSet::new()),
                creating: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// The error a new session gets now, if the cap is reached.
    pub(crate) async fn refusal(&self) -> Option<SessionsError> {
        let open = self.shared.local.sessions.read().await.len();
        (open >= self.shared.max).then_some(SessionsError::Full(self.shared.max))
    }

    fn initialized(&self, id: &SessionId) {
        self.shared
            .uninitialized
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }
}

impl SessionManager for CappedSessions {
    type Error = SessionsError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _creating = self.shared.creating.lock().await;
        if let Some(refusal) = self.refusal().await {
            tracing::warn!(max = self.shared.max, "MCP session refused: too many open");
            return Err(refusal);
        }
        let (id, transport) = self.shared.local.create_session().await?;
        self.shared
            .uninitialized
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone());
        let shared = Arc::downgrade(&self.shared);
        let life = self.shared.uninitialized_life;
        let expiring = id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(life).await;
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let expired = shared
                .uninitialized
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&expiring);
            if expired {
                tracing::info!(session_id = %expiring, "MCP session closed: never initialized");
                if let Err(error) = shared.local.close_session(&expiring).await {
                    tracing::warn!(session_id = %expiring, %error, "could not close an MCP session");
                }
            }
        });
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.shared.local.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.shared.local.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.initialized(id);
        Ok(self.shared.local.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        // A client that goes on with requests is past its handshake, whether
        // or not it sent the notification.
        self.initialized(id);
        Ok(self.shared.local.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        if let JsonRpcMessage::Notification(notification) = &message
            && matches!(
                notification.notification,
                ClientNotification::InitializedNotification(_)
            )
        {
            self.initialized(id);
        }
        Ok(self.shared.local.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.shared.local.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.shared.local.resume(id, last_event_id).await?)
    }
}
