//! What the model reads when the ledger does not run a call: its id is
//! taken, the approval on record was for other arguments, or a crash
//! interrupted it. Recording, settling and recovery all give these.

pub(super) fn id_taken_message(tool: &str) -> String {
    format!(
        "This call to `{tool}` was not run: another call in this conversation already has its tool_call_id. Call the tool again if it is still needed."
    )
}

pub(super) fn not_this_call_message(tool: &str) -> String {
    format!(
        "The call to `{tool}` was not run: the approval on record was given for other arguments than this call's."
    )
}

pub(super) fn interrupted_message(tool: &str) -> String {
    format!(
        "The call to `{tool}` was interrupted (the process running it stopped) and was not run again, because the tool is not declared idempotent. It may or may not have taken effect; check before calling it again."
    )
}
