//! What a running tool reports before its result: progress, and partial
//! results of its output type.
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

use serde_json::Value;

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
}
