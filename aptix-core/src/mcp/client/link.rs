//! The connection to one server: made on first use, made again after the
//! server died, and the one place calls go through.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use futures_util::future::{Either, select};
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, JsonObject, RequestId, ServerResult, Tool,
};
use rmcp::service::{PeerRequestOptions, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{Peer, RoleClient, ServiceError};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite};

use super::McpClientError;
use super::events::{Events, Hub};
use crate::context::ToolContext;
use crate::error::ToolError;

/// Bytes of a server's stderr kept to quote when it fails.
const STDERR_TAIL: usize = 2048;

/// A connection made by the application ([`super::McpToolset::connector`]).
pub(super) trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<S: AsyncRead + AsyncWrite + Send + Unpin> Stream for S {}

pub(super) type BoxStream = Box<dyn Stream>;
pub(super) type Connect =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = std::io::Result<BoxStream>> + Send>> + Send + Sync>;

/// What every HTTP request carries.
#[derive(Default)]
pub(super) struct HttpOptions {
    /// Sent as `Authorization: Bearer ...`; never logged.
    pub(super) bearer: Option<String>,
    pub(super) headers: Vec<(String, String)>,
}

/// Where the server is.
pub(super) enum Endpoint {
    /// A child process. `std::process::Command` is kept (tokio's is not
    /// `Clone`); each start makes a tokio command from its parts.
    Stdio(std::process::Command),
    /// Streamable HTTP, with headers for every request.
    Http { url: String, options: HttpOptions },
    /// The application's own connection.
    Connector(Connect),
}

impl Endpoint {
    pub(super) fn stdio(command: std::process::Command) -> Self {
        Endpoint::Stdio(command)
    }

    pub(super) fn http(url: String) -> Self {
        Endpoint::Http {
            url,
            options: HttpOptions::default(),
        }
    }

    pub(super) fn connector<F, Fut, S>(connect: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::io::Result<S>> + Send + 'static,
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let connect: Connect = Arc::new(move || {
            let made = connect();
            Box::pin(async move { made.await.map(|stream| Box::new(stream) as BoxStream) })
        });
        Endpoint::Connector(connect)
    }
}

impl Endpoint {
    /// The bearer token and headers of an HTTP endpoint.
    pub(super) fn http_options(&mut self) -> Option<&mut HttpOptions> {
        match self {
            Endpoint::Http { options, .. } => Some(options),
            _ => None,
        }
    }
}

/// The command line, for messages: `python3 server.py`.
pub(super) fn command_label(command: &std::process::Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|part| part.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A copy of `command` for tokio, with the same program, arguments,
/// environment and directory.
fn tokio_command(command: &std::process::Command) -> tokio::process::Command {
    let mut made = tokio::process::Command::new(command.get_program());
    made.args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => made.env(key, value),
            None => made.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        made.current_dir(dir);
    }
    made.kill_on_drop(true);
    made
}

/// The last bytes a server wrote to stderr.
#[derive(Default)]
struct StderrTail(Mutex<VecDeque<u8>>);

impl StderrTail {
    fn push_line(&self, line: &str) {
        let mut tail = self.0.lock().unwrap_or_else(|e| e.into_inner());
        tail.extend(line.bytes());
        tail.push_back(b'\n');
        while tail.len() > STDERR_TAIL {
            tail.pop_front();
        }
    }

    /// `" (its stderr ended: ...)"`, or nothing.
    fn quoted(&self) -> String {
        let tail = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let text = String::from_utf8_lossy(&tail.iter().copied().collect::<Vec<_>>())
            .trim()
            .to_owned();
        if text.is_empty() {
            String::new()
        } else {
            format!(" (its stderr ended: {text})")
        }
    }
}

/// One live connection.
struct Session {
    service: RunningService<RoleClient, Events>,
    /// The server's process, for a stdio server: killed when the session
    /// is dropped (`kill_on_drop`).
    _child: Option<tokio::process::Child>,
    /// Which connection of the link this is: a call that saw it die
    /// forgets this one only, not a newer one.
    generation: u64,
}

/// The connection to one server, made again when needed.
pub(super) struct Link {
    endpoint: Endpoint,
    label: String,
    hub: Arc<Hub>,
    session: tokio::sync::Mutex<Option<Session>>,
    generations: std::sync::atomic::AtomicU64,
    stderr: Arc<StderrTail>,
}

