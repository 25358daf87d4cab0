//! MCP logging: the session's level (`logging/setLevel`) and the logger a
//! tool finds in its context, which sends `notifications/message`.
//!
//! rmcp marks the logging types deprecated (SEP-2577 drops logging from a
//! future protocol version); every protocol version this server speaks
//! still has it, so the deprecated items are used here, behind
//! `#[allow(deprecated)]`, and Aptix's own [`LogLevel`] keeps them out of
//! the public API.

#![allow(deprecated)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::{Peer, RoleServer};
use serde_json::Value;

/// The severity of an MCP log message (the syslog levels MCP uses), from
/// least to most severe: `LogLevel::Debug < LogLevel::Emergency`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum LogLevel {
    /// Detailed information for debugging.
    Debug,
    /// Normal progress of the work.
    Info,
    /// Normal but significant.
    Notice,
    /// Something unexpected the work survived.
    Warning,
    /// Something failed.
    Error,
    /// A critical condition.
    Critical,
    /// Action must be taken at once.
    Alert,
    /// The system is unusable.
    Emergency,
}

impl LogLevel {
    /// Every level, in order; the index is the level's number in
    /// [`SessionLevel`].
    const ALL: [LogLevel; 8] = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Alert,
        LogLevel::Emergency,
    ];

    /// The level a session starts at, until the client sets one: `info`,
    /// so that clients that never ask are not flooded with debug output.
    pub const DEFAULT: LogLevel = LogLevel::Info;

    fn to_mcp(self) -> LoggingLevel {
        match self {
            LogLevel::Debug => LoggingLevel::Debug,
            LogLevel::Info => LoggingLevel::Info,
            LogLevel::Notice => LoggingLevel::Notice,
            LogLevel::Warning => LoggingLevel::Warning,
            LogLevel::Error => LoggingLevel::Error,
            LogLevel::Critical => LoggingLevel::Critical,
            LogLevel::Alert => LoggingLevel::Alert,
            LogLevel::Emergency => LoggingLevel::Emergency,
        }
    }

    pub(crate) fn from_mcp(level: LoggingLevel) -> Self {
        match level {
            LoggingLevel::Debug => LogLevel::Debug,
            LoggingLevel::Info => LogLevel::Info,
            LoggingLevel::Notice => LogLevel::Notice,
            LoggingLevel::Warning => LogLevel::Warning,
            LoggingLevel::Error => LogLevel::Error,
            LoggingLevel::Critical => LogLevel::Critical,
            LoggingLevel::Alert => LogLevel::Alert,
            LoggingLevel::Emergency => LogLevel::Emergency,
        }
    }
}

/// The minimum level of one MCP session, shared by its handler (which
/// `logging/setLevel` updates) and every logger handed to its calls, so a
/// change applies to calls already running.
#[derive(Debug, Clone)]
pub(crate) struct SessionLevel(Arc<AtomicU8>);

impl Default for SessionLevel {
    fn default() -> Self {
        SessionLevel(Arc::new(AtomicU8::new(LogLevel::DEFAULT as u8)))
    }
}

impl SessionLevel {
    pub(crate) fn set(&self, level: LogLevel) {
        self.0.store(level as u8, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> LogLevel {
        let index = usize::from(self.0.load(Ordering::Relaxed));
        LogLevel::ALL
            .get(index)
            .copied()
            .unwrap_or(LogLevel::DEFAULT)
    }
}

/// The MCP client's log, for the current call: found in the tool's context
/// state (`ctx.state::<aptix::mcp::McpLog>()`) on every MCP call, absent
/// outside MCP. Messages below the level the client set with
/// `logging/setLevel` ([`LogLevel::DEFAULT`] until it does) are not sent.
///
/// ```
/// # async fn tool(ctx: &aptix_core::ToolContext) {
/// if let Some(log) = ctx.state::<aptix_core::mcp::McpLog>() {
///     log.info("Fetching the report").await;
/// }
/// # }
/// ```
///
/// Sending is best effort: a message that cannot be sent is logged with
/// `tracing` and dropped, since a log line must never fail a call.
#[derive(Clone)]
pub struct McpLog {
    peer: Peer<RoleServer>,
    level: SessionLevel,
    logger: std::borrow::Cow<'static, str>,
}

impl std::fmt::Debug for McpLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpLog")
            .field("level", &self.level.get())
            .field("logger", &self.logger)
            .finish_non_exhaustive()
    }
}

impl McpLog {
    pub(crate) fn new(
        peer: Peer<RoleServer>,
        level: SessionLevel,
        logger: std::borrow::Cow<'static, str>,
    ) -> Self {
        McpLog {
            peer,
            level,
            logger,
        }
    }

    /// Whether a message at `level` would be sent now: check it before
    /// building an expensive message.
    pub fn enabled(&self, level: LogLevel) -> bool {
        level >= self.level.get()
    }

    /// Sends `data` (any JSON: a message, or an object of fields) at
    /// `level`, when the session's level lets it through. The logger name
    /// is the tool's name.
    pub async fn log(&self, level: LogLevel, data: impl Into<Value>) {
        if !self.enabled(level) {
            return;
        }
        let param = LoggingMessageNotificationParam::new(level.to_mcp(), data.into())
            .with_logger(self.logger.clone());
        if let Err(error) = self.peer.notify_logging_message(param).await {
            tracing::debug!(%error, "could not send an MCP log message");
        }
    }

    /// Sends `message` at `debug`.
    pub async fn debug(&self, message: impl Into<String>) {
        self.log(LogLevel::Debug, message.into()).await;
    }

    /// Sends `message` at `info`.
    pub async fn info(&self, message: impl Into<String>) {
        self.log(LogLevel::Info, message.into()).await;
    }

    /// Sends `message` at `notice`.
    pub async fn notice(&self, message: impl Into<String>) {
        self.log(LogLevel::Notice, message.into()).await;
    }

    /// Sends `message` at `warning`.
    pub async fn warning(&self, message: impl Into<String>) {
        self.log(LogLevel::Warning, message.into()).await;
    }

    /// Sends `message` at `error`.
    pub async fn error(&self, message: impl Into<String>) {
        self.log(LogLevel::Error, message.into()).await;
    }
}
