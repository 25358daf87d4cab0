//! Where each call of a conversation's latest turn stands
//! ([`DurableAgent::calls`]), for a user interface that shows what is in
//! flight: read from the ledger and the stored transcript, so every
//! process sharing the store sees the same.

use std::collections::HashMap;

use serde_json::Value;

use super::resolve::Resolution;
use super::{DurableAgent, DurableError};
use crate::agent::requested;
use crate::meta::ExecutorKind;
use crate::store::{CallRecord, CallState, ConversationStatus, Step};
use crate::transcript::Message;

/// Where a call stands. More states may come: match with a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallProgress {
    /// Its tool runs here (recorded as executing), or the run holding the
    /// conversation is about to run it.
    Running,
    /// It waits for an approval, a client or a person (the step says
    /// which); [`DurableAgent::pending`] has what they need to act.
    Awaiting(Step),
    /// It has its result, or a resolution that lets it go on (an approval
    /// the resumed run has yet to act on).
    Resolved,
    /// It failed: its tool returned an error, its wait expired or was
    /// denied, or a crash interrupted it.
    Errored,
}

/// One call of a conversation's latest turn and where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallStatus {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name (as recorded: a hook may have renamed the call).
    pub tool: String,
    /// Who produces its result, as this agent's catalog declares the
    /// tool; `None` for a tool the catalog does not have.
    pub executor: Option<ExecutorKind>,
    /// Where it stands.
    pub progress: CallProgress,
}

impl DurableAgent {
    /// The calls of the latest turn of `conversation_id` that made calls,
    /// in the model's order, with where each stands: what a user interface
    /// shows as in flight (running and awaiting) or done. Empty for an
    /// unknown conversation or one whose model made no call yet.
    ///
    /// Read from the store at once, not kept up to date: read it again
    /// on the events of [`DurableAgent::watch`] or on a timer. A call the
    /// run holding the conversation has not reached yet is `Running`; in a
    /// conversation nobody runs, a call that was neither recorded nor
    /// answered (a crash before it started) is left out until a revival
    /// runs it.
    pub async fn calls(&self, conversation_id: &str) -> Result<Vec<CallStatus>, DurableError> {
        let store = &self.inner.store;
        let Some(stored) = store.load_conversation(conversation_id).await? else {
            return Ok(Vec::new());
        };
        let messages = &stored.conversation.messages;
        let Some((turn, calls)) = messages
            .iter()
            .enumerate()
            .rev()
            .find_map(|(index, message)| match message {
                Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
                    Some((index, tool_calls))
                }
                _ => None,
            })
        else {
            return Ok(Vec::new());
        };
        let records = store.calls(conversation_id).await?;
        let running = stored.status == ConversationStatus::Running;
        // Looked up by id, not scanned per call: a turn may hold many
        // thousands of calls (the turn limits allow one per 64 bytes), and
        // a user interface reads this often.
        let mut rows_of: HashMap<&str, Vec<&CallRecord>> = HashMap::new();
        for record in &records {
            rows_of
                .entry(record.tool_call_id.as_str())
                .or_default()
                .push(record);
        }
        let mut answers: HashMap<&str, bool> = HashMap::new();
        for message in &messages[turn + 1..] {
            if let Message::Tool {
                tool_call_id,
                is_error,
                ..
            } = message
            {
                // The first answer of an id counts.
                answers.entry(tool_call_id.as_str()).or_insert(*is_error);
            }
        }
        let mut statuses = Vec::with_capacity(calls.len());
        for call in calls {
            let made = requested(&call.name, &call.arguments);
            let rows: Vec<&CallRecord> = rows_of
                .get(call.id.as_str())
                .into_iter()
                .flatten()
                .copied()
                .filter(|record| {
                    record
                        .requested
                        .as_deref()
                        .map_or(record.tool == call.name, |named| named == made)
                })
                .collect();
            let answer = answers.get(call.id.as_str()).copied();
            let Some(progress) = progress_of(&rows, answer, running) else {
                continue;
            };
            let tool = rows
                .first()
                .map_or_else(|| call.name.clone(), |record| record.tool.clone());
            statuses.push(CallStatus {
                executor: self.executor_of(&tool),
                tool_call_id: call.id.clone(),
                tool,
                progress,
            });
        }
        Ok(statuses)
    }
}

/// Where a call stands from its ledger rows, the error flag of its result
/// in the stored transcript (if it has one), and whether a run holds the
/// conversation. `None`: nothing says (left out).
fn progress_of(rows: &[&CallRecord], answer: Option<bool>, running: bool) -> Option<CallProgress> {
    // What is open decides: a wait, then an execution.
    if let Some(wait) = rows.iter().find(|row| row.state == CallState::Pending) {
        return Some(CallProgress::Awaiting(wait.step));
    }
    if rows.iter().any(|row| row.state == CallState::Executing) {
        return Some(CallProgress::Running);
    }
    // Then the result the model reads, once the run stored it.
    if let Some(is_error) = answer {
        return Some(if is_error {
            CallProgress::Errored
        } else {
            CallProgress::Resolved
        });
    }
    // Then the closed rows, their result not stored yet.
    if rows.is_empty() {
        return running.then_some(CallProgress::Running);
    }
    let failed = rows.iter().any(|row| match row.state {
        CallState::Expired | CallState::Cancelled => true,
        CallState::Done => row.outcome.as_deref().is_some_and(envelope_failed),
        CallState::Resolved => row.outcome.as_deref().is_some_and(|outcome| {
            matches!(Resolution::decode(outcome), Ok(Resolution::Deny { .. }))
        }),
        CallState::Pending | CallState::Executing => false,
    });
    Some(if failed {
        CallProgress::Errored
    } else {
        CallProgress::Resolved
    })
}

/// Whether a stored result envelope reports a failure (`"ok": false`).
fn envelope_failed(envelope: &str) -> bool {
    serde_json::from_str::<Value>(envelope)
        .is_ok_and(|envelope| envelope.get("ok") == Some(&Value::Bool(false)))
}
