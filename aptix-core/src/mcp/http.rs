//! Streamable HTTP: rmcp's `StreamableHttpService` at `/mcp`, on axum.
//!
//! DNS-rebinding protection is rmcp's own Host/Origin check (403 on a
//! mismatch), configured here to be strict by default: only loopback names
//! *with the bound port* as `Host`, and, when a browser sends `Origin`,
//! only loopback origins with that port. A web page on another origin (or
//! reached through a rebound DNS name) therefore cannot drive the server.
//!
//! Connections are served by hyper directly (axum's `serve` cannot be
//! given a timer, so hyper's header-read timeout never applied), under
//! limits that keep a slow or silent peer from holding what a polite client
//! needs (see [`HttpLimits`]):
//!
//! * at most `max_connections` are served at once (the next ones wait in the
//!   listen backlog), and at most `max_connections_per_peer` of them come
//!   from one peer other than loopback (the next ones are closed at once);
//! * a connection must send each request's headers within the header-read
//!   timeout (HTTP/1) and its body within the body timeout, and is closed
//!   gracefully after the idle timeout without a request in flight (from
//!   its start too: hyper's HTTP/1-or-2 detection has no timeout of its own);
//! * HTTP/2 connections are pinged, and dropped when the peer stops
//!   answering; any connection is dropped when a write waits longer than
//!   the write timeout for the peer to read, or when an HTTP/2 answer waits
//!   longer than the send timeout to be sent (a peer that grants no
//!   flow-control window holds the answer without any write waiting);
//! * SSE streams (`GET`s, which last as long as their session) have a budget
//!   of their own, at most half the connections, so that requests always
//!   find a connection;
//! * sessions are capped, overall and per peer (see `sessions.rs`): each
//!   request carries its connection's [`Opener`] in its extensions, for the
//!   session manager to count a new session to its peer.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{Method, Request, Response, StatusCode, Version, header};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::sessions::{CappedSessions, Opener, SessionLimits, SessionsError};
use super::{HttpLimits, McpError, McpServer};

/// The path the MCP endpoint is served at.
pub(crate) const PATH: &str = "/mcp";

/// The longest timer handed to hyper or tokio: hyper adds its timeouts to
/// `Instant`s, which overflow (and panic) for durations near
/// `Duration::MAX`; a year is as good as forever here.
const LONGEST: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// How long an idle connection has to close once asked (an HTTP/2 peer
/// must answer the `GOAWAY`'s ping first). It has nothing in flight, so
/// little is lost when it is dropped instead; waiting longer only keeps a
/// peer that never answers in its slot.
const IDLE_CLOSE_GRACE: Duration = Duration::from_secs(1);

/// What a refused SSE stream is told about when to try again (seconds).
const STREAM_RETRY_AFTER: &str = "5";

/// A running Streamable HTTP server. Dropping the handle leaves the server
/// running; call [`HttpServer::shutdown`] to stop it.
#[derive(Debug)]
pub struct HttpServer {
    local_addr: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), std::io::Error>>,
}

impl HttpServer {
    /// The address actually bound (the real port when port 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The endpoint's URL, `http://{local_addr}/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{PATH}", self.local_addr)
    }

    /// Stops accepting requests, closes every session, and waits for the
    /// server to finish.
    pub async fn shutdown(self) -> Result<(), McpError> {
        self.shutdown.cancel();
        self.wait().await
    }

    /// Waits until the server stops (it only does on shutdown or failure).
    pub async fn wait(self) -> Result<(), McpError> {
        match self.task.await {
            Ok(result) => result.map_err(McpError::Io),
            Err(error) => Err(McpError::Task(error.to_string())),
        }
    }
}

/// The `Host` values accepted: loopback names with the bound port, then
/// the configured ones.
fn allowed_hosts(server: &McpServer, port: u16) -> Vec<String> {
    let mut hosts = vec![
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ];
    hosts.extend(server.allowed_hosts.iter().cloned());
    hosts
}

/// The `Origin` values accepted: loopback origins with the bound port, then
/// the configured ones.
fn allowed_origins(server: &McpServer, port: u16) -> Vec<String> {
    let mut origins = vec![
        format!("http://localhost:{port}"),
        format!("http://127.0.0.1:{port}"),
        format!("http://[::1]:{port}"),
    ];
    origins.extend(server.allowed_origins.iter().cloned());
    origins
}