/// Why a call could not be sent or answered.
pub(super) enum CallFailure {
    /// The server answered with a JSON-RPC error, or something unusable.
    Protocol(String),
    /// The connection closed (the server died): the next call starts it
    /// again.
    Closed(String),
    /// The server could not be started again.
    Gone(String),
    /// The run cancelled the call.
    Cancelled,
}

impl Link {
    pub(super) fn new(endpoint: Endpoint, label: String, hub: Arc<Hub>) -> Self {
        Link {
            endpoint,
            label,
            hub,
            session: tokio::sync::Mutex::new(None),
            generations: std::sync::atomic::AtomicU64::new(0),
            stderr: Arc::new(StderrTail::default()),
        }
    }

    pub(super) fn label(&self) -> &str {
        &self.label
    }

    /// The live connection's peer, connecting first if there is none (or
    /// the last one closed).
    async fn peer(&self) -> Result<(Peer<RoleClient>, u64), McpClientError> {
        let mut session = self.session.lock().await;
        if let Some(live) = session.as_ref() {
            if !live.service.is_closed() {
                return Ok((live.service.peer().clone(), live.generation));
            }
            tracing::warn!(server = %self.label, "the MCP server's connection closed; starting it again");
        }
        *session = None;
        let (service, child) = self.start().await?;
        let generation = self
            .generations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let peer = service.peer().clone();
        *session = Some(Session {
            service,
            _child: child,
            generation,
        });
        Ok((peer, generation))
    }

    /// Forgets connection `generation` (it closed under a call).
    async fn forget(&self, generation: u64) {
        let mut session = self.session.lock().await;
        if session
            .as_ref()
            .is_some_and(|live| live.generation == generation)
            && let Some(mut dead) = session.take()
        {
            let _ = dead.service.close().await;
        }
    }

    /// Closes the connection now.
    pub(super) async fn close(&self) {
        if let Some(mut live) = self.session.lock().await.take() {
            let _ = live.service.close().await;
        }
    }

