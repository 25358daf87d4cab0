//! The catalog as a Model Context Protocol server, on the official Rust SDK
//! (`rmcp`): `tools/list`, `tools/call` and `logging/setLevel` over stdio or
//! Streamable HTTP.
//!
//! ```no_run
//! # async fn run(catalog: aptix_core::Catalog) -> Result<(), aptix_core::mcp::McpError> {
//! aptix_core::mcp::serve_stdio(catalog).await
//! # }
//! ```
//!
//! What a client sees:
//!
//! * **Listed tools**: every server and human tool of the catalog, sorted by
//!   name. Client and provider tools are not listed and cannot be called:
//!   their final behaviour happens in the agent's own client or at the model
//!   provider, neither of which an MCP client is.
//! * **Description**: the tool's description, then a blank line and
//!   `Usage: ` with its usage text, since an MCP client shows the model only
//!   the description and the usage is what tells the model when to call.
//! * **Schemas**: `inputSchema` is the canonical schema ([`crate::Dialect::Mcp`])
//!   with `"$schema"` naming JSON Schema 2020-12. `outputSchema` is the
//!   tool's output schema, likewise, when that is an object schema (MCP
//!   allows no other); otherwise it is omitted.
//! * **Results**: a successful call carries the result JSON as text (a
//!   string result as its text, unquoted), and as `structuredContent` when
//!   the result is a JSON object (MCP wants an object there; non-object
//!   results are never wrapped, so that `outputSchema` always describes
//!   `structuredContent` as is). A tool that returns [`Content`](crate::content::Content) or
//!   `Vec<Content>` gets its blocks (text, image, audio, embedded resource)
//!   sent as they are instead.
//! * **Errors**: every failure of a call the executor ran (invalid arguments,
//!   a tool error, a time-out, cancellation, a refused approval) is a
//!   successful JSON-RPC response with `isError: true`, the envelope's error
//!   message as text and the error object (`code`, `message`, `details`) as
//!   `structuredContent`, so the model can read it and retry. Only requests
//!   that cannot be routed are JSON-RPC errors: an unknown (or unlisted) tool
//!   name is `-32602` invalid params.
//! * **Approvals** and **human tools** ask the person at the client through
//!   MCP elicitation (see [`McpServer`]); a client that cannot elicit gets an
//!   `isError` result saying so.
//! * **Ids**: each call's `tool_call_id` is a fresh `mcp-<uuid>`, not the
//!   JSON-RPC id: JSON-RPC ids restart with every session, and tools use the
//!   call id as an idempotency key. The JSON-RPC id is in the tracing span.
//! * **Progress**: when the request carries a progress token, what a tool
//!   reports with `ctx.progress(..)` becomes `notifications/progress`, in
//!   order (a report is dropped when 256 wait for the connection); when the call ends, the server sends the tool's last total
//!   (else `1 of 1`) unless the tool got there itself. Progress only ever
//!   increases (MCP requires it). Partial results have no MCP form.
//! * **Logging**: the server declares `logging`; `logging/setLevel` sets
//!   the session's level (`info` until then), and a tool sends
//!   `notifications/message` through the [`McpLog`] in its context state.
//! * **Sampling**: when the client declared `sampling`, a tool finds a
//!   [`Sampling`] in its context state to ask the client's LLM
//!   (`sampling/createMessage`).
//!
//! rmcp logs every message whole (arguments, results, answers) at DEBUG and
//! TRACE: give the program [`log_filter`], or declared secrets of MCP calls
//! reach the log.

#[cfg(feature = "mcp-client")]
mod client;
mod content;
mod elicit;
mod handler;
mod http;
mod list;
mod log_filter;
mod logging;
mod progress;
mod sampling;
mod sessions;

use std::net::SocketAddr;

use rmcp::ServiceExt;
use rmcp::model::NumberOrString;
use rmcp::service::RoleServer;

use crate::catalog::Catalog;
use crate::context::ToolContext;
use crate::executor::Executor;

