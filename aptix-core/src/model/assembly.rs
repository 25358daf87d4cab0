//! The one place where streamed tool-call deltas become tool calls.
//!
//! Every adapter feeds its events through a [`TurnAssembler`], which lives
//! for one model call and is dropped after it (the Tool Use seed's
//! ADAPTER_ASSEMBLES_TOOLCALLS). Arguments are only ever read once the turn
//! has finished: a buffer that happens to parse halfway through a stream is
//! still partial, so nothing here parses JSON at all.

use std::collections::HashMap;

use super::{FinishReason, ModelError, ModelEvent, ToolCallDelta, Usage};

/// Whether a call can be executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStatus {
    /// The model finished writing it.
    Complete,
    /// The model hit its token limit while writing it: never execute.
    Truncated,
    /// The model never named the tool: nothing to execute.
    Unnamed,
}

/// One tool call of a finished turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssembledCall {
    /// The model's id, or a UUID assigned here when the model gave none.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The complete arguments text, unparsed.
    pub arguments: String,
    /// Whether it may be executed.
    pub status: CallStatus,
}

/// A finished model turn.
#[derive(Debug, Clone, PartialEq)]
pub struct AssembledTurn {
    /// The answer text.
    pub text: String,
    /// The tool calls, in the model's order.
    pub tool_calls: Vec<AssembledCall>,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// Tokens used, when reported.
    pub usage: Option<Usage>,
}

#[derive(Debug)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Accumulates one model call's events into an [`AssembledTurn`].
#[derive(Debug, Default)]
pub struct TurnAssembler {
    text: String,
    calls: Vec<PartialCall>,
    /// Stream index → position in `calls` of the call open at that index.
    open: HashMap<usize, usize>,
    finish: Option<(FinishReason, Option<Usage>)>,
}

impl TurnAssembler {
    /// A fresh assembler for one model call.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next event of the stream.
    pub fn push(&mut self, event: ModelEvent) -> Result<(), ModelError> {
        if self.finish.is_some() {
            return Err(ModelError::Protocol(
                "an event arrived after the turn finished".into(),
            ));
        }
        match event {
            ModelEvent::TextDelta(text) => self.text.push_str(&text),
            ModelEvent::ToolCallDelta(delta) => self.push_call(delta),
            ModelEvent::Finish { reason, usage } => self.finish = Some((reason, usage)),
        }
        Ok(())
    }

    fn push_call(&mut self, delta: ToolCallDelta) {
        // Some OpenAI-compatible servers number every call 0; a new id at
        // an index in use therefore opens a new call rather than merging two.
        let position = match self.open.get(&delta.index) {
            Some(&position) if !matches!((&delta.id, &self.calls[position].id), (Some(new), Some(old)) if new != old) => {
                position
            }
            _ => {
                self.calls.push(PartialCall {
                    id: None,
                    name: String::new(),
                    arguments: String::new(),
                });
                let position = self.calls.len() - 1;
                self.open.insert(delta.index, position);
                position
            }
        };
        let call = &mut self.calls[position];
        if call.id.is_none() {
            call.id = delta.id.filter(|id| !id.is_empty());
        }
        if let Some(name) = delta.name.filter(|name| !name.is_empty()) {
            // Servers either send the name once, repeat it whole, or send it
            // in pieces; only the last case adds to it.
            if call.name != name {
                call.name.push_str(&name);
            }
        }
        call.arguments.push_str(&delta.arguments);
    }

