//! Other MCP servers' tools as catalog entries, on rmcp's client.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use aptix_core::mcp::{McpToolset, RequireApproval};
//!
//! let mut command = std::process::Command::new("python3");
//! command.arg("server.py");
//! let github = McpToolset::stdio(command)
//!     .prefix("github")
//!     .require_approval(RequireApproval::only(["delete_repo"]))
//!     .connect()
//!     .await?;
//! let catalog = aptix_core::Catalog::builder()
//!     .entries(github.entries())
//!     .build()?;
//! # let _ = catalog; Ok(()) }
//! ```
//!
//! What a mounted tool is:
//!
//! * **Its definition** is the server's: name (with the toolset's prefix),
//!   description, `inputSchema`, `outputSchema`, annotations. The schema is
//!   checked like any other tool's, except that its fields need not be
//!   described (nobody here can describe them); a tool whose schema is
//!   unusable, or that a dialect asked for with
//!   [`McpToolset::check_dialect`] cannot express, is left out and reported
//!   in [`McpTools::refused`], never rewritten.
//! * **A call** validates its arguments here, before anything is sent;
//!   `isError` results are `failed` envelopes carrying the server's text;
//!   `structuredContent` is checked against the `outputSchema`; images,
//!   audio and resources the server returns become the result's
//!   attachments (see [`crate::content::ToolReturn`]). A dead server, a
//!   protocol error or a time-out is an envelope too: a server that
//!   stopped is started again on the next call (a `transient` error, so an
//!   idempotent tool is tried again at once), and a server that cannot be
//!   started again is reported as gone. Cancelling the run sends
//!   `notifications/cancelled`; the server's progress notifications are
//!   the call's progress events.
//! * **Approval** is declared per tool with [`McpToolset::require_approval`];
//!   a gated remote tool suspends like a local one.
//! * **Drift**: [`McpToolset::pin`] refuses every tool whose definition is not
//!   the one reviewed (see [`McpLock`]).

mod events;
mod limits;
mod link;
mod lock;
mod remote;
mod sampling;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::catalog::ToolEntry;
use crate::meta::SourceLocation;
use crate::schema::Dialect;

pub use events::Elicitor;
pub use limits::McpLimits;
pub use lock::{McpLock, PinnedTool};

use events::Hub;
use link::{Endpoint, Link};
#[cfg(feature = "cli")]
pub(crate) use link::{program_label, url_label};

/// Which of a server's tools need a person's approval for each call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RequireApproval {
    /// None (the default): the server's tools run when the model calls them.
    #[default]
    Never,
    /// Every tool.
    All,
    /// Every tool except these (by the server's name or the prefixed one).
    Except(Vec<String>),
    /// Only these tools (by the server's name or the prefixed one).
    Only(Vec<String>),
}

impl RequireApproval {
    /// Every tool except `names`.
    pub fn except<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        RequireApproval::Except(names.into_iter().map(Into::into).collect())
    }

    /// Only `names`.
    pub fn only<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        RequireApproval::Only(names.into_iter().map(Into::into).collect())
    }

    /// Whether the tool the server calls `remote` (offered as `offered`)
    /// needs approval.
    fn applies(&self, remote: &str, offered: &str) -> bool {
        let named = |names: &[String]| names.iter().any(|n| n == remote || n == offered);
        match self {
            RequireApproval::Never => false,
            RequireApproval::All => true,
            RequireApproval::Except(names) => !named(names),
            RequireApproval::Only(names) => named(names),
        }
    }
}

/// Why a toolset could not be connected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpClientError {
    /// The server process could not be started, or the URL is unusable.
    #[error("could not start the MCP server `{server}`: {message}")]
    Start {
        /// The server's label.
        server: String,
        /// What failed.
        message: String,
    },
    /// The server did not complete `initialize`.
    #[error("the MCP server `{server}` did not complete initialization: {message}")]
    Initialize {
        /// The server's label.
        server: String,
        /// What failed (and the last lines the server wrote to stderr).
        message: String,
    },
    /// `tools/list` failed.
    #[error("the MCP server `{server}` could not list its tools: {message}")]
    List {
        /// The server's label.
        server: String,
        /// What failed.
        message: String,
    },
    /// A header given for HTTP is not a valid header.
    #[error("the header `{name}` for the MCP server `{server}` is invalid: {message}")]
    Header {
        /// The server's label.
        server: String,
        /// The header's name.
        name: String,
        /// What is wrong with it.
        message: String,
    },
    /// The lock file could not be read or written.
    #[error("the MCP lock file `{path}`: {message}")]
    Lock {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
}