#[cfg(feature = "mcp-client")]
pub use client::{
    Elicitor, McpClientError, McpLimits, McpLock, McpTools, McpToolset, PinnedTool, RefusedTool,
    RequireApproval,
};
#[cfg(all(feature = "mcp-client", feature = "cli"))]
pub(crate) use client::{program_label as client_program_label, url_label as client_url_label};
pub use handler::AptixMcpHandler;
pub use http::HttpServer;
pub use log_filter::{hide_sdk_payloads, log_filter};
pub use logging::{LogLevel, McpLog};
pub use sampling::{Sampling, SamplingError};

/// Why an MCP server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The listening socket could not be bound, or stdio failed.
    #[error("MCP server I/O failed: {0}")]
    Io(#[from] std::io::Error),
    /// The client did not complete the MCP `initialize` handshake.
    #[error("the MCP client did not complete initialization: {0}")]
    Initialize(String),
    /// The server's task ended abnormally (it panicked or was aborted).
    #[error("the MCP server task failed: {0}")]
    Task(String),
    /// Tools declare state (`state = [Db]`) that the server's context does
    /// not hold: every missing pair, found before anything is served.
    #[error("the MCP server's context lacks state its tools declare (add it with `McpServer::context(ToolContext::new().with_state(..))`): {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    MissingState(Vec<crate::context::MissingState>),
}

/// The server: a catalog, the context its calls run in, and the HTTP
/// options. Build it, then call one of the `serve_*` methods.
///
/// ```no_run
/// # async fn run(catalog: aptix_core::Catalog) -> Result<(), aptix_core::mcp::McpError> {
/// use aptix_core::mcp::McpServer;
/// use aptix_core::ToolContext;
///
/// let server = McpServer::new(catalog).context(ToolContext::new().with_session_id("mcp"));
/// let http = server.bind_http("127.0.0.1:0".parse().expect("an address")).await?;
/// println!("listening on {}", http.url());
/// http.wait().await
/// # }
/// ```
///
/// Approval-gated server tools ask the client (form elicitation with one
/// boolean `approve` field; the message shows the validated arguments) and
/// run only when the person accepts with `approve: true`; declining,
/// cancelling or `approve: false` ends in a `denied` error result. Human
/// tools ask with a form built from their output schema, which must be a
/// flat object of primitive properties (what MCP elicitation allows); the
/// answer is checked with [`crate::ToolDefinition::check_output`] and
/// becomes the result. On protocol 2026-07-28 and later, where a server may
/// no longer send requests to the client, both are asked with an
/// `input_required` result (multi round-trip requests) instead; the
/// client's retry must carry the answer, bound to the same arguments.
#[derive(Debug, Clone)]
pub struct McpServer {
    executor: Executor,
    context: ToolContext,
    name: String,
    version: String,
    instructions: Option<String>,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    limits: HttpLimits,
}

/// The limits of the Streamable HTTP server, which a client that never
/// finishes its requests, keeps its connections or streams open, or keeps
/// opening sessions could otherwise use to hold the server's connections
/// and memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HttpLimits {
    pub(crate) header_read_timeout: std::time::Duration,
    pub(crate) request_body_timeout: std::time::Duration,
    pub(crate) idle_timeout: std::time::Duration,
    pub(crate) http2_keep_alive_interval: std::time::Duration,
    pub(crate) http2_keep_alive_timeout: std::time::Duration,
    pub(crate) write_timeout: std::time::Duration,
    pub(crate) response_send_timeout: std::time::Duration,
    pub(crate) max_connections: usize,
    pub(crate) max_connections_per_peer: usize,
    pub(crate) max_sse_streams: usize,
    pub(crate) max_sessions: usize,
    pub(crate) max_sessions_per_peer: usize,
    pub(crate) session_eviction_min_idle: std::time::Duration,
    pub(crate) uninitialized_session_timeout: std::time::Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            request_body_timeout: DEFAULT_REQUEST_BODY_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            http2_keep_alive_interval: DEFAULT_HTTP2_KEEP_ALIVE_INTERVAL,
            http2_keep_alive_timeout: DEFAULT_HTTP2_KEEP_ALIVE_TIMEOUT,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            response_send_timeout: DEFAULT_RESPONSE_SEND_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_peer: DEFAULT_MAX_CONNECTIONS_PER_PEER,
            max_sse_streams: DEFAULT_MAX_SSE_STREAMS,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_peer: DEFAULT_MAX_SESSIONS_PER_PEER,
            session_eviction_min_idle: DEFAULT_SESSION_EVICTION_MIN_IDLE,
            uninitialized_session_timeout: DEFAULT_UNINITIALIZED_SESSION_TIMEOUT,
        }
    }
}