pub(crate) async fn bind(server: McpServer, addr: SocketAddr) -> Result<HttpServer, McpError> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local_addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts(&server, local_addr.port()))
        .with_allowed_origins(allowed_origins(&server, local_addr.port()))
        .enforce_origin_validation()
        // Closes open SSE streams on shutdown; graceful shutdown would wait
        // for them forever otherwise.
        .with_cancellation_token(shutdown.child_token());
    let limits = server.limits;
    let sessions = CappedSessions::new(SessionLimits {
        max: limits.max_sessions,
        max_per_peer: limits.max_sessions_per_peer,
        min_idle: limits.session_eviction_min_idle,
        uninitialized_life: limits.uninitialized_session_timeout,
    });
    let handler = server.handler();
    let service = StreamableHttpService::new(
        move || Ok(handler.new_session()),
        Arc::new(sessions.clone()),
        config,
    );
    let router = axum::Router::new().route_service(PATH, service).layer(
        axum::middleware::from_fn_with_state(sessions, refuse_sessions_beyond_the_cap),
    );
    let stop = shutdown.clone();
    let task = tokio::spawn(serve(listener, router, limits, stop));
    tracing::info!(url = %format!("http://{local_addr}{PATH}"), "MCP server listening");
    Ok(HttpServer {
        local_addr,
        shutdown,
        task,
    })
}

/// Answers a new session's `initialize` (a POST without a session id) with
/// 503 while the session cap is reached, or 429 while its peer's is, and no
/// idle session can make room; the session manager checks again when it
/// counts the session to its peer, so a race past this check is refused
/// there (rmcp answers that with a 500).
async fn refuse_sessions_beyond_the_cap(
    axum::extract::State(sessions): axum::extract::State<CappedSessions>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let opens_a_session = request.method() == axum::http::Method::POST
        && !request.headers().contains_key("mcp-session-id");
    let opener = request
        .extensions()
        .get::<Opener>()
        .copied()
        .unwrap_or(Opener::Local);
    if opens_a_session && let Some(refusal) = sessions.refusal(opener) {
        let status = match refusal {
            SessionsError::PeerFull(_) => axum::http::StatusCode::TOO_MANY_REQUESTS,
            SessionsError::Full(_) | SessionsError::Local(_) => {
                axum::http::StatusCode::SERVICE_UNAVAILABLE
            }
        };
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": { "code": -32000, "message": refusal.to_string() },
        });
        return axum::response::Response::builder()
            .status(status)
            .header(axum::http::header::CONTENT_TYPE, "application/json")
            .header(axum::http::header::RETRY_AFTER, "5")
            .body(axum::body::Body::from(body.to_string()))
            .unwrap_or_default();
    }
    next.run(request).await
}

/// The number of SSE streams served at once: the configured budget, and
/// never more than half the connections, so that streams (each of which
/// holds an HTTP/1 connection for as long as its session lasts) cannot take
/// the connections requests need.
fn stream_budget(limits: &HttpLimits) -> usize {
    limits
        .max_sse_streams
        .min(limits.max_connections / 2)
        .min(Semaphore::MAX_PERMITS)
}

/// What every connection shares.
struct Shared {
    router: TowerToHyperService<axum::Router>,
    /// One permit per open SSE stream.
    streams: Arc<Semaphore>,
    stream_budget: usize,
    body_timeout: Duration,
}