/// A remote tool left out of the toolset, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RefusedTool {
    /// Its definition did not pass the catalog's checks (its name, its
    /// schema).
    #[error("the MCP server `{server}`'s tool `{tool}` is left out: {problem}")]
    Invalid {
        /// The server's label.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// The catalog's verdict.
        problem: String,
    },
    /// The dialect given to [`McpToolset::check_dialect`] cannot express
    /// its schema.
    #[error(
        "the MCP server `{server}`'s tool `{tool}` is left out: the {dialect} dialect cannot express its schema: {problem}"
    )]
    Dialect {
        /// The server's label.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// The dialect.
        dialect: String,
        /// Why.
        problem: String,
    },
    /// The toolset is pinned and the tool's definition is not the pinned
    /// one (or the tool was never pinned).
    #[error("the MCP server `{server}`'s tool `{tool}` is left out: {change}")]
    Drifted {
        /// The server's label.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// What changed since it was reviewed.
        change: String,
    },
}

/// How to reach one MCP server and how to offer its tools; [`McpToolset::connect`]
/// connects and lists them.
#[must_use]
pub struct McpToolset {
    endpoint: Endpoint,
    limits: McpLimits,
    elicitor: Option<Arc<dyn Elicitor>>,
    sampling_model: Option<Arc<dyn crate::model::ChatModel>>,
    sampling_limit: u32,
    offer: Offer,
}

impl fmt::Debug for McpToolset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpToolset")
            .field("server", &self.offer.label)
            .field("prefix", &self.offer.prefix)
            .field("approval", &self.offer.approval)
            .field("pinned", &self.offer.pins.is_some())
            .finish_non_exhaustive()
    }
}

impl McpToolset {
    /// A server run as a child process speaking MCP on its stdin and
    /// stdout. The command is kept, so the server can be started again if
    /// it dies; its stderr is read into `tracing` (debug) and its last
    /// lines are quoted when it fails. Its label is the program's file
    /// name (`python3`): the arguments, which may hold a key, are never
    /// shown (see [`McpToolset::label`]).
    #[track_caller]
    pub fn stdio(command: std::process::Command) -> Self {
        let label = link::command_label(&command);
        McpToolset::new(Endpoint::stdio(command), label, SourceLocation::caller())
    }

    /// A server at a Streamable HTTP URL (e.g. `http://127.0.0.1:8080/mcp`).
    /// Its label is the URL's scheme, host, port and path: a user,
    /// password, query or fragment, where keys travel, is never shown, in
    /// the label or in any error.
    #[track_caller]
    pub fn http(url: impl Into<String>) -> Self {
        let url = url.into();
        let label = link::url_label(&url);
        McpToolset::new(Endpoint::http(url), label, SourceLocation::caller())
    }

    /// A server reached through a connection made by `connect`, called
    /// again whenever the server must be reached anew: an in-process
    /// server ([`McpToolset::in_process`]), a socket of your own.
    #[track_caller]
    pub fn connector<F, Fut, S>(label: impl Into<String>, connect: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::io::Result<S>> + Send + 'static,
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        McpToolset::new(
            Endpoint::connector(connect),
            label.into(),
            SourceLocation::caller(),
        )
    }

    /// An Aptix [`McpServer`](super::McpServer) in this process, over an
    /// in-memory pipe: another team's catalog mounted as if remote.
    #[track_caller]
    pub fn in_process(server: super::McpServer, label: impl Into<String>) -> Self {
        McpToolset::connector(label, move || {
            let server = server.clone();
            async move {
                let (ours, theirs) = tokio::io::duplex(1 << 20);
                tokio::spawn(async move {
                    if let Err(error) = server.serve_io(theirs).await {
                        tracing::warn!(%error, "in-process MCP server stopped");
                    }
                });
                Ok(ours)
            }
        })
    }