/// How long a client has to send a request's headers ([`McpServer::header_read_timeout`]).
pub const DEFAULT_HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// How long a client has to send a request's body once its headers are in
/// ([`McpServer::request_body_timeout`]).
pub const DEFAULT_REQUEST_BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// How long a connection may stay open with no request in flight
/// ([`McpServer::idle_timeout`]).
pub const DEFAULT_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// How often an HTTP/2 connection is pinged ([`McpServer::http2_keep_alive_interval`]).
pub const DEFAULT_HTTP2_KEEP_ALIVE_INTERVAL: std::time::Duration =
    std::time::Duration::from_secs(15);
/// How long an HTTP/2 peer has to answer a ping ([`McpServer::http2_keep_alive_timeout`]).
pub const DEFAULT_HTTP2_KEEP_ALIVE_TIMEOUT: std::time::Duration =
    std::time::Duration::from_secs(10);
/// How long a write to a client may wait for it to read
/// ([`McpServer::write_timeout`]).
pub const DEFAULT_WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// How long an HTTP/2 answer may wait to be sent
/// ([`McpServer::response_send_timeout`]).
pub const DEFAULT_RESPONSE_SEND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// How many HTTP connections are served at once ([`McpServer::max_connections`]).
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// How many HTTP connections one peer may hold at once
/// ([`McpServer::max_connections_per_peer`]).
pub const DEFAULT_MAX_CONNECTIONS_PER_PEER: usize = 32;
/// How many SSE streams (HTTP `GET`s) may be open at once
/// ([`McpServer::max_sse_streams`]).
pub const DEFAULT_MAX_SSE_STREAMS: usize = 128;
/// How many MCP sessions may be open at once ([`McpServer::max_sessions`]).
pub const DEFAULT_MAX_SESSIONS: usize = 1024;
/// How many MCP sessions one peer may hold at once
/// ([`McpServer::max_sessions_per_peer`]): well below
/// [`DEFAULT_MAX_SESSIONS`], so that it takes 16 peers to fill the server.
pub const DEFAULT_MAX_SESSIONS_PER_PEER: usize = 64;
/// How long a session must go unused before a new session may close it to
/// make room ([`McpServer::session_eviction_min_idle`]).
pub const DEFAULT_SESSION_EVICTION_MIN_IDLE: std::time::Duration =
    std::time::Duration::from_secs(10);
/// How long a session may wait for `notifications/initialized`
/// ([`McpServer::uninitialized_session_timeout`]).
pub const DEFAULT_UNINITIALIZED_SESSION_TIMEOUT: std::time::Duration =
    std::time::Duration::from_secs(30);

impl McpServer {
    /// A server over `catalog` with an empty context, named `aptix`.
    pub fn new(catalog: Catalog) -> Self {
        Self::with_executor(Executor::new(catalog))
    }

    /// A server over an executor configured elsewhere (e.g. its default
    /// time-out): the same executor an agent loop uses.
    pub fn with_executor(executor: Executor) -> Self {
        McpServer {
            executor,
            context: ToolContext::new(),
            name: "aptix".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            instructions: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            limits: HttpLimits::default(),
        }
    }

    /// The base context of every call: its state (pools, clients) and ids.
    /// Each call gets its own id and a cancellation token that is cancelled
    /// when the client cancels the request or when this context's token is.
    pub fn context(mut self, context: ToolContext) -> Self {
        self.context = context;
        self
    }