/// Accepts connections until `stop`, at most `limits.max_connections` at
/// once and `limits.max_connections_per_peer` per peer, each under the
/// limits of [`connection`]; then waits for the open ones to finish.
async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: HttpLimits,
    stop: CancellationToken,
) -> Result<(), std::io::Error> {
    let max = limits.max_connections.min(Semaphore::MAX_PERMITS);
    let permits = Arc::new(Semaphore::new(max));
    let peers = Arc::new(Peers::new(limits.max_connections_per_peer));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout.min(LONGEST));
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.http2_keep_alive_interval.min(LONGEST))
        .keep_alive_timeout(limits.http2_keep_alive_timeout.min(LONGEST));
    let builder = Arc::new(builder);
    let stream_budget = stream_budget(&limits);
    let shared = Arc::new(Shared {
        router: TowerToHyperService::new(router),
        streams: Arc::new(Semaphore::new(stream_budget)),
        stream_budget,
        body_timeout: limits.request_body_timeout,
    });
    loop {
        let acquire = Arc::clone(&permits).acquire_owned();
        let permit = match stop.run_until_cancelled(acquire).await {
            None | Some(Err(_)) => break,
            Some(Ok(permit)) => permit,
        };
        // The permit is kept across the connections refused for their peer.
        let Some((stream, peer)) = admit(&listener, &peers, &stop).await else {
            break;
        };
        tokio::spawn(connection(
            stream,
            Arc::clone(&builder),
            Arc::clone(&shared),
            limits,
            stop.clone(),
            (permit, peer),
        ));
    }
    // Every connection gives its permit back when it ends.
    let _all = permits.acquire_many(max as u32).await;
    Ok(())
}

/// The next connection whose peer is under its limit, and its place among
/// that peer's connections; `None` on `stop`. The others are closed.
async fn admit(
    listener: &tokio::net::TcpListener,
    peers: &Arc<Peers>,
    stop: &CancellationToken,
) -> Option<(tokio::net::TcpStream, PeerSlot)> {
    loop {
        match stop.run_until_cancelled(listener.accept()).await? {
            Ok((stream, address)) => match peers.admit(address.ip()) {
                Some(slot) => return Some((stream, slot)),
                None => {
                    tracing::debug!(
                        peer = %address.ip(),
                        max = peers.max,
                        "MCP HTTP connection refused: the peer has its maximum open"
                    );
                }
            },
            Err(error) => {
                // Out of file descriptors and the like: pause instead of
                // spinning on the same error.
                tracing::warn!(%error, "MCP server could not accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Serves one connection until it ends, `stop` (then gracefully, to its
/// end), or it has been idle for the idle timeout (then gracefully, for at
/// most [`IDLE_CLOSE_GRACE`] or the idle timeout if shorter: a peer that
/// does not let it close, such as an HTTP/2 peer that never answers the
/// `GOAWAY`'s ping, is dropped).
/// Its writes are under the write timeout ([`TimedWrites`]), and its
/// HTTP/2 answers under the send timeout ([`Activity::stalled_for`]): past
/// it, the connection is dropped, also while it shuts down. `held` (its connection
/// permit and its peer's slot) is given back when it ends.
async fn connection(
    stream: tokio::net::TcpStream,
    builder: Arc<auto::Builder<TokioExecutor>>,
    shared: Arc<Shared>,
    limits: HttpLimits,
    stop: CancellationToken,
    held: (OwnedSemaphorePermit, PeerSlot),
) {
    let activity = Arc::new(Activity::new());
    let service = ConnectionService {
        shared,
        activity: Arc::clone(&activity),
        opener: held.1.opener(),
    };
    let stream = TimedWrites::new(stream, limits.write_timeout);
    // Polled here, then shut down gracefully and run to its end.
    let mut connection =
        pin!(builder.serve_connection_with_upgrades(TokioIo::new(stream), service));
    let idle_timeout = limits.idle_timeout;
    let send_timeout = limits.response_send_timeout;
    let served = tokio::select! {
        biased;
        served = connection.as_mut() => served,
        () = activity.idle_for(idle_timeout) => {
            tracing::debug!(?idle_timeout, "MCP HTTP connection closed: idle");
            connection.as_mut().graceful_shutdown();
            let grace = idle_timeout.min(IDLE_CLOSE_GRACE);
            match tokio::time::timeout(grace, connection).await {
                Ok(served) => served,
                Err(_) => {
                    tracing::debug!("MCP HTTP connection dropped: it did not close when asked");
                    Ok(())
                }
            }
        }
        () = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            // Graceful shutdown waits for every answer to be sent.
            tokio::select! {
                biased;
                served = connection => served,
                () = activity.stalled_for(send_timeout) => {
                    tracing::debug!(
                        ?send_timeout,
                        "MCP HTTP connection dropped on shutdown: an answer could not be sent"
                    );
                    Ok(())
                }
            }
        }
        () = activity.stalled_for(send_timeout) => {
            tracing::debug!(
                ?send_timeout,
                "MCP HTTP connection dropped: an answer waited too long to be sent"
            );
            Ok(())
        }
    };
    if let Err(error) = served {
        tracing::debug!(%error, "MCP HTTP connection ended with an error");
    }
}

/// A connection's socket whose writes may not wait longer than `timeout`
/// for the peer to read: past it, the write fails and hyper drops the
/// connection. Any progress starts the wait again. A peer that sends
/// requests and reads none of the answers would otherwise hold its
/// connection forever (an answer larger than the socket buffers also stays
/// in flight, so the idle timeout would not apply either).
struct TimedWrites {
    stream: tokio::net::TcpStream,
    timeout: Duration,
    /// Armed while a write waits; kept between waits, to be reset.
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
    stalled: bool,
}

impl TimedWrites {
    fn new(stream: tokio::net::TcpStream, timeout: Duration) -> Self {
        TimedWrites {
            stream,
            timeout: timeout.min(LONGEST),
            stall: None,
            stalled: false,
        }
    }

    /// `polled`, unless the write has waited for longer than the timeout.
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stalled = false;
            return polled;
        }
        let deadline = Instant::now() + self.timeout;
        let stall = match &mut self.stall {
            Some(stall) => {
                if !self.stalled {
                    stall.as_mut().reset(deadline);
                }
                stall
            }
            None => self
                .stall
                .insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        self.stalled = true;
        if stall.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the peer read nothing for {:?}", self.timeout),
            )));
        }
        Poll::Pending
    }
}

