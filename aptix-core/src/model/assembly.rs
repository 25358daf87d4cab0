//! The one place where streamed tool-call deltas become tool calls.
//!
//! Every adapter feeds its events through a [`TurnAssembler`], which lives
//! for one model call and is dropped after it (the Tool Use seed's
//! ADAPTER_ASSEMBLES_TOOLCALLS). Arguments are only ever read once the turn
//! has finished: a buffer that happens to parse halfway through a stream is
//! still partial, so nothing here parses JSON at all.

use std::collections::HashMap;

use serde_json::Value;

use super::{
    FinishReason, ModelError, ModelEvent, ThinkingBlock, ThinkingDelta, ToolCallDelta, Usage,
};

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
    /// The thinking blocks, in the model's order, to be sent back as they
    /// came.
    pub thinking: Vec<ThinkingBlock>,
    /// The blocks the provider ran itself, in its order, to be sent back as
    /// they came ([`ModelEvent::ServerBlock`]).
    pub server_blocks: Vec<Value>,
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
    /// The id shown since the call was opened (the model's, or one made
    /// then, kept at `finish` so the events and the call agree), and the
    /// length of the name it was opened with.
    shown: Option<(String, usize)>,
}

/// What a delta added to the turn's calls, for whoever shows a call while
/// it streams.
#[derive(Debug, Clone, PartialEq)]
pub enum CallSeen {
    /// A call's arguments started, so its tool name is whole: the call is
    /// open.
    Opened {
        /// The call's place in the turn (ids may repeat; places do not).
        call: usize,
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// More of an open call's arguments text.
    Arguments {
        /// The call's place in the turn.
        call: usize,
        /// The call's id.
        id: String,
        /// The next piece.
        text: String,
    },
}

/// What each call counts against [`TurnLimits::turn_bytes`] besides its
/// text: its share of the bookkeeping, so that many tiny calls are bounded
/// as well as a few big ones. (A composed turn's calls count it too.)
const CALL_OVERHEAD: usize = 64;

/// Which limit a turn went past.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnLimitExceeded {
    /// [`TurnLimits::turn_bytes`].
    TurnBytes(usize),
    /// [`TurnLimits::argument_bytes`], by one call.
    ArgumentBytes {
        /// The limit.
        limit: usize,
        /// The call's tool name, as far as it was streamed.
        tool: String,
    },
}

impl std::fmt::Display for TurnLimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TurnLimitExceeded::TurnBytes(limit) => write!(
                f,
                "the model's turn went past {limit} bytes of text, thinking and tool calls (AgentBuilder::max_turn_bytes); the model call was ended"
            ),
            TurnLimitExceeded::ArgumentBytes { limit, tool } => write!(
                f,
                "the arguments of a call of `{tool}` went past {limit} bytes (AgentBuilder::max_call_argument_bytes); the model call was ended"
            ),
        }
    }
}

/// How much one model turn may hold. Checked as the events arrive, so a
/// stream that never finishes stops growing at the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnLimits {
    /// The most bytes kept for the turn: its text, its thinking blocks, and
    /// every call's id, name and arguments (each call and each thinking
    /// block also counts a fixed overhead).
    pub turn_bytes: usize,
    /// The most bytes of arguments of one call.
    pub argument_bytes: usize,
}

impl TurnLimits {
    /// Holds a turn that came whole rather than streamed (a composed
    /// answer, its calls read out of the text) to the limits the assembler
    /// keeps as a stream arrives: each call's arguments, and the turn, with
    /// each call counting its id, name, arguments and the same overhead.
    pub(crate) fn check_whole(
        &self,
        text: &str,
        calls: &[AssembledCall],
    ) -> Result<(), TurnLimitExceeded> {
        let mut held = text.len();
        for call in calls {
            if call.arguments.len() > self.argument_bytes {
                return Err(TurnLimitExceeded::ArgumentBytes {
                    limit: self.argument_bytes,
                    tool: call.name.clone(),
                });
            }
            held = held.saturating_add(
                CALL_OVERHEAD + call.id.len() + call.name.len() + call.arguments.len(),
            );
            if held > self.turn_bytes {
                return Err(TurnLimitExceeded::TurnBytes(self.turn_bytes));
            }
        }
        Ok(())
    }
}

impl Default for TurnLimits {
    fn default() -> Self {
        TurnLimits {
            turn_bytes: 8 * 1024 * 1024,
            argument_bytes: 1024 * 1024,
        }
    }
}