    fn new(endpoint: Endpoint, label: String, source: SourceLocation) -> Self {
        McpToolset {
            endpoint,
            limits: McpLimits::default(),
            elicitor: None,
            sampling_model: None,
            sampling_limit: sampling::DEFAULT_SAMPLING_LIMIT,
            offer: Offer {
                label,
                prefix: None,
                approval: RequireApproval::Never,
                pins: None,
                timeout: None,
                dialect: None,
                hide_values: false,
                source,
            },
        }
    }

    /// The server's name in errors, logs and every tool's usage text,
    /// which the model provider reads with each request (default: the
    /// program's file name, or the URL without its user, query and
    /// fragment). Put no key in it.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.offer.label = label.into();
        self
    }

    /// Sends `Authorization: Bearer {token}` with every HTTP request (a
    /// stdio server ignores it). The token is never logged.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        if let Some(options) = self.endpoint.http_options() {
            options.bearer = Some(token.into());
        }
        self
    }

    /// Sends the header `name: value` with every HTTP request (a stdio
    /// server ignores it). Checked when connecting.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Some(options) = self.endpoint.http_options() {
            options.headers.push((name.into(), value.into()));
        }
        self
    }

    /// Offers each tool as `{prefix}_{name}`: `prefix("github")` turns
    /// `create_issue` into `github_create_issue`. Calls use the server's
    /// own name.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.offer.prefix = Some(prefix.into());
        self
    }

    /// Which tools wait for a person's approval (default: none).
    pub fn require_approval(mut self, rule: RequireApproval) -> Self {
        self.offer.approval = rule;
        self
    }

    /// Offers only tools whose definition is the one in `lock` (reviewed
    /// and written with [`McpTools::lock`], or the CLI's `mcp-lock`): a
    /// tool that changed, or that the lock does not hold, is left out and
    /// reported in [`McpTools::refused`], with what changed.
    pub fn pin(mut self, lock: McpLock) -> Self {
        self.offer.pins = Some(lock);
        self
    }

    /// [`McpToolset::pin`] with the lock read from `path` (JSON).
    pub fn pin_file(self, path: impl AsRef<std::path::Path>) -> Result<Self, McpClientError> {
        let lock = McpLock::read(path.as_ref())?;
        Ok(self.pin(lock))
    }

    /// The bounds on what this server may make the process spend:
    /// connecting and listing time, listing and definition sizes, result
    /// size, relisting, sampling and elicitation budgets (see
    /// [`McpLimits`] for each default).
    pub fn limits(mut self, limits: McpLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Each call's time limit (default: the executor's). When it passes,
    /// the server is sent `notifications/cancelled`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.offer.timeout = Some(timeout);
        self
    }

    /// Leaves out (and reports) every tool whose schema `dialect` cannot
    /// express, rather than failing the agent that lowers them.
    pub fn check_dialect(mut self, dialect: Dialect) -> Self {
        self.offer.dialect = Some(dialect);
        self
    }

    /// Shows none of the tools' argument and result values in events and
    /// logs (what `log_fields = []` does for a declared tool). Tools
    /// whose fields look secret are treated so anyway.
    pub fn hide_values(mut self) -> Self {
        self.offer.hide_values = true;
        self
    }

    /// Answers the server's elicitation requests (forms it asks a person
    /// to fill in during a call) with `elicitor` instead of the person
    /// watching the run. Without one, a request is asked through the call
    /// it arrives during ([`ToolContext::elicit`](crate::ToolContext::elicit)):
    /// in an agent run, the event `AgentEvent::Elicitation`; where nobody
    /// can be asked, or no call of this server is running, it is answered
    /// `cancel`.
    pub fn elicitation(mut self, elicitor: impl Elicitor) -> Self {
        self.elicitor = Some(Arc::new(elicitor));
        self
    }

    /// Answers the server's sampling requests (`sampling/createMessage`:
    /// the server asks the client's LLM for a completion during a call)
    /// with `model`, usually the agent's own (share it with an
    /// `Arc`). Off unless called: without it the capability is not
    /// offered and a request is refused. The model gets the server's
    /// system prompt and text messages and no tools; the reply is its text,
    /// at most the request's `maxTokens` (and at most `max_tokens`, see
    /// [`McpToolset::sampling_limit`]). Images or audio in a request are
    /// refused with an error naming them. The request is cancelled with
    /// the run.
    pub fn sampling(mut self, model: impl crate::model::ChatModel + 'static) -> Self {
        self.sampling_model = Some(Arc::new(model));
        self
    }

    /// The most tokens one sampling request may have the model produce,
    /// whatever the server asks (default 4096).
    pub fn sampling_limit(mut self, max_tokens: u32) -> Self {
        self.sampling_limit = max_tokens;
        self
    }

    /// Connects, lists every tool (following pagination) and makes their
    /// entries. The connection stays open until every [`McpTools`] (and
    /// every catalog holding one of its entries) is dropped.
    pub async fn connect(self) -> Result<McpTools, McpClientError> {
        let label = self.offer.label.clone();
        let sampler = self
            .sampling_model
            .map(|model| sampling::Sampler::new(model, self.sampling_limit));
        let hub = Arc::new(Hub::new(
            label.clone(),
            self.elicitor,
            sampler,
            self.limits.clone(),
        ));
        let link = Arc::new(Link::new(self.endpoint, label, self.limits, hub.clone()));
        let shared = Arc::new(Shared {
            link,
            offer: self.offer,
            listing: Mutex::new(Listing::default()),
            changes: tokio::sync::watch::channel(0).0,
            turn: tokio::sync::Mutex::new(()),
            relist: Mutex::new(Relist::default()),
        });
        hub.watch_list(Arc::downgrade(&shared));
        shared.refresh().await?;
        Ok(McpTools { shared })
    }
}