impl AsyncRead for TimedWrites {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for TimedWrites {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.watch(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.watch(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_flush(cx);
        this.watch(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_shutdown(cx);
        this.watch(cx, polled)
    }
}

/// Whether a connection has requests in flight, and since when it has had
/// none: its idle timeout; and since when each answer has waited to be
/// sent: its send timeout.
#[derive(Debug)]
struct Activity {
    /// Requests received and not yet answered to their end (an SSE stream
    /// is in flight as long as it is open).
    in_flight: AtomicUsize,
    /// Requests ever received, to tell a connection that stayed idle from
    /// one that was busy and idle again in the meantime.
    received: AtomicU64,
    /// When `in_flight` last fell to 0 (or the connection started).
    idle_since: Mutex<Instant>,
    /// Woken when `in_flight` falls to 0.
    became_idle: Notify,
    /// The answers (by request) that hyper holds and has not asked the next
    /// part of yet, and since when: it asks once it has sent the previous
    /// part, or handed it to the peer's flow-control window. An answer
    /// still in this map past the send timeout cannot be sent.
    unsent: Mutex<HashMap<u64, Instant>>,
    /// Woken when an answer starts to wait while none did.
    began_waiting: Notify,
}

impl Activity {
    fn new() -> Self {
        Activity {
            in_flight: AtomicUsize::new(0),
            received: AtomicU64::new(0),
            idle_since: Mutex::new(Instant::now()),
            became_idle: Notify::new(),
            unsent: Mutex::new(HashMap::new()),
            began_waiting: Notify::new(),
        }
    }

    /// A request received: in flight until the guard (held by its response
    /// body) is dropped.
    fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        let id = self.received.fetch_add(1, Ordering::AcqRel);
        InFlight {
            activity: Arc::clone(self),
            id,
        }
    }

    fn unsent(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Instant>> {
        self.unsent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Completes once an answer has waited `timeout` to be sent.
    async fn stalled_for(&self, timeout: Duration) {
        loop {
            let oldest = self.unsent().values().min().copied();
            let Some(since) = oldest else {
                // A wake-up from before this wait is kept by `Notify`.
                self.began_waiting.notified().await;
                continue;
            };
            let deadline = since + timeout.min(LONGEST);
            if Instant::now() >= deadline {
                return;
            }
            // Answers that start to wait meanwhile wait since later; one
            // that stops waiting leaves a later deadline, seen on waking.
            tokio::time::sleep_until(deadline).await;
        }
    }

    /// Completes once the connection has had no request in flight for
    /// `timeout`.
    async fn idle_for(&self, timeout: Duration) {
        loop {
            if self.in_flight.load(Ordering::Acquire) > 0 {
                // A wake-up from before this wait is kept by `Notify`, so
                // none is lost between the check and the wait.
                self.became_idle.notified().await;
                continue;
            }
            let received = self.received.load(Ordering::Acquire);
            let since = *self
                .idle_since
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            tokio::time::sleep_until(since + timeout.min(LONGEST)).await;
            if self.in_flight.load(Ordering::Acquire) == 0
                && self.received.load(Ordering::Acquire) == received
            {
                return;
            }
        }
    }
}

/// A request in flight on its connection (see [`Activity`]).
#[derive(Debug)]
struct InFlight {
    activity: Arc<Activity>,
    /// Its number on the connection.
    id: u64,
}

impl InFlight {
    /// Its answer (or a part of it) is in hyper's hands, to be sent.
    fn handed_over(&self) {
        let mut unsent = self.activity.unsent();
        let first = unsent.is_empty();
        unsent.insert(self.id, Instant::now());
        drop(unsent);
        if first {
            self.activity.began_waiting.notify_one();
        }
    }

    /// Hyper asks for the next part of its answer: it sent the last.
    fn taken(&self) {
        self.activity.unsent().remove(&self.id);
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.taken();
        if self.activity.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self
                .activity
                .idle_since
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Instant::now();
            self.activity.became_idle.notify_one();
        }
    }
}

/// The router as one connection's service: it counts the connection's
/// requests in flight, puts a deadline on request bodies, keeps SSE
/// streams within their budget, and marks each request with its opener.
struct ConnectionService {
    shared: Arc<Shared>,
    activity: Arc<Activity>,
    opener: Opener,
}

impl hyper::service::Service<Request<Incoming>> for ConnectionService {
    type Response = Response<Tracked>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Tracked>, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let in_flight = self.activity.begin();
        let http1 = request.version() < Version::HTTP_2;
        let opens_a_stream = request.method() == Method::GET && request.uri().path() == PATH;
        let stream = if opens_a_stream {
            match Arc::clone(&self.shared.streams).try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    tracing::warn!(
                        max = self.shared.stream_budget,
                        "MCP SSE stream refused: too many open"
                    );
                    let refusal = refusal(
                        StatusCode::SERVICE_UNAVAILABLE,
                        http1,
                        format!(
                            "Service Unavailable: the server already has its maximum of {} open SSE streams; retry later (requests are still served)",
                            self.shared.stream_budget
                        ),
                    );
                    return Box::pin(std::future::ready(Ok(
                        refusal.map(|body| Tracked::new(body, in_flight, None, http1))
                    )));
                }
            }
        } else {
            None
        };
        let (mut parts, body) = request.into_parts();
        parts.extensions.insert(self.opener);
        let timeout = self.shared.body_timeout;
        let (body, expired) = Deadline::new(body, timeout);
        let response =
            hyper::service::Service::call(&self.shared.router, Request::from_parts(parts, body));
        Box::pin(async move {
            let response = match response.await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            let response = if expired.is_some_and(|expired| expired.load(Ordering::Acquire)) {
                tracing::debug!(
                    ?timeout,
                    "MCP HTTP request refused: its body came too slowly"
                );
                refusal(
                    StatusCode::REQUEST_TIMEOUT,
                    http1,
                    format!(
                        "Request Timeout: the request body was not received within {timeout:?}"
                    ),
                )
            } else {
                response
            };
            Ok(response.map(|body| Tracked::new(body, in_flight, stream, http1)))
        })
    }
}

