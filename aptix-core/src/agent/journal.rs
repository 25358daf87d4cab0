//! What a durable run adds to the loop, without the loop knowing a store.
//!
//! A stateless run passes no journal: calls run straight through the
//! executor and nothing is saved. A durable run passes one that records
//! every call before it runs and saves the transcript at the points a crash
//! must be able to resume from; the loop calls it there and nowhere else.

use super::CallResult;
use crate::context::ToolContext;
use crate::executor::ToolCall;
use crate::meta::{AwaitReason, Gate};
use crate::transcript::Conversation;

/// The future a journal returns.
pub(crate) use crate::tool::BoxFuture as JournalFuture;

/// The journal of one run: where its calls and its transcript are kept.
pub(crate) trait Journal: Send + Sync + 'static {
    /// Keeps the transcript as it stands, the run still going: after the
    /// model's turn and after the turn's results. A journal may put the
    /// save off, but it must hold the turn before it records any of the
    /// turn's calls. An `Err` ends the run with `StoreFailed` (after
    /// results, the turn's results are dropped: the journal has those of
    /// calls that ran).
    fn checkpoint<'a>(
        &'a self,
        conversation: &'a Conversation,
    ) -> JournalFuture<'a, Result<(), String>>;

    /// Runs one call of the model's turn, recorded with `requested` (the
    /// call as the model made it, see [`super::requested`]), through
    /// `gate` (`Asked` when the approval policy asks for an approval the
    /// tool does not declare). An `Err` means it was not recorded and so did
    /// not run.
    fn execute<'a>(
        &'a self,
        call: &'a ToolCall,
        requested: &'a str,
        context: &'a ToolContext,
        gate: Gate,
    ) -> JournalFuture<'a, Result<CallResult, String>>;

    /// A call the loop stopped from outside its task (its tool blocked its
    /// thread past the time limit): its record is closed with `envelope`,
    /// the result the model gets, since the aborted task never will.
    fn abandoned(&self, conversation_id: &str, tool_call_id: &str, envelope: String);

    /// A call that waited when a hook halted the run: its wait is closed,
    /// so that nobody can answer it any more. An `Err` means the store
    /// could not close it (the run then ends with `StoreFailed`).
    fn withdraw<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        reason: AwaitReason,
    ) -> JournalFuture<'a, Result<(), String>>;
}