/// Accumulates one model call's events into an [`AssembledTurn`].
#[derive(Debug, Default)]
pub struct TurnAssembler {
    limits: TurnLimits,
    text: String,
    calls: Vec<PartialCall>,
    /// Stream index → position in `calls` of the call open at that index.
    open: HashMap<usize, usize>,
    thinking: Vec<ThinkingBlock>,
    /// Stream index → position in `thinking` of the block open at that index.
    open_thinking: HashMap<usize, usize>,
    server_blocks: Vec<Value>,
    finish: Option<(FinishReason, Option<Usage>)>,
    /// Bytes counted against [`TurnLimits::turn_bytes`] so far.
    held: usize,
    exceeded: Option<TurnLimitExceeded>,
}

impl TurnAssembler {
    /// A fresh assembler for one model call, with the default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh assembler for one model call, with `limits`.
    pub fn with_limits(limits: TurnLimits) -> Self {
        TurnAssembler {
            limits,
            ..Self::default()
        }
    }

    /// Takes the next event of the stream. An event that would take the
    /// turn past a limit is not kept: the error says which limit (also
    /// available from [`TurnAssembler::limit_exceeded`]) and the caller
    /// ends the model call.
    pub fn push(&mut self, event: ModelEvent) -> Result<(), ModelError> {
        self.push_seen(event, None)
    }

    /// [`push`](Self::push), and what the event added to the calls goes to
    /// `seen`: a call opened (its name known), or more of its arguments.
    pub fn push_seen(
        &mut self,
        event: ModelEvent,
        seen: Option<&mut Vec<CallSeen>>,
    ) -> Result<(), ModelError> {
        if let Some(exceeded) = &self.exceeded {
            return Err(ModelError::Protocol(exceeded.to_string()));
        }
        if self.finish.is_some() {
            return Err(ModelError::Protocol(
                "an event arrived after the turn finished".into(),
            ));
        }
        let result = match event {
            ModelEvent::TextDelta(text) => {
                self.count(text.len()).map(|()| self.text.push_str(&text))
            }
            ModelEvent::ToolCallDelta(delta) => self.push_call(delta, seen),
            ModelEvent::ThinkingDelta(delta) => self.push_thinking(delta),
            // Kept and sent back with every later request, like thinking.
            ModelEvent::ServerBlock(block) => self
                .count(CALL_OVERHEAD + block.to_string().len())
                .map(|()| self.server_blocks.push(block)),
            // Shown only; what goes back is in its `ServerBlock`s. Counted,
            // so a stream of them is bounded like any other.
            ModelEvent::Hosted(hosted) => self.count(CALL_OVERHEAD + hosted_bytes(&hosted)),
            ModelEvent::Finish { reason, usage } => {
                self.finish = Some((reason, usage));
                Ok(())
            }
        };
        result.map_err(|exceeded| {
            let error = ModelError::Protocol(exceeded.to_string());
            self.exceeded = Some(exceeded);
            error
        })
    }

    /// The limit the turn went past, if it did.
    pub fn limit_exceeded(&self) -> Option<&TurnLimitExceeded> {
        self.exceeded.as_ref()
    }

    /// Counts `bytes` more against the turn's limit.
    fn count(&mut self, bytes: usize) -> Result<(), TurnLimitExceeded> {
        let held = self.held.saturating_add(bytes);
        if held > self.limits.turn_bytes {
            return Err(TurnLimitExceeded::TurnBytes(self.limits.turn_bytes));
        }
        self.held = held;
        Ok(())
    }

