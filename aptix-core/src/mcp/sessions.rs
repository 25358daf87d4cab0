//! The session manager of the Streamable HTTP server: rmcp's
//! `LocalSessionManager` with a cap on open sessions, overall and per peer,
//! and a short life for sessions that never finish initialization.
//!
//! Every session costs a worker task and its buffers until it is closed,
//! and rmcp keeps an idle one for five minutes: without a cap, a client
//! that only ever sends `initialize` grows the server without bound. A cap
//! that only refuses, though, lets one client that opens every session lock
//! every other out for those five minutes; so a new session beyond a cap
//! closes an idle one instead (its client gets `404` for it, and opens
//! another, as after the idle timeout), and is refused only when every
//! candidate has a request or stream in flight or was used within the
//! minimum idle time:
//!
//! * beyond its peer's cap, the least recently used idle session of that
//!   peer (a peer only ever closes its own sessions there);
//! * beyond the overall cap, the least recently used idle session of the
//!   peer that holds the most, so that a client with a few sessions keeps
//!   them while another holds many.
//!
//! A client that uses each of its sessions within the minimum idle time
//! still keeps them all: at the defaults, holding all 1024 sessions takes
//! a hundred requests a second, and, from other than loopback, 16 peers
//! (64 sessions each).
//!
//! The session manager does not see the connection: the HTTP layer marks
//! each request with its [`Opener`], and rmcp hands the `initialize`
//! request's HTTP parts (extensions included) to
//! [`SessionManager::initialize_session`], where a new session is counted
//! to its peer. Every session's end, whoever ends it (its client's
//! `DELETE`, rmcp's idle timeout, a closed worker), goes through
//! [`SessionManager::close_session`], where it is forgotten.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, GetExtensions, JsonRpcMessage, ServerJsonRpcMessage,
};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use tokio::time::Instant;

/// Why a session could not be created or used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionsError {
    /// The overall cap is reached and every session is in use.
    #[error(
        "the server already has its maximum of {0} open MCP sessions, each with a request or stream in flight; retry later"
    )]
    Full(usize),
    /// The peer's cap is reached and each of its sessions is in use.
    #[error(
        "this client already has its maximum of {0} open MCP sessions, each with a request or stream in flight; close one (HTTP DELETE) or retry later"
    )]
    PeerFull(usize),
    /// rmcp's own manager failed.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// Who opened a session, as the HTTP connection limits count peers; the
/// HTTP layer puts it in each request's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Opener {
    /// A loopback client: every local process (and a reverse proxy on this
    /// host) is the one address, which a per-peer cap cannot tell apart, so
    /// local sessions are only under the overall cap (where they count as
    /// one peer).
    Local,
    /// Another peer: an IPv4 address or an IPv6 /64.
    Remote(IpAddr),
}

/// The caps of [`CappedSessions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SessionLimits {
    pub(crate) max: usize,
    pub(crate) max_per_peer: usize,
    /// How long a session must go unused before it may be closed to make
    /// room ([`Evictable`]).
    pub(crate) min_idle: Duration,
    pub(crate) uninitialized_life: Duration,
}

/// A capped [`LocalSessionManager`].
#[derive(Debug, Clone)]
pub(crate) struct CappedSessions {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    local: LocalSessionManager,
    limits: SessionLimits,
    /// Every open session: rmcp's map has no room for what the caps need.
    held: Mutex<HashMap<SessionId, Held>>,
}

/// What the caps know of an open session.
#[derive(Debug)]
struct Held {
    /// Who opened it; `None` until its `initialize` says.
    opener: Option<Opener>,
    /// Whether it sent `notifications/initialized` (or any request after
    /// `initialize`).
    initialized: bool,
    /// Its requests and streams being answered (and its `initialize` from
    /// creation on): a session with any is never closed to make room.
    in_use: usize,
    /// When it was last used, to close the least recently used first.
    last_used: Instant,
}