/// How the listed tools are turned into entries: the toolset's settings.
struct Offer {
    label: String,
    prefix: Option<String>,
    approval: RequireApproval,
    pins: Option<McpLock>,
    timeout: Option<Duration>,
    dialect: Option<Dialect>,
    hide_values: bool,
    source: SourceLocation,
}

/// The latest listing, made into entries.
#[derive(Default)]
struct Listing {
    entries: Vec<ToolEntry>,
    refused: Vec<RefusedTool>,
    /// The tools as the server listed them, by their name there.
    listed: BTreeMap<String, Value>,
}

struct Shared {
    link: Arc<Link>,
    offer: Offer,
    listing: Mutex<Listing>,
    changes: tokio::sync::watch::Sender<u64>,
    /// Held by a listing for its whole length: one at a time.
    turn: tokio::sync::Mutex<()>,
    /// The listings `list_changed` asks for, coalesced.
    relist: Mutex<Relist>,
}

/// Where the listings asked for by `notifications/tools/list_changed`
/// stand: at most one task lists at a time, and notifications that arrive
/// meanwhile make it list once more, not once each.
#[derive(Default)]
struct Relist {
    /// A task is listing (or waiting to).
    running: bool,
    /// A notification came since that task last began listing.
    again: bool,
    /// When the last listing ended.
    last: Option<tokio::time::Instant>,
}

impl Shared {
    /// Lists the tools again and remakes the entries. Checking the listed
    /// tools (their sizes, schemas, secrets, dialect) is CPU work whose cost
    /// a server chooses, so it runs on a blocking thread, never on one of
    /// the runtime's workers.
    async fn refresh(self: &Arc<Self>) -> Result<(), McpClientError> {
        let _turn = self.turn.lock().await;
        // The listing and the checks of what it listed share one time limit:
        // the checks' cost is the server's choice as much as the pages'.
        let limit = self.link.limits().list_timeout;
        let deadline = std::time::Instant::now() + limit;
        let listed = self.link.list_tools().await;
        self.relist_lock().last = Some(tokio::time::Instant::now());
        let tools = listed?;
        let shared = Arc::clone(self);
        let checked = tokio::task::spawn_blocking(move || {
            remote::listing(&shared.offer, &shared.link, tools, deadline)
        })
        .await;
        let failed = |message: String| McpClientError::List {
            server: self.offer.label.clone(),
            message,
        };
        let listing = match checked {
            Ok(Ok(listing)) => listing,
            Ok(Err(checked)) => {
                return Err(failed(format!(
                    "checking the listed tools took longer than {} (the limit, McpLimits::list_timeout): {checked} of them were checked",
                    crate::executor::humanize(limit)
                )));
            }
            Err(error) => return Err(failed(format!("checking the listed tools failed: {error}"))),
        };
        *self.listing.lock().unwrap_or_else(|e| e.into_inner()) = listing;
        self.changes.send_modify(|version| *version += 1);
        Ok(())
    }