    /// Connects and completes `initialize`; a stdio server's process
    /// comes along, to live as long as the connection.
    async fn start(
        &self,
    ) -> Result<
        (
            RunningService<RoleClient, Events>,
            Option<tokio::process::Child>,
        ),
        McpClientError,
    > {
        let events = Events::new(self.hub.clone());
        let failed_init = |error: rmcp::service::ClientInitializeError, stderr: &StderrTail| {
            McpClientError::Initialize {
                server: self.label.clone(),
                message: format!("{error}{}", stderr.quoted()),
            }
        };
        match &self.endpoint {
            // Spawned here rather than with rmcp's `TokioChildProcess`,
            // whose `process-wrap` puts the child in a process group
            // through an `unsafe` `pre_exec`: the server is the child
            // itself (the CLI starts it with `exec`), and `kill_on_drop`
            // ends it with the session.
            Endpoint::Stdio(command) => {
                let mut child = tokio_command(command)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|error| McpClientError::Start {
                        server: self.label.clone(),
                        message: error.to_string(),
                    })?;
                let pipes = child.stdout.take().zip(child.stdin.take());
                let Some((stdout, stdin)) = pipes else {
                    return Err(McpClientError::Start {
                        server: self.label.clone(),
                        message: "the process's stdin and stdout could not be piped".into(),
                    });
                };
                if let Some(stderr) = child.stderr.take() {
                    let tail = self.stderr.clone();
                    let label = self.label.clone();
                    tokio::spawn(async move {
                        let mut lines = tokio::io::BufReader::new(stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            tracing::debug!(server = %label, "{line}");
                            tail.push_line(&line);
                        }
                    });
                }
                let service = events
                    .serve((stdout, stdin))
                    .await
                    .map_err(|error| failed_init(error, &self.stderr))?;
                Ok((service, Some(child)))
            }
            Endpoint::Http {
                url,
                options: HttpOptions { bearer, headers },
            } => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                if let Some(token) = bearer {
                    config = config.auth_header(token.clone());
                }
                let mut custom = std::collections::HashMap::new();
                for (name, value) in headers {
                    let invalid = |message: String| McpClientError::Header {
                        server: self.label.clone(),
                        name: name.clone(),
                        message,
                    };
                    let header = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                        .map_err(|error| invalid(error.to_string()))?;
                    let value = reqwest::header::HeaderValue::from_str(value)
                        .map_err(|error| invalid(error.to_string()))?;
                    custom.insert(header, value);
                }
                let transport =
                    StreamableHttpClientTransport::from_config(config.custom_headers(custom));
                events
                    .serve(transport)
                    .await
                    .map(|service| (service, None))
                    .map_err(|error| failed_init(error, &self.stderr))
            }
            Endpoint::Connector(connect) => {
                let stream = connect().await.map_err(|error| McpClientError::Start {
                    server: self.label.clone(),
                    message: error.to_string(),
                })?;
                events
                    .serve(stream)
                    .await
                    .map(|service| (service, None))
                    .map_err(|error| failed_init(error, &self.stderr))
            }
        }
    }

    /// Every tool the server lists, following pagination.
    pub(super) async fn list_tools(&self) -> Result<Vec<Tool>, McpClientError> {
        let (peer, generation) = self.peer().await?;
        match peer.list_all_tools().await {
            Ok(tools) => Ok(tools),
            Err(error) => {
                if matches!(error, ServiceError::TransportClosed) {
                    self.forget(generation).await;
                }
                Err(McpClientError::List {
                    server: self.label.clone(),
                    message: format!("{error}{}", self.stderr.quoted()),
                })
            }
        }
    }

    /// Calls `name` with `arguments`, reporting the server's progress to
    /// `ctx` and sending `notifications/cancelled` if `ctx` is cancelled
    /// or the call is dropped (a time-out) before the answer.
    pub(super) async fn call(
        &self,
        name: &str,
        arguments: JsonObject,
        ctx: &ToolContext,
    ) -> Result<CallToolResult, CallFailure> {
        let (peer, generation) = self
            .peer()
            .await
            .map_err(|error| CallFailure::Gone(format!("{error}")))?;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new(name.to_owned()).with_arguments(arguments),
        ));
        let handle = match peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(error) => return Err(self.failed(error, generation).await),
        };
        let _progress = self.hub.route_progress(handle.progress_token.clone(), ctx);
        let mut abandoned = Abandoned {
            peer: Some(peer.clone()),
            id: handle.id.clone(),
        };
        let answer = Box::pin(handle.await_response());
        let cancelled = Box::pin(ctx.cancellation().cancelled());
        let response = match select(answer, cancelled).await {
            Either::Left((response, _)) => response,
            Either::Right(((), _)) => {
                abandoned.send("the run was cancelled");
                return Err(CallFailure::Cancelled);
            }
        };
        abandoned.peer = None;
        match response {
            Ok(ServerResult::CallToolResult(result)) => Ok(result),
            Ok(other) => Err(CallFailure::Protocol(format!(
                "the server answered tools/call with something other than a tool result: {}",
                serde_json::to_string(&other).unwrap_or_default()
            ))),
            Err(error) => Err(self.failed(error, generation).await),
        }
    }

    async fn failed(&self, error: ServiceError, generation: u64) -> CallFailure {
        match error {
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                self.forget(generation).await;
                CallFailure::Closed(format!(
                    "the connection to the MCP server `{}` closed during the call{}",
                    self.label,
                    self.stderr.quoted()
                ))
            }
            ServiceError::McpError(error) => CallFailure::Protocol(format!(
                "the MCP server `{}` refused the call: {} (JSON-RPC error {})",
                self.label, error.message, error.code.0
            )),
            other => CallFailure::Protocol(format!(
                "the call to the MCP server `{}` failed: {other}",
                self.label
            )),
        }
    }
}

/// Sends `notifications/cancelled` for a request nobody waits for any more
/// (the run was cancelled, or timed out and dropped the call).
struct Abandoned {
    peer: Option<Peer<RoleClient>>,
    id: RequestId,
}

impl Abandoned {
    fn send(&mut self, reason: &str) {
        let Some(peer) = self.peer.take() else { return };
        let params =
            CancelledNotificationParam::new(Some(self.id.clone()), Some(reason.to_owned()));
        // Drop cannot wait: the notice is sent by a task of its own.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(error) = peer.notify_cancelled(params).await {
                    tracing::debug!(%error, "could not send notifications/cancelled");
                }
            });
        }
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        self.send("the call was abandoned (its time limit passed)");
    }
}

impl CallFailure {
    /// The error the model reads.
    pub(super) fn into_tool_error(self) -> ToolError {
        match self {
            CallFailure::Protocol(message) => ToolError::failed(message),
            // A dead server is started again on the next try.
            CallFailure::Closed(message) => ToolError::transient(message),
            CallFailure::Gone(message) => ToolError::failed(message),
            CallFailure::Cancelled => ToolError::cancelled(),
        }
    }
}