/// Which sessions may be closed to make room: those with nothing in
/// flight, unused for at least `min_idle`. The wait keeps a client that
/// opens sessions fast from closing every session used a moment ago (a
/// client between two calls); it also lets a client that uses every one of
/// its sessions within it keep them all.
#[derive(Debug, Clone, Copy)]
struct Evictable {
    now: Instant,
    min_idle: Duration,
}

impl Evictable {
    fn allows(self, session: &Held) -> bool {
        session.in_use == 0
            && self.now.saturating_duration_since(session.last_used) >= self.min_idle
    }
}

impl CappedSessions {
    pub(crate) fn new(limits: SessionLimits) -> Self {
        CappedSessions {
            shared: Arc::new(Shared {
                local: LocalSessionManager::default(),
                limits: SessionLimits {
                    max: limits.max.max(1),
                    max_per_peer: limits.max_per_peer.max(1),
                    ..limits
                },
                held: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The error a new session of `opener`'s would get now: the caps it
    /// would go past have no idle session to close. A race with another
    /// new session can still refuse it later (in `initialize_session`).
    pub(crate) fn refusal(&self, opener: Opener) -> Option<SessionsError> {
        let limits = self.shared.limits;
        let evictable = self.shared.evictable();
        let held = self.shared.held();
        let at_peer_cap =
            matches!(opener, Opener::Remote(_)) && count(&held, opener) >= limits.max_per_peer;
        if at_peer_cap {
            // It would close one of its own, not grow the total.
            return least_recently_used(&held, opener, evictable)
                .is_none()
                .then_some(SessionsError::PeerFull(limits.max_per_peer));
        }
        (held.len() >= limits.max && fair_victim(&held, evictable).is_none())
            .then_some(SessionsError::Full(limits.max))
    }

    /// A use of session `id` begins: it is in use until the guard drops.
    fn begin_use(&self, id: &SessionId, initialized: bool) -> InUse {
        if let Some(session) = self.shared.held().get_mut(id) {
            session.in_use += 1;
            session.last_used = Instant::now();
            session.initialized |= initialized;
        }
        InUse {
            shared: Arc::downgrade(&self.shared),
            id: id.clone(),
        }
    }

    /// Session `id` was used (a message without an answer).
    fn touch(&self, id: &SessionId, initialized: bool) {
        if let Some(session) = self.shared.held().get_mut(id) {
            session.last_used = Instant::now();
            session.initialized |= initialized;
        }
    }
}

impl Shared {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The sessions that may be closed now.
    fn evictable(&self) -> Evictable {
        Evictable {
            now: Instant::now(),
            min_idle: self.limits.min_idle,
        }
    }

    /// Counts new session `id` to `opener` and picks the session to close
    /// to keep within the caps (`None`: none needs to be); past a cap with
    /// no idle session, forgets `id` and refuses it.
    fn admit(&self, id: &SessionId, opener: Opener) -> Result<Option<SessionId>, SessionsError> {
        let limits = self.limits;
        let evictable = self.evictable();
        let mut held = self.held();
        let Some(session) = held.get_mut(id) else {
            // Closed in the meantime: rmcp's initialize fails on its own.
            return Ok(None);
        };
        session.opener = Some(opener);
        let victim =
            if matches!(opener, Opener::Remote(_)) && count(&held, opener) > limits.max_per_peer {
                Some(
                    least_recently_used(&held, opener, evictable)
                        .ok_or(SessionsError::PeerFull(limits.max_per_peer)),
                )
            } else if held.len() > limits.max {
                Some(fair_victim(&held, evictable).ok_or(SessionsError::Full(limits.max)))
            } else {
                None
            };
        match victim {
            None => Ok(None),
            Some(Ok(victim)) => {
                held.remove(&victim);
                Ok(Some(victim))
            }
            Some(Err(refusal)) => {
                held.remove(id);
                Err(refusal)
            }
        }
    }
}

/// How many sessions `opener` holds.
fn count(held: &HashMap<SessionId, Held>, opener: Opener) -> usize {
    held.values()
        .filter(|session| session.opener == Some(opener))
        .count()
}

/// The least recently used evictable session of `opener`.
fn least_recently_used(
    held: &HashMap<SessionId, Held>,
    opener: Opener,
    evictable: Evictable,
) -> Option<SessionId> {
    held.iter()
        .filter(|(_, session)| session.opener == Some(opener) && evictable.allows(session))
        .min_by_key(|(_, session)| session.last_used)
        .map(|(id, _)| id.clone())
}

/// One peer's sessions, as [`fair_victim`] weighs them.
#[derive(Default)]
struct Share<'a> {
    sessions: usize,
    /// Its least recently used evictable session, and when it was used.
    oldest_idle: Option<(Instant, &'a SessionId)>,
}

/// The least recently used evictable session of the peer that holds the
/// most sessions (among peers with one; local clients count as one peer).
fn fair_victim(held: &HashMap<SessionId, Held>, evictable: Evictable) -> Option<SessionId> {
    let mut shares: HashMap<Opener, Share<'_>> = HashMap::new();
    for (id, session) in held {
        // A session whose `initialize` is under way is in use anyway.
        let Some(opener) = session.opener else {
            continue;
        };
        let share = shares.entry(opener).or_default();
        share.sessions += 1;
        if evictable.allows(session)
            && share
                .oldest_idle
                .is_none_or(|(used, _)| session.last_used < used)
        {
            share.oldest_idle = Some((session.last_used, id));
        }
    }
    shares
        .into_values()
        .filter_map(|share| {
            share
                .oldest_idle
                .map(|(used, id)| (share.sessions, used, id))
        })
        // The most sessions, then the least recently used.
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .map(|(_, _, id)| id.clone())
}

/// Who sent `initialize`: the HTTP layer's mark in the extensions of the
/// HTTP request, which rmcp puts in the JSON-RPC request's extensions.
fn opener_of(message: &ClientJsonRpcMessage) -> Option<Opener> {
    let JsonRpcMessage::Request(request) = message else {
        return None;
    };
    request
        .request
        .extensions()
        .get::<axum::http::request::Parts>()?
        .extensions
        .get::<Opener>()
        .copied()
}

/// A session in use (a request being answered, an open stream); when it
/// drops, the session was last used then.
#[derive(Debug)]
struct InUse {
    shared: Weak<Shared>,
    id: SessionId,
}

impl Drop for InUse {
    fn drop(&mut self) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        if let Some(session) = shared.held().get_mut(&self.id) {
            session.in_use = session.in_use.saturating_sub(1);
            session.last_used = Instant::now();
        }
    }
}

/// A session's stream, which keeps the session in use while it is open.
struct Using<S> {
    stream: Pin<Box<S>>,
    _in_use: InUse,
}

impl<S: Stream> Stream for Using<S> {
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.get_mut().stream.as_mut().poll_next(cx)
    }
}

impl SessionManager for CappedSessions {
    type Error = SessionsError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    /// Creates a session in use until its `initialize` is answered; the
    /// caps are applied there, once its peer is known.
    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.shared.local.create_session().await?;
        self.shared.held().insert(
            id.clone(),
            Held {
                opener: None,
                initialized: false,
                in_use: 1,
                last_used: Instant::now(),
            },
        );
        let shared = Arc::downgrade(&self.shared);
        let life = self.shared.limits.uninitialized_life;
        let expiring = id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(life).await;
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let expired = {
                let mut held = shared.held();
                let expired = held
                    .get(&expiring)
                    .is_some_and(|session| !session.initialized);
                if expired {
                    held.remove(&expiring);
                }
                expired
            };
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
        // The use `create_session` began ends with this answer.
        let _in_use = InUse {
            shared: Arc::downgrade(&self.shared),
            id: id.clone(),
        };
        let opener = opener_of(&message).unwrap_or_else(|| {
            // Only the HTTP layer creates sessions, and it marks every
            // request: this is a bug, not a peer's doing.
            tracing::warn!(session_id = %id, "MCP session of unknown origin: counted as local");
            Opener::Local
        });
        match self.shared.admit(id, opener) {
            Ok(None) => {}
            Ok(Some(victim)) => {
                tracing::info!(
                    session_id = %victim,
                    "MCP session closed: the least recently used, to make room for a new one"
                );
                if let Err(error) = self.shared.local.close_session(&victim).await {
                    tracing::warn!(session_id = %victim, %error, "could not close an MCP session");
                }
            }
            Err(refusal) => {
                tracing::warn!(?opener, %refusal, "MCP session refused");
                if let Err(error) = self.shared.local.close_session(id).await {
                    tracing::warn!(session_id = %id, %error, "could not close an MCP session");
                }
                return Err(refusal);
            }
        }
        Ok(self.shared.local.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.shared.local.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.shared.held().remove(id);
        Ok(self.shared.local.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        // A client that goes on with requests is past its handshake, whether
        // or not it sent the notification.
        let in_use = self.begin_use(id, true);
        let stream = self.shared.local.create_stream(id, message).await?;
        Ok(Using {
            stream: Box::pin(stream),
            _in_use: in_use,
        })
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        let initialized = matches!(
            &message,
            JsonRpcMessage::Notification(notification)
                if matches!(
                    notification.notification,
                    ClientNotification::InitializedNotification(_)
                )
        );
        self.touch(id, initialized);
        Ok(self.shared.local.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let in_use = self.begin_use(id, false);
        let stream = self.shared.local.create_standalone_stream(id).await?;
        Ok(Using {
            stream: Box::pin(stream),
            _in_use: in_use,
        })
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let in_use = self.begin_use(id, false);
        let stream = self.shared.local.resume(id, last_event_id).await?;
        Ok(Using {
            stream: Box::pin(stream),
            _in_use: in_use,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> SessionId {
        SessionId::from(text)
    }

    #[test]
    fn the_biggest_holder_gives_its_least_recently_used_idle_session() {
        let now = Instant::now() + Duration::from_secs(1000);
        // A session last used `age` seconds before `now`.
        let session = |opener, in_use, age| Held {
            opener,
            initialized: true,
            in_use,
            last_used: now - Duration::from_secs(age),
        };
        let evictable = Evictable {
            now,
            min_idle: Duration::from_secs(30),
        };
        let a = Opener::Remote(IpAddr::from([192, 0, 2, 1]));
        let b = Opener::Remote(IpAddr::from([192, 0, 2, 2]));
        let mut held = HashMap::new();
        // `b` has the oldest idle session, but `a` holds more.
        held.insert(id("b-old"), session(Some(b), 0, 100));
        held.insert(id("a-busy"), session(Some(a), 1, 90));
        held.insert(id("a-old"), session(Some(a), 0, 50));
        held.insert(id("a-mid"), session(Some(a), 0, 40));
        // Used too recently to be closed.
        held.insert(id("a-new"), session(Some(a), 0, 10));
        // Under way: never picked, nor counted to anyone.
        held.insert(id("new"), session(None, 1, 200));
        assert_eq!(fair_victim(&held, evictable), Some(id("a-old")));
        assert_eq!(least_recently_used(&held, b, evictable), Some(id("b-old")));
        // Once `a` has nothing evictable, `b` gives.
        for name in ["a-old", "a-mid"] {
            if let Some(session) = held.get_mut(&id(name)) {
                session.in_use = 1;
            }
        }
        assert_eq!(fair_victim(&held, evictable), Some(id("b-old")));
        assert_eq!(least_recently_used(&held, a, evictable), None);
        // Nothing is evictable within the wait.
        let sooner = Evictable {
            now,
            min_idle: Duration::from_secs(1000),
        };
        assert_eq!(fair_victim(&held, sooner), None);
    }
}