    /// The finished turn, or [`ModelError::Incomplete`] if the stream ended
    /// without the model finishing.
    pub fn finish(self) -> Result<AssembledTurn, ModelError> {
        let Some((finish_reason, usage)) = self.finish else {
            return Err(ModelError::Incomplete);
        };
        let last = self.calls.len().checked_sub(1);
        let truncated = finish_reason == FinishReason::Length;
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(position, call)| {
                let status = if truncated && Some(position) == last {
                    CallStatus::Truncated
                } else if call.name.is_empty() {
                    CallStatus::Unnamed
                } else {
                    CallStatus::Complete
                };
                AssembledCall {
                    id: call
                        .id
                        .unwrap_or_else(|| format!("call_{}", uuid::Uuid::new_v4().simple())),
                    name: call.name,
                    arguments: call.arguments,
                    status,
                }
            })
            .collect();
        Ok(AssembledTurn {
            text: self.text,
            tool_calls,
            finish_reason,
            usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(index: usize, id: Option<&str>, name: Option<&str>, arguments: &str) -> ModelEvent {
        ModelEvent::ToolCallDelta(ToolCallDelta {
            index,
            id: id.map(str::to_owned),
            name: name.map(str::to_owned),
            arguments: arguments.to_owned(),
        })
    }

    fn finish(reason: FinishReason) -> ModelEvent {
        ModelEvent::Finish {
            reason,
            usage: None,
        }
    }

    fn assemble(events: Vec<ModelEvent>) -> Result<AssembledTurn, ModelError> {
        let mut assembler = TurnAssembler::new();
        for event in events {
            assembler.push(event)?;
        }
        assembler.finish()
    }

    #[test]
    fn parallel_calls_interleaved_by_index() -> Result<(), ModelError> {
        let turn = assemble(vec![
            ModelEvent::TextDelta("Let me check. ".into()),
            delta(0, Some("a"), Some("agent_hello_world"), "{\"na"),
            delta(1, Some("b"), Some("get_current_time"), ""),
            delta(0, None, None, "me\":\"Ada\"}"),
            delta(1, None, None, "{}"),
            finish(FinishReason::ToolCalls),
        ])?;
        assert_eq!(turn.text, "Let me check. ");
        let calls: Vec<(&str, &str, &str, CallStatus)> = turn
            .tool_calls
            .iter()
            .map(|c| {
                (
                    c.id.as_str(),
                    c.name.as_str(),
                    c.arguments.as_str(),
                    c.status,
                )
            })
            .collect();
        assert_eq!(
            calls,
            vec![
                (
                    "a",
                    "agent_hello_world",
                    "{\"name\":\"Ada\"}",
                    CallStatus::Complete
                ),
                ("b", "get_current_time", "{}", CallStatus::Complete),
            ]
        );
        Ok(())
    }

    #[test]
    fn a_new_id_at_a_used_index_is_a_new_call() -> Result<(), ModelError> {
        let turn = assemble(vec![
            delta(0, Some("a"), Some("x"), "{}"),
            delta(0, Some("b"), Some("y"), "{}"),
            finish(FinishReason::ToolCalls),
        ])?;
        assert_eq!(turn.tool_calls.len(), 2);
        assert_eq!(turn.tool_calls[1].name, "y");
        Ok(())
    }

    #[test]
    fn a_repeated_name_is_not_doubled_and_a_fragmented_one_is_joined() -> Result<(), ModelError> {
        let turn = assemble(vec![
            delta(0, Some("a"), Some("get_"), ""),
            delta(0, None, Some("time"), "{}"),
            delta(1, Some("b"), Some("hello"), ""),
            delta(1, None, Some("hello"), "{}"),
            finish(FinishReason::ToolCalls),
        ])?;
        assert_eq!(turn.tool_calls[0].name, "get_time");
        assert_eq!(turn.tool_calls[1].name, "hello");
        Ok(())
    }

    #[test]
    fn length_truncates_only_the_open_call() -> Result<(), ModelError> {
        let turn = assemble(vec![
            delta(0, Some("a"), Some("x"), "{}"),
            delta(1, Some("b"), Some("y"), "{\"text\":\"abc"),
            finish(FinishReason::Length),
        ])?;
        assert_eq!(turn.tool_calls[0].status, CallStatus::Complete);
        assert_eq!(turn.tool_calls[1].status, CallStatus::Truncated);
        Ok(())
    }

    #[test]
    fn a_buffer_that_parses_early_is_still_read_whole() -> Result<(), ModelError> {
        // `{"n":1}` parses after the second delta; the third changes nothing
        // for a JSON parser that stops early, but here it is kept.
        let turn = assemble(vec![
            delta(0, Some("a"), Some("x"), "{\"n\":1"),
            delta(0, None, None, "}"),
            delta(0, None, None, "  "),
            finish(FinishReason::ToolCalls),
        ])?;
        assert_eq!(turn.tool_calls[0].arguments, "{\"n\":1}  ");
        Ok(())
    }

    #[test]
    fn missing_ids_get_one_and_missing_names_are_flagged() -> Result<(), ModelError> {
        let turn = assemble(vec![
            delta(0, None, None, "{}"),
            finish(FinishReason::ToolCalls),
        ])?;
        assert!(turn.tool_calls[0].id.starts_with("call_"));
        assert_eq!(turn.tool_calls[0].status, CallStatus::Unnamed);
        Ok(())
    }

    #[test]
    fn a_stream_without_finish_is_incomplete() {
        let result = assemble(vec![delta(0, Some("a"), Some("x"), "{}")]);
        assert_eq!(result, Err(ModelError::Incomplete));
    }

    #[test]
    fn events_after_finish_are_a_protocol_error() {
        let result = assemble(vec![
            finish(FinishReason::Stop),
            ModelEvent::TextDelta("late".into()),
        ]);
        assert!(matches!(result, Err(ModelError::Protocol(_))));
    }
}