    /// Thinking counts against [`TurnLimits::turn_bytes`] like text: it is
    /// kept in the transcript and sent back with every later request.
    fn push_thinking(&mut self, delta: ThinkingDelta) -> Result<(), TurnLimitExceeded> {
        let (index, piece, signature) = match delta {
            ThinkingDelta::Redacted { index, data } => {
                self.count(CALL_OVERHEAD + data.len())?;
                self.thinking.push(ThinkingBlock::RedactedThinking { data });
                self.open_thinking.insert(index, self.thinking.len() - 1);
                return Ok(());
            }
            ThinkingDelta::Block { index, block } => {
                self.count(CALL_OVERHEAD + block_bytes(&block))?;
                self.thinking.push(block);
                self.open_thinking.insert(index, self.thinking.len() - 1);
                return Ok(());
            }
            // Shown, not kept: its block comes whole later. Counted all the
            // same, so that an endless preview is bounded.
            ThinkingDelta::Preview { text } => return self.count(text.len()),
            ThinkingDelta::Reasoning { index, text } => {
                let open = self.open_thinking.get(&index).copied().filter(|&position| {
                    matches!(self.thinking[position], ThinkingBlock::Reasoning { .. })
                });
                let overhead = if open.is_some() { 0 } else { CALL_OVERHEAD };
                self.count(overhead + text.len())?;
                match open.map(|position| &mut self.thinking[position]) {
                    Some(ThinkingBlock::Reasoning { text: held }) => held.push_str(&text),
                    _ => {
                        self.thinking.push(ThinkingBlock::Reasoning { text });
                        self.open_thinking.insert(index, self.thinking.len() - 1);
                    }
                }
                return Ok(());
            }
            ThinkingDelta::Text { index, text } => (index, text, false),
            ThinkingDelta::Signature { index, signature } => (index, signature, true),
        };
        let open =
            self.open_thinking.get(&index).copied().filter(|&position| {
                matches!(self.thinking[position], ThinkingBlock::Thinking { .. })
            });
        let overhead = if open.is_some() { 0 } else { CALL_OVERHEAD };
        self.count(overhead + piece.len())?;
        let position = match open {
            Some(position) => position,
            None => {
                self.thinking.push(ThinkingBlock::Thinking {
                    thinking: String::new(),
                    signature: String::new(),
                });
                self.open_thinking.insert(index, self.thinking.len() - 1);
                self.thinking.len() - 1
            }
        };
        if let ThinkingBlock::Thinking {
            thinking,
            signature: signed,
        } = &mut self.thinking[position]
        {
            if signature {
                signed.push_str(&piece);
            } else {
                thinking.push_str(&piece);
            }
        }
        Ok(())
    }

