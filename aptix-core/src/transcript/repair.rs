//! Keeping a transcript acceptable to every provider.
//!
//! Providers answer 400 when a tool call in the history has no result, has
//! two, or has one that is not directly after it. Those states happen in
//! practice (a crash between call and result, a client that answered twice,
//! a result for a call that was never made), so before every model request
//! the transcript is repaired deterministically instead of trusted.

use std::collections::HashMap;

use super::Message;
use crate::envelope::{Envelope, EnvelopeIds};
use crate::error::ErrorCode;

/// The message a call with no result gets.
pub const INTERRUPTED_MESSAGE: &str = "The call was interrupted before it produced a result. Call the tool again if it is still needed.";

/// Repairs `messages` in place so that every assistant tool call is followed,
/// before the next non-tool message, by exactly one result, in call order.
/// Returns how many changes were made (added, dropped or moved results).
pub fn repair(messages: &mut Vec<Message>, conversation_id: Option<&str>) -> usize {
    repair_counted(messages, conversation_id).0
}

/// [`repair`], also returning how many times it looked at a result (each
/// result is indexed once and taken at most once): the cost the tests bound.
///
/// Linear in the transcript: a turn's results are indexed by id once, and
/// each call takes its result from that index, instead of searching the
/// remaining results for every call.
fn repair_counted(messages: &mut Vec<Message>, conversation_id: Option<&str>) -> (usize, usize) {
    let mut looked = 0usize;
    let mut repaired = Vec::with_capacity(messages.len());
    let mut changes = 0;
    let mut input = std::mem::take(messages).into_iter().peekable();
    while let Some(message) = input.next() {
        match message {
            Message::Assistant {
                content,
                tool_calls,
                thinking,
                server_blocks,
                runnable,
            } => {
                let mut results: Vec<Option<Message>> = Vec::new();
                while let Some(Message::Tool { .. }) = input.peek() {
                    results.push(input.next());
                }
                // Id → positions of its results, in arrival order.
                let mut by_id: HashMap<String, Vec<usize>> = HashMap::with_capacity(results.len());
                for (position, result) in results.iter().enumerate() {
                    looked += 1;
                    if let Some(Message::Tool { tool_call_id, .. }) = result {
                        by_id
                            .entry(tool_call_id.clone())
                            .or_default()
                            .push(position);
                    }
                }
                // The first result not yet taken: a call whose result is
                // anywhere else had its result moved.
                let mut next = 0usize;
                let mut taken = vec![false; results.len()];
                let calls: Vec<(String, String)> = tool_calls
                    .iter()
                    .map(|call| (call.id.clone(), call.name.clone()))
                    .collect();
                repaired.push(Message::Assistant {
                    content,
                    tool_calls,
                    thinking,
                    server_blocks,
                    runnable,
                });
                for (id, name) in &calls {
                    while next < taken.len() && taken[next] {
                        next += 1;
                    }
                    // The first result with this id answers the call; later
                    // ones with the same id are duplicates.
                    let found = by_id.remove(id.as_str());
                    match found
                        .as_ref()
                        .and_then(|positions| positions.first().copied())
                    {
                        Some(position) => {
                            looked += 1;
                            if position != next {
                                changes += 1;
                            }
                            for &duplicate in found.iter().flatten() {
                                taken[duplicate] = true;
                            }
                            changes += found.map_or(0, |positions| positions.len() - 1);
                            if let Some(result) = results[position].take() {
                                repaired.push(result);
                            }
                        }
                        None => {
                            changes += 1;
                            repaired.push(interrupted(id, name, conversation_id));
                        }
                    }
                }
                // Whatever is left answers no call of this turn.
                changes += taken.iter().filter(|taken| !**taken).count();
            }
            // A result with no call right before it answers nothing.
            Message::Tool { .. } => changes += 1,
            other => repaired.push(other),
        }
    }
    *messages = repaired;
    (changes, looked)
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
        attachments: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::AssistantToolCall;

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
            attachments: Vec::new(),
        }
    }

    fn assistant(ids: &[&str]) -> Message {
        Message::assistant(String::new(), ids.iter().map(|id| call(id)).collect())
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
            Message::assistant("done", vec![]),
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

    /// One turn of `n` calls with its results in reverse order: each result
    /// must be found among all the others.
    fn big_turn(n: usize) -> Vec<Message> {
        let ids: Vec<String> = (0..n).map(|i| format!("call_{i}")).collect();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let mut messages = vec![Message::user("go"), assistant(&refs)];
        messages.extend(ids.iter().rev().map(|id| result(id, "ok")));
        messages.push(Message::user("next"));
        messages
    }

    #[test]
    fn repair_looks_at_each_result_a_bounded_number_of_times() {
        for n in [10_000, 40_000] {
            let mut messages = big_turn(n);
            let (changes, looked) = repair_counted(&mut messages, None);
            assert!(looked <= 4 * n, "{looked} looks for {n} results");
            assert_eq!(changes, n - 1, "every result but the last one moved");
            let order: Vec<String> = ids_of(&messages[2..n + 2]);
            assert!(
                order
                    .iter()
                    .enumerate()
                    .all(|(i, id)| *id == format!("call_{i}"))
            );
            let (changes, looked) = repair_counted(&mut messages, None);
            assert_eq!(changes, 0);
            assert!(looked <= 4 * n, "{looked} looks for {n} results in order");
        }
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
