//! The connection to one server: made on first use, made again after the
//! server died, and the one place calls go through.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, JsonObject, PaginatedRequestParams, RequestId, ServerResult, Tool,
};
use rmcp::service::{PeerRequestOptions, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{Peer, RoleClient, ServiceError};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

use super::McpClientError;
use super::events::{Events, Hub};
use super::limits::{McpLimits, json_bytes, size};
use crate::context::ToolContext;
use crate::error::ToolError;

/// Bytes of a server's stderr kept to quote when it fails.
const STDERR_TAIL: usize = 2048;

/// Bytes of one stderr line written to the log; the rest of a longer line
/// is counted, not kept (a server may write gigabytes without a newline).
const STDERR_LINE: usize = 4096;

/// Bytes of a listing's cursor: an opaque position, a few dozen bytes in
/// practice. A longer one ends the listing (its pages' cursors are kept to
/// see one repeat, and count against the listing's bytes).
const MAX_CURSOR_BYTES: usize = 4096;

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

/// The default label of a stdio server: its program's file name
/// (`python3`, `github-mcp`), never its arguments, which may carry a key:
/// the label is written into every tool's usage, which the model provider
/// reads with every request.
pub(super) fn command_label(command: &std::process::Command) -> String {
    program_label(command.get_program())
}

/// The file name of `program`, as a label.
pub(crate) fn program_label(program: &std::ffi::OsStr) -> String {
    let path = std::path::Path::new(program);
    path.file_name()
        .unwrap_or(program)
        .to_string_lossy()
        .into_owned()
}

/// The default label of an HTTP server: the URL's scheme, host and port
/// (`https://mcp.example.com`), never its path, user, password, query or
/// fragment, where hosted servers put keys. A URL that does not parse is
/// `an MCP server over HTTP`.
pub(crate) fn url_label(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(parsed) => {
            let mut label = format!("{}://", parsed.scheme());
            if let Some(host) = parsed.host_str() {
                label.push_str(host);
            }
            if let Some(port) = parsed.port() {
                label.push_str(&format!(":{port}"));
            }
            label
        }
        Err(_) => "an MCP server over HTTP".to_owned(),
    }
}

/// Path segments, command-line arguments and environment values shorter
/// than this are not taken out of messages: they are words (`mcp`, `-y`),
/// not keys, and taking them out would garble every message.
const SHORTEST_SECRET: usize = 8;

/// The texts of `url` that may carry a credential, to take out of any text
/// this client shows (an HTTP library's error quotes the URL it failed
/// on): the whole URL, as given and as parsed, and its user, password,
/// query, fragment and longer path segments.
fn url_secrets(url: &str) -> Vec<String> {
    let mut secrets = vec![url.to_owned()];
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return secrets;
    };
    secrets.push(parsed.as_str().to_owned());
    if !parsed.username().is_empty() {
        secrets.push(parsed.username().to_owned());
    }
    secrets.extend(parsed.password().map(str::to_owned));
    secrets.extend(parsed.query().map(str::to_owned));
    secrets.extend(parsed.fragment().map(str::to_owned));
    // The raw forms too (percent-encoding aside, they are what was given).
    if let Some((_, rest)) = url.split_once('?') {
        secrets.push(rest.to_owned());
    }
    if let Some((_, fragment)) = url.split_once('#') {
        secrets.push(fragment.to_owned());
    }
    for path in [parsed.path(), url] {
        secrets.extend(
            path.split(['/', '?', '#', '&', '='])
                .filter(|segment| segment.len() >= SHORTEST_SECRET && !segment.contains(':'))
                .map(str::to_owned),
        );
    }
    ordered(secrets)
}

/// The texts of a stdio server's command that may carry a credential, to
/// take out of its stderr wherever it is quoted: each longer argument, the
/// value after its `=`, and each environment value set on the command.
fn command_secrets(command: &std::process::Command) -> Vec<String> {
    let mut secrets = Vec::new();
    for argument in command.get_args() {
        let argument = argument.to_string_lossy();
        if let Some((_, value)) = argument.split_once('=') {
            secrets.push(value.to_owned());
        }
        secrets.push(argument.into_owned());
    }
    for (_, value) in command.get_envs() {
        secrets.extend(value.map(|value| value.to_string_lossy().into_owned()));
    }
    secrets.retain(|secret| secret.len() >= SHORTEST_SECRET);
    ordered(secrets)
}

