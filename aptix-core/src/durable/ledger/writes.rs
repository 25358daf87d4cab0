//! The ledger's store writes that must not be lost to a passing store
//! error: an insert whose acknowledgement may be lost (the row, read back,
//! decides), and transitions retried with backoff, in the background once
//! the call's result has been handed on.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::durable::checkpoint::{Carried, Checkpoint};
use crate::durable::lease::now_ms;
use crate::store::{CallRecord, CallState, Step, Store, StoreError};

/// How long to wait after each failed attempt to close an execution row,
/// before the result is handed on and the closing goes to the background.
pub(super) const CLOSE_RETRIES: [Duration; 3] = [
    Duration::from_millis(20),
    Duration::from_millis(100),
    Duration::from_millis(400),
];

/// Keeps trying to close an execution row whose call is answered (its tool
/// ran, or was stopped from outside its task), so that a store that
/// recovers ends up holding the result.
pub(crate) fn close_in_background(
    store: Arc<dyn Store>,
    conversation_id: String,
    tool_call_id: String,
    envelope: Option<String>,
) {
    tokio::spawn(async move {
        let closed = retry_transition(
            &store,
            &conversation_id,
            &tool_call_id,
            Step::Execution,
            (CallState::Executing, CallState::Done),
            envelope.as_deref(),
        )
        .await;
        if !closed {
            tracing::error!(%conversation_id, %tool_call_id, "gave up closing the ledger row of a call that ran; it stays `executing`");
        }
    });
}

/// Moves a row from one state to another, retrying store errors with
/// backoff (1 s doubling up to a minute, 12 attempts). Returns whether
/// the store answered (the row moved, or was not in `from`).
async fn retry_transition(
    store: &Arc<dyn Store>,
    conversation_id: &str,
    tool_call_id: &str,
    step: Step,
    (from, to): (CallState, CallState),
    outcome: Option<&str>,
) -> bool {
    let mut delay = Duration::from_secs(1);
    for _ in 0..12 {
        tokio::time::sleep(delay).await;
        match store
            .transition(
                conversation_id,
                tool_call_id,
                step,
                from,
                to,
                outcome,
                now_ms(),
            )
            .await
        {
            Ok(_) => return true,
            Err(error) => {
                tracing::warn!(%error, %conversation_id, %tool_call_id, %step, "still cannot update a ledger row");
            }
        }
        delay = (delay * 2).min(Duration::from_secs(60));
    }
    false
}

/// Inserts a ledger row, telling a lost acknowledgement from a failure: a
/// store error may come after the row was written, and then the row, read
/// back, decides. `Ok(true)`: the row is in the store; `Ok(false)`: another
/// call's row holds the id and step; `Err`: it was not recorded. When even
/// the read back fails, the row (if it was written after all) is withdrawn,
/// at once or, while the store keeps failing, in the background: the call
/// is reported as not run, so nothing may wait or run for it.
///
/// With a `checkpoint`, its parked transcript is saved in the same batch.
pub(super) async fn insert_or_confirm(
    store: &Arc<dyn Store>,
    record: &CallRecord,
    checkpoint: Option<&Checkpoint>,
) -> Result<bool, StoreError> {
    let carried = match checkpoint {
        Some(checkpoint) => checkpoint.insert_with(record).await,
        None => None,
    };
    let inserted = match carried {
        Some(carried) => carried.map(|carried| matches!(carried, Carried::Inserted)),
        None => store.insert_call(record).await,
    };
    let error = match inserted {
        Ok(inserted) => return Ok(inserted),
        Err(error) => error,
    };
    let confirmed = confirm_insert(store, record, error).await;
    if let (Err(error), Some(checkpoint)) = (&confirmed, checkpoint) {
        checkpoint.failed(error);
    }
    confirmed
}

/// After an insert answered `error`: whether the row was written after all.
async fn confirm_insert(
    store: &Arc<dyn Store>,
    record: &CallRecord,
    error: StoreError,
) -> Result<bool, StoreError> {
    if let StoreError::LostLease { .. } = error {
        // Refused, not lost on the way: the conversation was taken over,
        // and nothing of this run may go on.
        return Err(error);
    }
    let conversation_id = &record.conversation_id;
    let tool_call_id = &record.tool_call_id;
    match store.call(conversation_id, tool_call_id, record.step).await {
        Ok(Some(found))
            if found.tool == record.tool
                && found.created_at == record.created_at
                && same_arguments(&found.arguments, &record.arguments) =>
        {
            tracing::warn!(%error, %conversation_id, %tool_call_id, step = %record.step, "the store reported an error, but the ledger row was written; going on with it");
            Ok(true)
        }
        Ok(Some(_)) => Ok(false),
        Ok(None) => Err(error),
        Err(read_error) => {
            // Withdrawn at once when the store answers: until then a row
            // written after all would be listed as pending, resolvable, for
            // a call the model is told did not run.
            let withdrawn = store
                .transition(
                    conversation_id,
                    tool_call_id,
                    record.step,
                    record.state,
                    CallState::Cancelled,
                    None,
                    now_ms(),
                )
                .await;
            if withdrawn.is_ok() {
                tracing::warn!(%error, %read_error, %conversation_id, %tool_call_id, step = %record.step, "cannot tell whether the ledger row was written; withdrew it");
                return Err(error);
            }
            tracing::warn!(%error, %read_error, %conversation_id, %tool_call_id, step = %record.step, "cannot tell whether the ledger row was written; withdrawing it in the background");
            let store = store.clone();
            let record = record.clone();
            tokio::spawn(async move {
                let answered = retry_transition(
                    &store,
                    &record.conversation_id,
                    &record.tool_call_id,
                    record.step,
                    (record.state, CallState::Cancelled),
                    None,
                )
                .await;
                if !answered {
                    tracing::error!(conversation_id = %record.conversation_id, tool_call_id = %record.tool_call_id, step = %record.step, "gave up withdrawing a ledger row that may have been written for a call reported as not run");
                }
            });
            Err(error)
        }
    }
}

/// Whether two argument texts are the same arguments: equal as JSON (key
/// order and spacing aside), or equal as text when either is not JSON.
pub(super) fn same_arguments(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (
        serde_json::from_str::<Value>(a),
        serde_json::from_str::<Value>(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
