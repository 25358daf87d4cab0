//! What a run's events say, read the one way every test binary reads them.

use aptix::{AgentEvent, DoneReason};
use serde_json::Value;

/// The reason of the run's one `Done`, which must come last: every run
/// ends with exactly one.
pub(crate) fn done(events: &[AgentEvent]) -> &DoneReason {
    let dones: Vec<&DoneReason> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::Done { reason, .. } => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(dones.len(), 1, "exactly one Done: {events:?}");
    assert!(
        matches!(events.last(), Some(AgentEvent::Done { .. })),
        "Done comes last: {events:?}"
    );
    dones[0]
}

/// Each call's result among `events`, as `(tool call id, envelope)`, in
/// the order the results came.
pub(crate) fn results(events: &[AgentEvent]) -> Vec<(String, Value)> {
    events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallResult { id, envelope, .. } => Some((id.clone(), envelope.clone())),
            _ => None,
        })
        .collect()
}
