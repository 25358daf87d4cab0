//! Keeping a transcript acceptable to every provider.
//!
//! Providers answer 400 when a tool call in the history has no result, has
//! two, or has one that is not directly after it. Those states happen in
//! practice (a crash between call and result, a client that answered twice,
//! a result for a call that was never made), so before every model request
//! the transcript is repaired deterministically instead of trusted.

use crate::envelope::{Envelope, EnvelopeIds};
use crate::error::ErrorCode;
use crate::model::Message;

/// The message a call with no result gets.
pub const INTERRUPTED_MESSAGE: &str = "The call was interrupted before it produced a result. Call the tool again if it is still needed.";

/// Repairs `messages` in place so that every assistant tool call is followed,
/// before the next non-tool message, by exactly one result, in call order.
/// Returns how many changes were made (added, dropped or moved results).
pub fn repair(messages: &mut Vec<Message>, conversation_id: Option<&str>) -> usize {
    let mut repaired = Vec::with_capacity(messages.len());
    let mut changes = 0;
    let mut input = std::mem::take(messages).into_iter().peekable();
    while let Some(message) = input.next() {
        match message {
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut results: Vec<Message> = Vec::new();
                while let Some(Message::Tool { .. }) = input.peek() {
                    if let Some(result) = input.next() {
                        results.push(result);
                    }
                }
                let calls = tool_calls.clone();
                repaired.push(Message::Assistant {
                    content,
                    tool_calls,
                });
                for call in &calls {
                    let found = results.iter().position(
                        |result| matches!(result, Message::Tool { tool_call_id, .. } if *tool_call_id == call.id),
                    );
                    match found {
                        Some(position) => {
                            if position != 0 {
                                changes += 1;
                            }
                            repaired.push(results.remove(position));
                            // Later results with the same id are duplicates.
                            let before = results.len();
                            results.retain(
                                |result| !matches!(result, Message::Tool { tool_call_id, .. } if *tool_call_id == call.id),
                            );
                            changes += before - results.len();
                        }
                        None => {
                            changes += 1;
                            repaired.push(interrupted(&call.id, &call.name, conversation_id));
                        }
                    }
                }
                // Whatever is left answers no call of this turn.
                changes += results.len();
            }
            // A result with no call right before it answers nothing.
            Message::Tool { .. } => changes += 1,
            other => repaired.push(other),
        }
    }
    *messages = repaired;
    changes
}

/// The error result of a call that never finished.
pub fn interrupted(tool_call_id: &str, name: &str, conversation_id: Option<&str>) -> Message {
    let envelope = Envelope::error(
        EnvelopeIds {
            tool_call_id: tool_call_id.into(),
            conversation_id: conversation_id.map(Into::into),
            session_id: None,
        },
        ErrorCode::Cancelled,
        INTERRUPTED_MESSAGE,
    );
    Message::Tool {
        tool_call_id: tool_call_id.to_owned(),
        name: name.to_owned(),
        content: envelope.to_json_string(),
        is_error: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AssistantToolCall;

    fn call(id: &str) -> AssistantToolCall {
        AssistantToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{}".into(),
        }
    }

    fn result(id: &str, content: &str) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            name: "t".into(),
            content: content.into(),
            is_error: false,
        }
    }

    fn assistant(ids: &[&str]) -> Message {
        Message::Assistant {
            content: String::new(),
            tool_calls: ids.iter().map(|id| call(id)).collect(),
        }
    }

    fn ids_of(messages: &[Message]) -> Vec<String> {
        messages
            .iter()
            .map(|m| match m {
                Message::Tool {
                    tool_call_id,
                    content,
                    ..
                } => {
                    if content.contains("interrupted") {
                        format!("{tool_call_id}!")
                    } else {
                        tool_call_id.clone()
                    }
                }
                Message::Assistant { .. } => "A".into(),
                Message::User { .. } => "U".into(),
                Message::System { .. } => "S".into(),
            })
            .collect()
    }

    #[test]
    fn a_complete_transcript_is_untouched() {
        let mut messages = vec![
            Message::user("hi"),
            assistant(&["a", "b"]),
            result("a", "1"),
            result("b", "2"),
            Message::Assistant {
                content: "done".into(),
                tool_calls: vec![],
            },
        ];
        let before = messages.clone();
        assert_eq!(repair(&mut messages, None), 0);
        assert_eq!(messages, before);
    }

    #[test]
    fn missing_results_are_filled_in_order() {
        let mut messages = vec![
            assistant(&["a", "b", "c"]),
            result("b", "2"),
            Message::user("next"),
        ];
        assert_eq!(repair(&mut messages, Some("conv")), 2);
        assert_eq!(ids_of(&messages), ["A", "a!", "b", "c!", "U"]);
    }

    #[test]
    fn out_of_order_results_are_sorted_and_duplicates_dropped() {
        let mut messages = vec![
            assistant(&["a", "b"]),
            result("b", "2"),
            result("a", "1"),
            result("b", "again"),
        ];
        let changes = repair(&mut messages, None);
        assert_eq!(ids_of(&messages), ["A", "a", "b"]);
        assert_eq!(changes, 2);
        assert!(matches!(&messages[2], Message::Tool { content, .. } if content == "2"));
    }

    #[test]
    fn orphan_results_are_dropped() {
        let mut messages = vec![
            Message::user("hi"),
            result("x", "1"),
            assistant(&["a"]),
            result("a", "1"),
            result("zz", "2"),
        ];
        assert_eq!(repair(&mut messages, None), 2);
        assert_eq!(ids_of(&messages), ["U", "A", "a"]);
    }

    #[test]
    fn repair_is_idempotent() {
        let mut messages = vec![assistant(&["a", "b"]), result("b", "2"), result("q", "?")];
        repair(&mut messages, None);
        let once = messages.clone();
        assert_eq!(repair(&mut messages, None), 0);
        assert_eq!(messages, once);
    }
}