/// `secrets` without empty or repeated ones, longest first, so that a part
/// of a longer secret is not taken out before it (leaving the rest).
fn ordered(mut secrets: Vec<String>) -> Vec<String> {
    secrets.retain(|secret| !secret.is_empty());
    secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
    secrets.dedup();
    secrets
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
    // The server leads a process group of its own, which whatever it starts
    // joins (`npx` and `uvx` start the real server as their child).
    #[cfg(unix)]
    made.process_group(0);
    made
}

/// A stdio server's process, and on Unix its process group: dropped, it
/// kills both, so a server started through a launcher leaves no grandchild
/// behind, even when the launcher itself exited on the closed stdin.
struct ServerProcess {
    /// Killed on drop (`kill_on_drop`) wherever groups do not exist.
    _child: tokio::process::Child,
    /// The group's id (the server's pid when it started).
    #[cfg(unix)]
    group: Option<u32>,
}

impl ServerProcess {
    fn new(child: tokio::process::Child) -> Self {
        ServerProcess {
            #[cfg(unix)]
            group: child.id(),
            _child: child,
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(group) = self.group.and_then(|id| i32::try_from(id).ok()) {
            // An error means the group has no process left.
            let _ = rustix::process::Pid::from_raw(group).map(|group| {
                rustix::process::kill_process_group(group, rustix::process::Signal::KILL)
            });
        }
    }
}

/// The last bytes a server wrote to stderr.
#[derive(Default)]
struct StderrTail(Mutex<VecDeque<u8>>);

impl StderrTail {
    fn push(&self, bytes: &[u8]) {
        let mut tail = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let keep = &bytes[bytes.len().saturating_sub(STDERR_TAIL)..];
        tail.extend(keep);
        let excess = tail.len().saturating_sub(STDERR_TAIL);
        tail.drain(..excess);
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

/// Reads a server's stderr until it closes, in fixed-size chunks: each
/// line is logged (at debug) cut at [`STDERR_LINE`] bytes, and the last
/// [`STDERR_TAIL`] bytes are kept to quote when the server fails. No line
/// is ever held whole, so memory stays bounded whatever the server writes.
async fn read_stderr(mut stderr: impl AsyncRead + Unpin, tail: Arc<StderrTail>, label: String) {
    let mut chunk = vec![0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    // Bytes of the current line past what is kept of it.
    let mut cut = 0usize;
    let log = |line: &[u8], cut: usize| {
        let text = String::from_utf8_lossy(line);
        if cut == 0 {
            tracing::debug!(server = %label, "{text}");
        } else {
            tracing::debug!(server = %label, "{text}… ({cut} bytes more)");
        }
    };
    loop {
        let read = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        let bytes = chunk.get(..read).unwrap_or_default();
        tail.push(bytes);
        for part in bytes.split_inclusive(|byte| *byte == b'\n') {
            let (content, ends) = match part.split_last() {
                Some((b'\n', content)) => (content, true),
                _ => (part, false),
            };
            let room = STDERR_LINE.saturating_sub(line.len());
            let (kept, rest) = content.split_at(content.len().min(room));
            line.extend_from_slice(kept);
            cut += rest.len();
            if ends {
                log(&line, cut);
                line.clear();
                cut = 0;
            }
        }
    }
    if !line.is_empty() || cut > 0 {
        log(&line, cut);
    }
}

/// One live connection.
struct Session {
    service: RunningService<RoleClient, Events>,
    /// The server's process, for a stdio server: killed, with all it
    /// started, when the session is dropped.
    _process: Option<ServerProcess>,
    /// Which connection of the link this is: a call that saw it die
    /// forgets this one only, not a newer one.
    generation: u64,
}

/// The connection to one server, made again when needed.
pub(super) struct Link {
    endpoint: Endpoint,
    label: String,
    limits: McpLimits,
    /// Parts of the endpoint that may carry a credential, kept out of
    /// every message (see [`url_secrets`]).
    secrets: Vec<String>,
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
    pub(super) fn new(endpoint: Endpoint, label: String, limits: McpLimits, hub: Arc<Hub>) -> Self {
        let secrets = match &endpoint {
            Endpoint::Http { url, .. } => url_secrets(url),
            Endpoint::Stdio(command) => command_secrets(command),
            Endpoint::Connector(_) => Vec::new(),
        };
        Link {
            endpoint,
            label,
            limits,
            secrets,
            hub,
            session: tokio::sync::Mutex::new(None),
            generations: std::sync::atomic::AtomicU64::new(0),
            stderr: Arc::new(StderrTail::default()),
        }
    }

    pub(super) fn label(&self) -> &str {
        &self.label
    }

    pub(super) fn limits(&self) -> &McpLimits {
        &self.limits
    }

    /// `text` without the parts of the endpoint that may carry a
    /// credential: what an error of the HTTP client quotes of the URL, what
    /// a server's stderr says of its own command line.
    pub(super) fn scrub(&self, text: String) -> String {
        self.secrets
            .iter()
            .fold(text, |text, secret| text.replace(secret.as_str(), "…"))
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
        // Bounded: the session's lock is held meanwhile, and a server that
        // never answers `initialize` must not hold every call with it. A
        // process started here is killed when the timed-out start drops.
        let limit = self.limits.connect_timeout;
        let (service, child) = match tokio::time::timeout(limit, self.start()).await {
            Ok(started) => started?,
            Err(_) => {
                return Err(McpClientError::Initialize {
                    server: self.label.clone(),
                    message: format!(
                        "no answer to `initialize` within {} (the limit, McpLimits::connect_timeout){}",
                        crate::executor::humanize(limit),
                        self.stderr.quoted()
                    ),
                });
            }
        };
        let generation = self
            .generations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let peer = service.peer().clone();
        *session = Some(Session {
            service,
            _process: child,
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
    ) -> Result<(RunningService<RoleClient, Events>, Option<ServerProcess>), McpClientError> {
        let events = Events::new(self.hub.clone());
        let failed_init = |error: rmcp::service::ClientInitializeError, stderr: &StderrTail| {
            McpClientError::Initialize {
                server: self.label.clone(),
                message: self.scrub(format!("{error}{}", stderr.quoted())),
            }
        };
        match &self.endpoint {
            // Spawned here rather than with rmcp's `TokioChildProcess`:
            // its graceful close lets a launcher exit on the closed stdin
            // and then kills nothing, leaving the launcher's child behind.
            Endpoint::Stdio(command) => {
                let mut child = tokio_command(command)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|error| McpClientError::Start {
                        server: self.label.clone(),
                        // The program, not its arguments (they may hold a key).
                        message: format!("`{}`: {error}", command.get_program().to_string_lossy()),
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
                    tokio::spawn(read_stderr(stderr, tail, label));
                }
                let service = events
                    .serve((stdout, stdin))
                    .await
                    .map_err(|error| failed_init(error, &self.stderr))?;
                Ok((service, Some(ServerProcess::new(child))))
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
                    // The value is never quoted: a header may carry a key.
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
                // rmcp's own client (no idle pool; same-origin 307/308
                // redirects only), whose TLS needs the provider.
                crate::https::install_provider();
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
                    message: self.scrub(error.to_string()),
                })?;
                events
                    .serve(stream)
                    .await
                    .map(|service| (service, None))
                    .map_err(|error| failed_init(error, &self.stderr))
            }
        }
    }

    /// Every tool the server lists, following pagination within the
    /// limits: at most `max_pages` pages, `max_tools` tools and
    /// `max_listing_bytes` bytes, no cursor twice, all within
    /// `list_timeout`. Each tool comes with its size as JSON.
    pub(super) async fn list_tools(&self) -> Result<Vec<(Tool, usize)>, McpClientError> {
        let limit = self.limits.list_timeout;
        match tokio::time::timeout(limit, self.list_pages()).await {
            Ok(listed) => listed,
            Err(_) => Err(self.list_error(format!(
                "the listing did not end within {} (the limit, McpLimits::list_timeout)",
                crate::executor::humanize(limit)
            ))),
        }
    }

    async fn list_pages(&self) -> Result<Vec<(Tool, usize)>, McpClientError> {
        let (peer, generation) = self.peer().await?;
        let limits = &self.limits;
        let mut tools = Vec::new();
        let mut bytes = 0usize;
        let mut cursors = HashSet::new();
        let mut cursor = None;
        let mut pages = 0usize;
        loop {
            pages += 1;
            if pages > limits.max_pages {
                return Err(self.list_error(format!(
                    "the listing goes on past {} pages (the limit, McpLimits::max_pages)",
                    limits.max_pages
                )));
            }
            let params = PaginatedRequestParams::default().with_cursor(cursor.take());
            let listed = match peer.list_tools(Some(params)).await {
                Ok(listed) => listed,
                Err(error) => {
                    if matches!(error, ServiceError::TransportClosed) {
                        self.forget(generation).await;
                    }
                    return Err(self.list_error(format!("{error}{}", self.stderr.quoted())));
                }
            };
            if tools.len() + listed.tools.len() > limits.max_tools {
                return Err(self.list_error(format!(
                    "the server lists more than {} tools (the limit, McpLimits::max_tools)",
                    limits.max_tools
                )));
            }
            for tool in listed.tools {
                let tool_bytes = json_bytes(&tool);
                bytes = bytes.saturating_add(tool_bytes);
                if bytes > limits.max_listing_bytes {
                    return Err(self.list_error(format!(
                        "the tools listed hold more than {} (the limit, McpLimits::max_listing_bytes)",
                        size(limits.max_listing_bytes)
                    )));
                }
                tools.push((tool, tool_bytes));
            }
            match listed.next_cursor {
                None => return Ok(tools),
                Some(next) => {
                    if next.len() > MAX_CURSOR_BYTES {
                        return Err(self.list_error(format!(
                            "the server sent a cursor of {}, more than the {} a cursor may hold",
                            size(next.len()),
                            size(MAX_CURSOR_BYTES)
                        )));
                    }
                    bytes = bytes.saturating_add(next.len());
                    if !cursors.insert(next.clone()) {
                        return Err(self.list_error(format!(
                            "the server sent the cursor `{}` a second time (the listing would never end)",
                            cut(&next, 64)
                        )));
                    }
                    cursor = Some(next);
                }
            }
        }
    }

    fn list_error(&self, message: String) -> McpClientError {
        McpClientError::List {
            server: self.label.clone(),
            message: self.scrub(message),
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
            .map_err(|error| {
                // The whole error (its stderr, say) goes to the log; the
                // model learns the server is gone.
                tracing::warn!(server = %self.label, %error, "could not start the MCP server again for a call");
                CallFailure::Gone(format!(
                    "the MCP server `{}` stopped and could not be started again",
                    self.label
                ))
            })?;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new(name.to_owned()).with_arguments(arguments),
        ));
        // In flight before it is sent: the server's requests during the
        // call may arrive before the send returns.
        let route = self.hub.begin_call(ctx);
        let handle = match peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(error) => return Err(self.failed(error, generation).await),
        };
        route.progress(handle.progress_token.clone());
        let mut abandoned = Abandoned {
            peer: Some(peer.clone()),
            id: handle.id.clone(),
        };
        let response = tokio::select! {
            biased;
            response = handle.await_response() => response,
            () = ctx.cancellation().cancelled() => {
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
                // Its stderr goes to the log, not to the model: a server may
                // write anything there, its own command line included.
                let stderr = self.stderr.quoted();
                if !stderr.is_empty() {
                    tracing::warn!(server = %self.label, stderr = %self.scrub(stderr), "an MCP server closed its connection during a call");
                }
                CallFailure::Closed(format!(
                    "the connection to the MCP server `{}` closed during the call",
                    self.label
                ))
            }
            ServiceError::McpError(error) => CallFailure::Protocol(format!(
                "the MCP server `{}` refused the call: {} (JSON-RPC error {})",
                self.label, error.message, error.code.0
            )),
            other => CallFailure::Protocol(self.scrub(format!(
                "the call to the MCP server `{}` failed: {other}",
                self.label
            ))),
        }
    }
}

/// `text` cut at `chars` characters, for quoting what a server sent.
fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
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
