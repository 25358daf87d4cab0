//! The errors a tool function returns, and the stable codes the model sees.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The stable set of error codes in a result envelope.
///
/// Models and clients branch on these, so they never change meaning; new
/// situations get new codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The arguments string is not JSON.
    InvalidJson,
    /// The arguments are JSON, but not an object.
    NotObject,
    /// The arguments do not match the tool's schema, or the tool rejected them.
    InvalidArguments,
    /// No tool of that name is in the catalog.
    UnknownTool,
    /// A person or policy refused the call.
    Denied,
    /// The tool ran and reported a failure the model may act on.
    Failed,
    /// The call did not finish within its time limit.
    Timeout,
    /// The call was cancelled.
    Cancelled,
    /// Something went wrong inside; details are logged, never shown.
    Internal,
    /// The tool asks the model for another try: the message says what to
    /// change. Bounded per tool and run (`retries = N`).
    Retry,
}

impl ErrorCode {
    /// The wire spelling, e.g. `invalid_arguments`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidJson => "invalid_json",
            ErrorCode::NotObject => "not_object",
            ErrorCode::InvalidArguments => "invalid_arguments",
            ErrorCode::UnknownTool => "unknown_tool",
            ErrorCode::Denied => "denied",
            ErrorCode::Failed => "failed",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::Internal => "internal",
            ErrorCode::Retry => "retry",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The message the model sees for every internal error. Deliberately vague:
/// internal details (paths, SQL, stack traces) stay in the logs.
pub const INTERNAL_MESSAGE: &str = "The tool failed because of an internal error. The error was logged; retrying with the same arguments will probably fail again.";

/// What a tool function returns when it does not succeed.
///
/// Choose the constructor by who can fix the problem: the model
/// ([`ToolError::invalid_arguments`], [`ToolError::failed`]: the message is
/// shown to it) or the operator ([`ToolError::internal`]: the message is
/// logged and the model sees only a generic text).
///
/// Any `std::error::Error` converts into an internal `ToolError`, so `?`
/// works on I/O, database and HTTP errors without leaking their text to the
/// model. That blanket conversion is why `ToolError` itself does not
/// implement `std::error::Error` (the same trade-off `anyhow::Error` makes).
pub struct ToolError {
    code: ErrorCode,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    transient: bool,
}

impl ToolError {
    /// The arguments are well-formed but unacceptable (e.g. an unknown
    /// customer id). The model sees `message` and may retry differently.
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        Self::with_code(ErrorCode::InvalidArguments, message)
    }

    /// The tool could not do what was asked (e.g. the city has no weather
    /// station). The model sees `message`.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::with_code(ErrorCode::Failed, message)
    }

    /// The call was refused by policy. The model sees `message`.
    pub fn denied(message: impl Into<String>) -> Self {
        Self::with_code(ErrorCode::Denied, message)
    }

    /// Asks the model to call again with what `message` says to change (a
    /// date in the past, a query too broad). Unlike
    /// [`ToolError::invalid_arguments`] it is bounded: past the tool's
    /// `retries` budget in one run, the model gets a `failed` result.
    pub fn retry(message: impl Into<String>) -> Self {
        Self::with_code(ErrorCode::Retry, message)
    }

    /// A failure that may pass by itself (a timeout upstream, a 503). For
    /// an `idempotent` tool the executor runs the call again, with backoff,
    /// before the model sees anything; otherwise, and once those tries are
    /// spent, the model sees a `failed` result with `message`.
    pub fn transient(message: impl Into<String>) -> Self {
        ToolError {
            transient: true,
            ..Self::with_code(ErrorCode::Failed, message)
        }
    }

    /// Whether the failure may pass by itself ([`ToolError::transient`]).
    pub fn is_transient(&self) -> bool {
        self.transient
    }

    /// The tool noticed cancellation and stopped.
    pub fn cancelled() -> Self {
        Self::with_code(ErrorCode::Cancelled, "The call was cancelled.")
    }

    /// An internal failure caused by `error`: logged, never shown to the model.
    pub fn internal(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        ToolError {
            code: ErrorCode::Internal,
            message: error.to_string(),
            source: Some(Box::new(error)),
            transient: false,
        }
    }

    /// An internal failure described by `message`: logged, never shown.
    pub fn internal_message(message: impl Into<String>) -> Self {
        Self::with_code(ErrorCode::Internal, message)
    }

    /// An error with an explicit code.
    pub fn with_code(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            source: None,
            transient: false,
        }
    }

    /// The code the envelope will carry.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The message as given. For internal errors this is the log text, not
    /// what the model sees; see [`ToolError::model_message`].
    pub fn message(&self) -> &str {
        &self.message
    }

    /// What the model is shown.
    pub fn model_message(&self) -> &str {
        if self.code == ErrorCode::Internal {
            INTERNAL_MESSAGE
        } else {
            &self.message
        }
    }

    /// The underlying error, if any.
    pub fn source(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.source.as_deref()
    }
}

impl fmt::Debug for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolError")
            .field("code", &self.code)
            .field("message", &self.message)
            .field("source", &self.source)
            .finish()
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl<E> From<E> for ToolError
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn from(error: E) -> Self {
        ToolError::internal(error)
    }
}