/// A plain-text refusal; on HTTP/1 it also closes the connection, so that
/// a refused peer cannot keep it (HTTP/2 has no `Connection` header, and
/// its other streams go on).
fn refusal(status: StatusCode, http1: bool, message: String) -> Response<Body> {
    let mut response = Response::new(Body::from(message));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if status == StatusCode::SERVICE_UNAVAILABLE {
        headers.insert(
            header::RETRY_AFTER,
            header::HeaderValue::from_static(STREAM_RETRY_AFTER),
        );
    }
    if http1 {
        headers.insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    response
}

/// A response body that keeps its request in flight (and its SSE stream's
/// permit) until hyper drops it, at its end or when the peer goes.
///
/// On HTTP/2 it also tells its connection when it waits to be sent: from
/// when hyper gets it, and from each part it yields, until hyper asks for
/// more, which hyper does once the peer's flow-control window lets it send
/// the last part (an SSE stream waiting for its next event is not waiting
/// to be sent). On HTTP/1 only a socket write can keep hyper from asking,
/// and the write timeout covers those, restarting with any progress; hyper
/// buffers up to a few hundred KiB there, which a slow but steady reader
/// could take longer than the send timeout to drain.
struct Tracked {
    body: Body,
    in_flight: InFlight,
    /// Whether it tells when it waits to be sent (HTTP/2).
    timed: bool,
    _stream: Option<OwnedSemaphorePermit>,
}

impl Tracked {
    fn new(
        body: Body,
        in_flight: InFlight,
        stream: Option<OwnedSemaphorePermit>,
        http1: bool,
    ) -> Self {
        let timed = !http1;
        if timed {
            in_flight.handed_over();
        }
        Tracked {
            body,
            in_flight,
            timed,
            _stream: stream,
        }
    }
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if !this.timed {
            return Pin::new(&mut this.body).poll_frame(cx);
        }
        this.in_flight.taken();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(_))) = &polled {
            this.in_flight.handed_over();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    /// Not all of it came within the body timeout.
    #[error("the request body was not received within {0:?}")]
    Timeout(Duration),
    /// The connection failed.
    #[error(transparent)]
    Read(#[from] hyper::Error),
}

/// A request body that must be received in full within a deadline, set
/// when its request's headers came in; past it, reading fails (and the
/// request is answered `408`). A body with nothing to read has no deadline.
struct Deadline {
    body: Incoming,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    timeout: Duration,
    /// Set when the deadline passed before the body's end.
    expired: Option<Arc<AtomicBool>>,
}

impl Deadline {
    fn new(body: Incoming, timeout: Duration) -> (Self, Option<Arc<AtomicBool>>) {
        let (timer, expired) = if body.is_end_stream() {
            (None, None)
        } else {
            let deadline = Instant::now() + timeout.min(LONGEST);
            (
                Some(Box::pin(tokio::time::sleep_until(deadline))),
                Some(Arc::new(AtomicBool::new(false))),
            )
        };
        let body = Deadline {
            body,
            timer,
            timeout,
            expired: expired.clone(),
        };
        (body, expired)
    }
}

impl HttpBody for Deadline {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if this
            .expired
            .as_ref()
            .is_some_and(|expired| expired.load(Ordering::Acquire))
        {
            return Poll::Ready(None);
        }
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(BodyError::Read)));
        }
        if let Some(timer) = &mut this.timer
            && timer.as_mut().poll(cx).is_ready()
        {
            this.timer = None;
            if let Some(expired) = &this.expired {
                expired.store(true, Ordering::Release);
            }
            return Poll::Ready(Some(Err(BodyError::Timeout(this.timeout))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The open connections of each peer, within `max` each.
#[derive(Debug)]
struct Peers {
    max: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl Peers {
    fn new(max: usize) -> Self {
        Peers {
            max: max.max(1),
            open: Mutex::new(HashMap::new()),
        }
    }

    /// A place for one more connection from `address`, unless its peer has
    /// its maximum open. Loopback peers are not counted: every local
    /// process, and a reverse proxy on the same host, is the one address
    /// `127.0.0.1`, which a per-peer limit cannot tell apart; refusing them
    /// would lock out every local client with a hostile one, where waiting
    /// for a connection (`max_connections`, in the order they came) serves
    /// each in turn. Loopback is told from the address itself, not its
    /// peer: `::1`'s /64 is `::`, which is not loopback.
    fn admit(self: &Arc<Self>, address: IpAddr) -> Option<PeerSlot> {
        if is_loopback(address) {
            return Some(PeerSlot {
                peers: Arc::clone(self),
                peer: None,
            });
        }
        let peer = peer_of(address);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(peer).or_insert(0);
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(PeerSlot {
            peers: Arc::clone(self),
            peer: Some(peer),
        })
    }
}

/// One connection's place among its peer's (none for a loopback peer);
/// given back on drop.
#[derive(Debug)]
struct PeerSlot {
    peers: Arc<Peers>,
    peer: Option<IpAddr>,
}

impl PeerSlot {
    /// Who this connection's new sessions are counted to.
    fn opener(&self) -> Opener {
        self.peer.map_or(Opener::Local, Opener::Remote)
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let Some(peer) = self.peer else {
            return;
        };
        let mut open = self
            .peers
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Entry::Occupied(mut count) = open.entry(peer) {
            *count.get_mut() = count.get().saturating_sub(1);
            if *count.get() == 0 {
                count.remove();
            }
        }
    }
}

/// Whether `address` is loopback: `127.0.0.0/8`, `::1`, or an IPv4-mapped
/// loopback address (`::ffff:127.0.0.1`, as a dual-stack socket sees an
/// IPv4 client).
fn is_loopback(address: IpAddr) -> bool {
    address.to_canonical().is_loopback()
}

/// The peer an address belongs to: an IPv4 address (IPv4-mapped IPv6
/// addresses included) is its own peer; an IPv6 address counts as its /64,
/// since one host usually has a whole /64 to pick addresses from.
fn peer_of(address: IpAddr) -> IpAddr {
    match address.to_canonical() {
        IpAddr::V6(address) => {
            let [a, b, c, d, ..] = address.segments();
            IpAddr::V6(Ipv6Addr::new(a, b, c, d, 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_an_ipv4_address_or_an_ipv6_64() {
        let parse = |text: &str| {
            text.parse::<IpAddr>()
                .unwrap_or_else(|error| panic!("{text}: {error}"))
        };
        assert_eq!(peer_of(parse("192.0.2.7")), parse("192.0.2.7"));
        assert_eq!(peer_of(parse("::ffff:192.0.2.7")), parse("192.0.2.7"));
        assert_eq!(
            peer_of(parse("2001:db8:1:2:aaaa:bbbb:cccc:dddd")),
            parse("2001:db8:1:2::")
        );
        assert_eq!(
            peer_of(parse("2001:db8:1:2::1")),
            peer_of(parse("2001:db8:1:2::2"))
        );
        assert_ne!(
            peer_of(parse("2001:db8:1:2::1")),
            peer_of(parse("2001:db8:1:3::1"))
        );
    }

    #[test]
    fn a_peer_gets_its_places_back() {
        let peers = Arc::new(Peers::new(2));
        let address = IpAddr::from([192, 0, 2, 7]);
        let first = peers.admit(address);
        let second = peers.admit(address);
        assert!(first.is_some() && second.is_some());
        assert!(peers.admit(address).is_none());
        assert!(peers.admit(IpAddr::from([192, 0, 2, 8])).is_some());
        drop(first);
        let third = peers.admit(address);
        assert!(third.is_some());
        drop((second, third));
        // Loopback peers are not limited.
        let local: Vec<_> = (0..3)
            .filter_map(|_| peers.admit(IpAddr::from([127, 0, 0, 1])))
            .collect();
        assert_eq!(local.len(), 3);
        let mapped = "::ffff:127.0.0.1"
            .parse::<IpAddr>()
            .unwrap_or_else(|error| panic!("{error}"));
        assert!((0..3).all(|_| peers.admit(mapped).is_some()));
        // Nor is IPv6 loopback, whose /64 (`::`) is not loopback.
        assert!((0..3).all(|_| peers.admit(IpAddr::from(Ipv6Addr::LOCALHOST)).is_some()));
        // A peer with nothing open is forgotten.
        assert!(
            peers
                .open
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
        );
    }

    #[test]
    fn streams_get_at_most_half_the_connections() {
        let limits = HttpLimits::default();
        assert_eq!(stream_budget(&limits), 128);
        let small = HttpLimits {
            max_connections: 5,
            max_sse_streams: 100,
            ..HttpLimits::default()
        };
        assert_eq!(stream_budget(&small), 2);
        let none = HttpLimits {
            max_sse_streams: 0,
            ..HttpLimits::default()
        };
        assert_eq!(stream_budget(&none), 0);
    }
}