    fn relist_lock(&self) -> std::sync::MutexGuard<'_, Relist> {
        self.relist.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What `notifications/tools/list_changed` does: lists again, at most
    /// once per [`McpLimits::relist_interval`], with one task for every
    /// notification that arrives while it waits or lists.
    fn list_changed(self: &Arc<Self>) {
        {
            let mut relist = self.relist_lock();
            relist.again = true;
            if relist.running {
                return;
            }
            relist.running = true;
        }
        let interval = self.link.limits().relist_interval;
        let toolset = Arc::downgrade(self);
        // Listing is a request on the connection whose handler calls
        // this: it is sent from a task of its own.
        tokio::spawn(async move {
            loop {
                let since_last = match toolset.upgrade() {
                    Some(shared) => shared.relist_lock().last,
                    None => return,
                };
                if let Some(last) = since_last {
                    tokio::time::sleep_until(last + interval).await;
                }
                let Some(shared) = toolset.upgrade() else {
                    return;
                };
                shared.relist_lock().again = false;
                match shared.refresh().await {
                    Ok(()) => {
                        tracing::info!(server = %shared.offer.label, "the MCP server's tools changed; listed again")
                    }
                    Err(error) => {
                        tracing::warn!(%error, "could not list the MCP server's changed tools")
                    }
                }
                let mut relist = shared.relist_lock();
                if !relist.again {
                    relist.running = false;
                    return;
                }
            }
        });
    }

    fn listing<T>(&self, read: impl FnOnce(&Listing) -> T) -> T {
        read(&self.listing.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// A connected toolset: the server's tools as entries. Cheap to clone.
#[derive(Clone)]
pub struct McpTools {
    shared: Arc<Shared>,
}

impl fmt::Debug for McpTools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpTools")
            .field("server", &self.shared.offer.label)
            .field("tools", &self.names())
            .field("refused", &self.refused().len())
            .finish()
    }
}

impl McpTools {
    /// The server's label.
    pub fn server(&self) -> &str {
        &self.shared.offer.label
    }

    /// The entries of the tools offered, in the server's order, to add to a
    /// catalog ([`crate::catalog::CatalogBuilder::entries`]). A name that
    /// collides with another tool of that catalog is a catalog error naming
    /// both: this toolset's is "made at run time" where
    /// [`McpToolset::stdio`] (or `http`) was called.
    pub fn entries(&self) -> Vec<ToolEntry> {
        self.shared.listing(|listing| listing.entries.clone())
    }

    /// The names of the tools offered.
    pub fn names(&self) -> Vec<String> {
        self.shared.listing(|listing| {
            listing
                .entries
                .iter()
                .map(|entry| entry.name().to_owned())
                .collect()
        })
    }

    /// The tools listed but not offered, and why.
    pub fn refused(&self) -> Vec<RefusedTool> {
        self.shared.listing(|listing| listing.refused.clone())
    }

    /// A lock of every tool the server lists now, as listed: review it,
    /// write it ([`McpLock::write`]) and pin it ([`McpToolset::pin`]).
    pub fn lock(&self) -> McpLock {
        self.shared
            .listing(|listing| McpLock::of(&self.shared.offer.label, &listing.listed))
    }

    /// Lists the tools again: what `notifications/tools/list_changed`
    /// does by itself.
    pub async fn refresh(&self) -> Result<(), McpClientError> {
        self.shared.refresh().await
    }

    /// A receiver that changes each time the tools are listed again (a
    /// `list_changed` notification, [`McpTools::refresh`]): rebuild the
    /// catalog (and its agent) from [`McpTools::entries`] when it does.
    /// The catalog's fingerprint changes when a definition does.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    /// Stops the server (or closes the HTTP session) now, rather than
    /// when the last entry is dropped. A later call starts it again.
    pub async fn close(&self) {
        self.shared.link.close().await;
    }
}