    /// The name and version the server reports in `initialize`.
    pub fn server_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.name = name.into();
        self.version = version.into();
        self
    }

    /// Instructions the server reports in `initialize` (clients may put
    /// them in the model's prompt).
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Also accepts HTTP requests whose `Host` is `host` (a name, or
    /// `name:port`), e.g. the public name of a deployment behind a proxy.
    /// Loopback names with the bound port are always accepted.
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.allowed_hosts.push(host.into());
        self
    }

    /// Also accepts HTTP requests from the browser origin `origin`
    /// (`scheme://host:port`; `:*` for any port). Loopback origins with the
    /// bound port are always accepted; requests without `Origin` always are.
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.allowed_origins.push(origin.into());
        self
    }

    /// How long an HTTP client has to send a request's headers before its
    /// connection is closed (default [`DEFAULT_HEADER_READ_TIMEOUT`]): a
    /// client that sends headers slowly, or never finishes them, would
    /// otherwise hold its connection forever.
    pub fn header_read_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.limits.header_read_timeout = timeout;
        self
    }

    /// How long an HTTP client has to send a request's body once its
    /// headers are in (default [`DEFAULT_REQUEST_BODY_TIMEOUT`]). A body not
    /// complete by then ends the request with `408 Request Timeout` (and
    /// closes an HTTP/1 connection): a client that sends a few bytes of its
    /// body and stops would otherwise hold its connection forever. Raise it
    /// for large requests over slow links.
    pub fn request_body_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.limits.request_body_timeout = timeout;
        self
    }

    /// How long a connection may stay open with no request in flight
    /// (default [`DEFAULT_IDLE_TIMEOUT`]): from its start until its first
    /// request, and between requests. It is then closed gracefully (an
    /// HTTP/2 `GOAWAY`). A client that connects and sends nothing, or only
    /// the HTTP/2 preface, would otherwise hold its connection forever. An
    /// open SSE stream is a request in flight.
    pub fn idle_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.limits.idle_timeout = timeout;
        self
    }

    /// How often an HTTP/2 connection is pinged (default
    /// [`DEFAULT_HTTP2_KEEP_ALIVE_INTERVAL`]); see
    /// [`McpServer::http2_keep_alive_timeout`].
    pub fn http2_keep_alive_interval(mut self, interval: std::time::Duration) -> Self {
        self.limits.http2_keep_alive_interval = interval;
        self
    }

    /// How long an HTTP/2 peer has to answer a ping before its connection
    /// is closed (default [`DEFAULT_HTTP2_KEEP_ALIVE_TIMEOUT`]): a peer that
    /// vanished, or stopped reading, would otherwise keep its connection and
    /// its streams open.
    pub fn http2_keep_alive_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.limits.http2_keep_alive_timeout = timeout;
        self
    }

    /// How long a write to an HTTP client may wait for the client to read
    /// (default [`DEFAULT_WRITE_TIMEOUT`]) before its connection is closed:
    /// a client that sends requests and never reads the answers would
    /// otherwise hold its connection (and any answer in flight) forever.
    /// Any progress starts the wait again, so a slow reader is not cut off.
    pub fn write_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.limits.write_timeout = timeout;
        self
    }

    /// How long an HTTP/2 answer may wait to be sent before its connection
    /// is dropped (default [`DEFAULT_RESPONSE_SEND_TIMEOUT`]): from when it
    /// is ready, and from each part of its body, until the client's
    /// flow-control window lets the server send that part. A client that
    /// grants no window (and answers pings) would otherwise hold its
    /// connection forever: nothing is written, so
    /// [`McpServer::write_timeout`] never starts, and the answer stays in
    /// flight, so [`McpServer::idle_timeout`] never does. Any window the
    /// client grants starts the wait again, and an SSE stream waiting for
    /// its next event is not waiting to be sent. HTTP/1 answers wait only
    /// for socket writes, under the write timeout.
    pub fn response_send_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.limits.response_send_timeout = timeout;
        self
    }

    /// How many HTTP connections are served at once (default
    /// [`DEFAULT_MAX_CONNECTIONS`], at least 1). Further connections wait,
    /// unanswered, until one closes. Every open SSE stream holds an HTTP/1
    /// connection: streams get at most half of them
    /// ([`McpServer::max_sse_streams`]), and one peer at most
    /// [`McpServer::max_connections_per_peer`].
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.limits.max_connections = connections.max(1);
        self
    }

    /// How many HTTP connections one peer may hold at once (default
    /// [`DEFAULT_MAX_CONNECTIONS_PER_PEER`], at least 1), so that one peer
    /// cannot take every one of [`McpServer::max_connections`]. A peer is an
    /// IPv4 address or an IPv6 /64 (one host's usual share); its connections
    /// beyond the limit are closed at once. Loopback peers are not limited:
    /// every local process, and a reverse proxy on the same host, is the one
    /// address `127.0.0.1` (or `::1`), so this limit cannot tell them apart
    /// (they wait for a connection in turn instead). A reverse proxy on
    /// another host is one peer too: raise the limit (up to
    /// `max_connections`) for it.
    pub fn max_connections_per_peer(mut self, connections: usize) -> Self {
        self.limits.max_connections_per_peer = connections.max(1);
        self
    }

    /// How many SSE streams (HTTP `GET`s at `/mcp`, which last as long as
    /// their session) may be open at once (default
    /// [`DEFAULT_MAX_SSE_STREAMS`]), and never more than half of
    /// [`McpServer::max_connections`], so that streams cannot take every
    /// connection and requests always have the other half. A stream beyond
    /// it is refused with `503` and `Retry-After`; the client's requests
    /// still work (server-initiated messages then wait for a stream).
    pub fn max_sse_streams(mut self, streams: usize) -> Self {
        self.limits.max_sse_streams = streams;
        self
    }

    /// How many MCP sessions may be open at once over HTTP (default
    /// [`DEFAULT_MAX_SESSIONS`], at least 1). A session ends with its
    /// client's `DELETE`, rmcp's idle timeout (five minutes), or
    /// [`McpServer::uninitialized_session_timeout`]; an `initialize` beyond
    /// the cap closes an idle session to make room: the least recently used
    /// one of the peer that holds the most (local clients count as one
    /// peer), so that one client that opened every session and left them
    /// cannot lock the others out for five minutes, and a client with a few
    /// keeps them while another holds many. Its client gets `404` for it and
    /// must initialize again, as after the idle timeout. Idle means no
    /// request or SSE stream in flight, and unused for
    /// [`McpServer::session_eviction_min_idle`]; with no such session, the
    /// `initialize` is refused with `503`.
    pub fn max_sessions(mut self, sessions: usize) -> Self {
        self.limits.max_sessions = sessions.max(1);
        self
    }

    /// How many MCP sessions one peer may hold at once over HTTP (default
    /// [`DEFAULT_MAX_SESSIONS_PER_PEER`], at least 1), so that one peer
    /// cannot take most of [`McpServer::max_sessions`] and push every other
    /// client's sessions out. A peer is counted as for
    /// [`McpServer::max_connections_per_peer`], and loopback clients are not
    /// limited (nor told apart) here either. A peer's `initialize` beyond it
    /// closes that peer's own least recently used idle session (idle as for
    /// [`McpServer::max_sessions`]); with none, it is refused with `429` and
    /// `Retry-After`. A reverse proxy on another host is one peer: raise the
    /// limit (up to `max_sessions`) for it.
    pub fn max_sessions_per_peer(mut self, sessions: usize) -> Self {
        self.limits.max_sessions_per_peer = sessions.max(1);
        self
    }

    /// How long a session must go unused (no request, no SSE stream) before
    /// a new session may close it to make room under
    /// [`McpServer::max_sessions`] or [`McpServer::max_sessions_per_peer`]
    /// (default [`DEFAULT_SESSION_EVICTION_MIN_IDLE`]). It keeps a client that
    /// opens sessions fast from closing every session used a moment ago
    /// (another client between two calls); but a client that uses each of
    /// its sessions within it keeps them all, and can hold the cap against
    /// new clients. `Duration::ZERO` closes the least recently used session
    /// with nothing in flight, however recently used: only sessions in use
    /// then keep new ones out, but a client that opens sessions fast closes
    /// the others' between their calls.
    pub fn session_eviction_min_idle(mut self, min_idle: std::time::Duration) -> Self {
        self.limits.session_eviction_min_idle = min_idle;
        self
    }

    /// How long a session may go without `notifications/initialized` after
    /// its `initialize` (default [`DEFAULT_UNINITIALIZED_SESSION_TIMEOUT`])
    /// before it is closed; a client that only ever sends `initialize` would
    /// otherwise keep each of its sessions for the five-minute idle timeout.
    pub fn uninitialized_session_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.limits.uninitialized_session_timeout = timeout;
        self
    }

    /// The rmcp handler, for serving it on a transport of your own. Check
    /// the context with [`McpServer::check`] first: the `serve_*` and
    /// `bind_http` methods do.
    pub fn handler(&self) -> AptixMcpHandler {
        AptixMcpHandler::new(self)
    }

    /// Whether the context holds every state type the catalog's tools
    /// declare (`state = [Db]`): a tool would otherwise fail on its first
    /// call, after the server was up.
    pub fn check(&self) -> Result<(), McpError> {
        let missing = self.executor.catalog().missing_state(&self.context);
        if missing.is_empty() {
            Ok(())
        } else {
            Err(McpError::MissingState(missing))
        }
    }

    /// Serves one client over stdin/stdout until it disconnects.
    pub async fn serve_stdio(self) -> Result<(), McpError> {
        self.serve_io(rmcp::transport::stdio()).await
    }

    /// Serves one client over any byte stream (a socket, a pipe,
    /// `tokio::io::duplex`) or `(reader, writer)` pair until it disconnects.
    pub async fn serve_io<T, E, A>(self, io: T) -> Result<(), McpError>
    where
        T: rmcp::transport::IntoTransport<RoleServer, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        self.check()?;
        let running = self
            .handler()
            .serve(io)
            .await
            .map_err(|error| McpError::Initialize(error.to_string()))?;
        tracing::info!("MCP client connected");
        let reason = running
            .waiting()
            .await
            .map_err(|error| McpError::Task(error.to_string()))?;
        tracing::info!(?reason, "MCP client disconnected");
        Ok(())
    }

    /// Binds `addr` and serves Streamable HTTP at `/mcp` in a background
    /// task; the handle tells the bound address (bind port 0 in tests).
    pub async fn bind_http(self, addr: SocketAddr) -> Result<HttpServer, McpError> {
        self.check()?;
        http::bind(self, addr).await
    }

    /// Serves Streamable HTTP at `http://{addr}/mcp` until the process ends
    /// or the server fails.
    pub async fn serve_http(self, addr: SocketAddr) -> Result<(), McpError> {
        self.bind_http(addr).await?.wait().await
    }
}

/// Serves every tool of `catalog` to one client over stdin/stdout, until
/// the client disconnects.
pub async fn serve_stdio(catalog: Catalog) -> Result<(), McpError> {
    McpServer::new(catalog).serve_stdio().await
}

/// Serves every tool of `catalog` over Streamable HTTP at
/// `http://{addr}/mcp`. Bind a loopback address (`127.0.0.1:PORT`) unless
/// the server must be reachable from elsewhere; requests whose `Host` is
/// not a loopback name with the bound port, or whose `Origin` is not a
/// loopback origin, are refused with 403 (DNS-rebinding protection; see
/// [`McpServer::allow_host`]).
pub async fn serve_http(catalog: Catalog, addr: SocketAddr) -> Result<(), McpError> {
    McpServer::new(catalog).serve_http(addr).await
}

/// The JSON-RPC id as text, for logs.
fn request_id_text(id: &NumberOrString) -> String {
    match id {
        NumberOrString::Number(number) => number.to_string(),
        NumberOrString::String(text) => text.to_string(),
    }
}
