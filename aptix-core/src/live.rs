//! What a running tool reports before its result (progress, partial
//! results of its output type) and what it may ask a person while it runs
//! (an elicitation).
//!
//! A tool reports through its [`ToolContext`](crate::ToolContext)
//! (`ctx.progress(..)`, `ctx.partial(..)`); where the reports go is a port,
//! [`LiveSink`], that the caller plugs into the context: the agent loop turns
//! them into `AgentEvent::ToolProgress` / `ToolPartial`, the MCP server into
//! `notifications/progress`. Nothing reported reaches the model: only the
//! final result does.
//!
//! Reporting never blocks the tool and never fails its call: a sink must
//! return at once. Progress is advisory, so a sink may coalesce it (keep the
//! latest per call) when its reader is slow; partial results are part of
//! what the user is shown, so a sink keeps every one, in order.
//!
//! A question ([`ElicitationRequest`]) is the one report that waits for
//! something back: the sink hands it, with an [`ElicitationReply`], to
//! whoever can put it to a person (the agent loop emits
//! `AgentEvent::Elicitation`). A sink that cannot ask anyone drops the
//! reply, and the call reads [`ElicitationAnswer::Cancel`] at once: a
//! question never hangs a call for want of a reader.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tokio::sync::oneshot;

/// One progress report of a call: `done` of `total` (when known), with a
/// message for people.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressUpdate {
    /// How far the call is, in the tool's own unit.
    pub done: f64,
    /// Where `done` ends, when the tool knows.
    pub total: Option<f64>,
    /// What it is doing, for people.
    pub message: Option<String>,
}

/// Where a call's live reports go. Implementations must return at once:
/// the tool calls them from its own code, in the middle of its work.
pub trait LiveSink: Send + Sync {
    /// A progress report of the call `tool_call_id`. May be coalesced or
    /// dropped when the reader is slow.
    fn progress(&self, tool_call_id: &str, update: ProgressUpdate);

    /// A partial result of the call `tool_call_id`, already serialized.
    /// Kept, in order, whatever the reader's pace.
    fn partial(&self, tool_call_id: &str, value: Value);

    /// A question the call `tool_call_id` puts to a person; the answer goes
    /// to `reply`. The default has nobody to ask: it drops `reply`, which
    /// answers [`ElicitationAnswer::Cancel`].
    fn elicit(&self, tool_call_id: &str, request: ElicitationRequest, reply: ElicitationReply) {
        let _ = (tool_call_id, request, reply);
    }
}

/// A form (or a page to visit) that a running call asks a person to fill
/// in: what MCP calls an elicitation. A remote MCP server's request arrives
/// as one; a local tool asks with
/// [`ToolContext::elicit`](crate::ToolContext::elicit).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ElicitationRequest {
    /// Who asks: the MCP server's label, or the tool's name.
    pub asked_by: String,
    /// What to tell the person.
    pub message: String,
    /// The JSON Schema of the answer (a flat object), or `None` for a URL
    /// elicitation (the person is sent to `url`).
    pub schema: Option<Value>,
    /// The page a URL elicitation sends the person to.
    pub url: Option<String>,
}

impl ElicitationRequest {
    /// A form: `message`, answered by an object matching `schema`.
    pub fn form(asked_by: impl Into<String>, message: impl Into<String>, schema: Value) -> Self {
        ElicitationRequest {
            asked_by: asked_by.into(),
            message: message.into(),
            schema: Some(schema),
            url: None,
        }
    }

    /// A page the person must visit (a sign-in, a payment), then accept.
    pub fn url(
        asked_by: impl Into<String>,
        message: impl Into<String>,
        url: impl Into<String>,
    ) -> Self {
        ElicitationRequest {
            asked_by: asked_by.into(),
            message: message.into(),
            schema: None,
            url: Some(url.into()),
        }
    }
}

/// What the person answered.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationAnswer {
    /// The answer: an object matching the schema (an empty object for a
    /// URL elicitation).
    Accept(Value),
    /// The person said no.
    Decline,
    /// The person dismissed the form, or nobody was there to ask.
    Cancel,
}

/// Where the answer to one [`ElicitationRequest`] goes. Clones share the
/// one answer: the first [`ElicitationReply::answer`] counts. When every
/// clone is dropped unanswered, the asking call reads
/// [`ElicitationAnswer::Cancel`].
#[derive(Clone)]
pub struct ElicitationReply {
    slot: Arc<Mutex<Option<oneshot::Sender<ElicitationAnswer>>>>,
}

impl ElicitationReply {
    /// A reply and the receiver its answer arrives on.
    pub(crate) fn channel() -> (ElicitationReply, oneshot::Receiver<ElicitationAnswer>) {
        let (sender, receiver) = oneshot::channel();
        (
            ElicitationReply {
                slot: Arc::new(Mutex::new(Some(sender))),
            },
            receiver,
        )
    }

    /// Answers the question. False when it was answered already or the
    /// call no longer waits (it finished, timed out or was cancelled).
    pub fn answer(&self, answer: ElicitationAnswer) -> bool {
        let sender = self
            .slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        sender.is_some_and(|sender| sender.send(answer).is_ok())
    }

    /// Whether an answer can still be given.
    pub fn is_open(&self) -> bool {
        self.slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|sender| !sender.is_closed())
    }
}

impl std::fmt::Debug for ElicitationReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElicitationReply")
            .field("open", &self.is_open())
            .finish()
    }
}