    fn push_call(
        &mut self,
        delta: ToolCallDelta,
        seen: Option<&mut Vec<CallSeen>>,
    ) -> Result<(), TurnLimitExceeded> {
        // Some OpenAI-compatible servers number every call 0; a new id at
        // an index in use therefore opens a new call rather than merging two.
        let continued = self.open.get(&delta.index).copied().filter(|&position| {
            !matches!((&delta.id, &self.calls[position].id), (Some(new), Some(old)) if new != old)
        });
        let held_arguments = continued.map_or(0, |position| self.calls[position].arguments.len());
        if held_arguments.saturating_add(delta.arguments.len()) > self.limits.argument_bytes {
            let tool = match continued {
                Some(position) => self.calls[position].name.clone(),
                None => delta.name.unwrap_or_default(),
            };
            return Err(TurnLimitExceeded::ArgumentBytes {
                limit: self.limits.argument_bytes,
                tool,
            });
        }
        let overhead = if continued.is_some() {
            0
        } else {
            CALL_OVERHEAD
        };
        let id_bytes = delta.id.as_ref().map_or(0, String::len);
        let name_bytes = delta.name.as_ref().map_or(0, String::len);
        self.count(overhead + id_bytes + name_bytes + delta.arguments.len())?;
        let position = match continued {
            Some(position) => position,
            None => {
                self.calls.push(PartialCall {
                    id: None,
                    name: String::new(),
                    arguments: String::new(),
                    shown: None,
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
        // A call opens when its arguments start: providers send the name
        // first, and a name may come in pieces (`log` + `in`), so opening on
        // the first piece would judge the wrong tool's secrets. Should more
        // of the name come after that, nothing more is shown (fail closed).
        if let Some(seen) = seen
            && !call.name.is_empty()
            && !call.arguments.is_empty()
        {
            match &call.shown {
                None => {
                    let id = call
                        .id
                        .clone()
                        .unwrap_or_else(|| format!("call_{}", uuid::Uuid::new_v4().simple()));
                    call.shown = Some((id.clone(), call.name.len()));
                    seen.push(CallSeen::Opened {
                        call: position,
                        id: id.clone(),
                        name: call.name.clone(),
                    });
                    seen.push(CallSeen::Arguments {
                        call: position,
                        id,
                        text: call.arguments.clone(),
                    });
                }
                Some((id, named)) if *named == call.name.len() && !delta.arguments.is_empty() => {
                    seen.push(CallSeen::Arguments {
                        call: position,
                        id: id.clone(),
                        text: delta.arguments,
                    });
                }
                Some(_) => {}
            }
        }
        Ok(())
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
                        .or(call.shown.map(|(id, _)| id))
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
            thinking: self.thinking,
            server_blocks: self.server_blocks,
            finish_reason,
            usage,
        })
    }
}

/// What a whole block holds, for [`TurnLimits::turn_bytes`].
fn block_bytes(block: &ThinkingBlock) -> usize {
    match block {
        ThinkingBlock::Thinking {
            thinking,
            signature,
        } => thinking.len() + signature.len(),
        ThinkingBlock::RedactedThinking { data } => data.len(),
        ThinkingBlock::Reasoning { text } => text.len(),
        ThinkingBlock::OpenaiReasoning { item } => item.to_string().len(),
        ThinkingBlock::Gemini { part, tool_call_id } => {
            part.to_string().len() + tool_call_id.as_ref().map_or(0, String::len)
        }
    }
}

/// What a hosted tool's event holds, for [`TurnLimits::turn_bytes`].
fn hosted_bytes(hosted: &super::HostedToolEvent) -> usize {
    match hosted {
        super::HostedToolEvent::Called { id, name, input } => {
            id.len() + name.len() + input.to_string().len()
        }
        super::HostedToolEvent::Finished {
            id, name, output, ..
        } => id.len() + name.len() + output.to_string().len(),
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

    fn thinking(delta: ThinkingDelta) -> ModelEvent {
        ModelEvent::ThinkingDelta(delta)
    }

    #[test]
    fn thinking_blocks_are_joined_per_index_in_order() -> Result<(), ModelError> {
        let turn = assemble(vec![
            thinking(ThinkingDelta::Text {
                index: 0,
                text: String::new(),
            }),
            thinking(ThinkingDelta::Text {
                index: 0,
                text: "first ".into(),
            }),
            thinking(ThinkingDelta::Text {
                index: 0,
                text: "thought".into(),
            }),
            thinking(ThinkingDelta::Signature {
                index: 0,
                signature: "sig".into(),
            }),
            thinking(ThinkingDelta::Redacted {
                index: 1,
                data: "opaque".into(),
            }),
            // A block with no text at all is kept too.
            thinking(ThinkingDelta::Signature {
                index: 2,
                signature: "s2".into(),
            }),
            ModelEvent::TextDelta("Hi.".into()),
            finish(FinishReason::Stop),
        ])?;
        assert_eq!(
            turn.thinking,
            vec![
                ThinkingBlock::Thinking {
                    thinking: "first thought".into(),
                    signature: "sig".into(),
                },
                ThinkingBlock::RedactedThinking {
                    data: "opaque".into(),
                },
                ThinkingBlock::Thinking {
                    thinking: String::new(),
                    signature: "s2".into(),
                },
            ]
        );
        assert_eq!(turn.text, "Hi.");
        Ok(())
    }

    #[test]
    fn thinking_counts_against_the_turn_limit() {
        let mut assembler = TurnAssembler::with_limits(TurnLimits {
            turn_bytes: 1000,
            argument_bytes: 1000,
        });
        let mut result = Ok(());
        for _ in 0..100 {
            result = assembler.push(thinking(ThinkingDelta::Text {
                index: 0,
                text: "x".repeat(100),
            }));
            if result.is_err() {
                break;
            }
        }
        assert!(matches!(result, Err(ModelError::Protocol(_))));
        assert_eq!(
            assembler.limit_exceeded(),
            Some(&TurnLimitExceeded::TurnBytes(1000))
        );
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

    #[test]
    fn reasoning_text_and_whole_blocks_are_kept_in_order_and_previews_are_not()
    -> Result<(), ModelError> {
        let mut assembler = TurnAssembler::new();
        for event in [
            thinking(ThinkingDelta::Reasoning {
                index: 0,
                text: "Let me ".into(),
            }),
            thinking(ThinkingDelta::Reasoning {
                index: 0,
                text: "think.".into(),
            }),
            thinking(ThinkingDelta::Preview {
                text: "shown only".into(),
            }),
            thinking(ThinkingDelta::Block {
                index: 1,
                block: ThinkingBlock::OpenaiReasoning {
                    item: serde_json::json!({ "type": "reasoning", "id": "rs_1" }),
                },
            }),
            ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: None,
            },
        ] {
            assembler.push(event)?;
        }
        let turn = assembler.finish()?;
        assert_eq!(
            turn.thinking,
            [
                ThinkingBlock::Reasoning {
                    text: "Let me think.".into()
                },
                ThinkingBlock::OpenaiReasoning {
                    item: serde_json::json!({ "type": "reasoning", "id": "rs_1" }),
                },
            ]
        );
        Ok(())
    }
}
