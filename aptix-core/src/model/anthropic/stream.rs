//! The response half of the adapter: the Server-Sent Events of one model
//! call decoded into [`ModelEvent`]s, event by event, and the phases of the
//! call's stream (connecting, reading, done) that end the turn as the module
//! documentation describes. Tool-call input passes through unparsed; the
//! assembler ([`crate::model::adapter::TurnAssembler`]) builds the calls.

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use crate::model::http::{QUOTE_LIMIT, SseEvent, quoted};
use crate::model::{
    FinishReason, HostedToolEvent, ModelError, ModelEvent, ThinkingDelta, ToolCallDelta, Usage,
};

/// The most bytes the server blocks still open may hold together (each
/// block's start and the input streamed for it, plus
/// [`OPEN_BLOCK_OVERHEAD`] each) until they stop. The assembler bounds the
/// turn once a block arrives whole; this bounds the blocks before, at the
/// assembler's default turn size: a limit per block alone would let a
/// server open blocks without end, each just under it.
pub(super) const SERVER_INPUT_BYTES: usize = 8 * 1024 * 1024;

/// What each open server block counts against [`SERVER_INPUT_BYTES`]
/// besides its bytes, so that many empty blocks are bounded too.
const OPEN_BLOCK_OVERHEAD: usize = 64;

/// Translates Anthropic's events into [`ModelEvent`]s, one event at a time.
#[derive(Debug, Default)]
pub(super) struct Decoder {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_tokens: u64,
    cache_write_tokens: u64,
    stop_reason: Option<String>,
    /// Open `tool_use` blocks by index, and whether any input text has been
    /// emitted for them.
    tool_blocks: HashMap<usize, bool>,
    /// Open blocks the provider runs itself, by index, with the input
    /// streamed for them so far.
    server_blocks: HashMap<usize, (Value, String)>,
    /// What the open `server_blocks` hold, counted against
    /// [`SERVER_INPUT_BYTES`]: each one's start (its JSON text's length),
    /// its input so far, and [`OPEN_BLOCK_OVERHEAD`].
    server_bytes: usize,
    /// The catalog name of each hosted tool offered, by the name its
    /// `server_tool_use` blocks carry.
    hosted_names: HashMap<String, String>,
    /// The hosted calls of this turn, by id, with their catalog name: their
    /// results are shown under that name.
    hosted_calls: HashMap<String, String>,
}

impl Decoder {
    /// A decoder that shows the calls of the hosted tools `hosted_names`
    /// (catalog names by wire name).
    pub(super) fn new(hosted_names: HashMap<String, String>) -> Self {
        Decoder {
            hosted_names,
            ..Decoder::default()
        }
    }

    pub(super) fn decode(
        &mut self,
        event: &SseEvent,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<(), ModelError> {
        if event.event == "ping" {
            return Ok(());
        }
        let data: Value = serde_json::from_str(&event.data).map_err(|error| {
            ModelError::Protocol(format!("`{}` event data is not JSON: {error}", event.event))
        })?;
        // Anthropic names every event; a proxy that drops the names still
        // leaves the same name in the data's `type`.
        let kind = match event.event.as_str() {
            "" | "message" => data.get("type").and_then(Value::as_str).unwrap_or(""),
            name => name,
        };
        match kind {
            "message_start" => {
                if let Some(usage) = data.get("message").and_then(|m| m.get("usage")) {
                    self.read_usage(usage);
                }
            }
            "content_block_start" => {
                let index = index_of(&data)?;
                let block = data
                    .get("content_block")
                    .ok_or_else(|| protocol("content_block_start without a content_block"))?;
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                        if !text.is_empty() {
                            out.push_back(ModelEvent::TextDelta(text.to_owned()));
                        }
                    }
                    Some("tool_use") => {
                        // The start carries `input: {}`; the real input
                        // follows as `input_json_delta`s. A server that puts
                        // the whole input here instead is passed on as is.
                        let input = match block.get("input") {
                            Some(Value::Object(input)) if !input.is_empty() => {
                                Value::Object(input.clone()).to_string()
                            }
                            _ => String::new(),
                        };
                        self.tool_blocks.insert(index, !input.is_empty());
                        out.push_back(ModelEvent::ToolCallDelta(ToolCallDelta {
                            index,
                            id: string_at(block, "id"),
                            name: string_at(block, "name"),
                            arguments: input,
                        }));
                    }
                    // Opened even when empty, so that a block whose text
                    // never streams is still sent back.
                    Some("thinking") => {
                        out.push_back(ModelEvent::ThinkingDelta(ThinkingDelta::Text {
                            index,
                            text: string_at(block, "thinking").unwrap_or_default(),
                        }));
                        if let Some(signature) =
                            string_at(block, "signature").filter(|s| !s.is_empty())
                        {
                            out.push_back(ModelEvent::ThinkingDelta(ThinkingDelta::Signature {
                                index,
                                signature,
                            }));
                        }
                    }
                    Some("redacted_thinking") => {
                        let data = string_at(block, "data")
                            .ok_or_else(|| protocol("redacted_thinking without data"))?;
                        out.push_back(ModelEvent::ThinkingDelta(ThinkingDelta::Redacted {
                            index,
                            data,
                        }));
                    }
                    // server_tool_use and the results of server tools are
                    // not the client's to run, but are kept whole, to be
                    // sent back with the turn.
                    Some(_) => {
                        let bytes = OPEN_BLOCK_OVERHEAD + block.to_string().len();
                        // A start again at an open index replaces that block.
                        if let Some(replaced) = self.server_blocks.remove(&index) {
                            self.server_bytes = self
                                .server_bytes
                                .saturating_sub(open_block_bytes(&replaced));
                        }
                        self.hold_server_bytes(bytes)?;
                        self.server_blocks
                            .insert(index, (block.clone(), String::new()));
                    }
                    None => {}
                }
            }
            "content_block_delta" => {
                let index = index_of(&data)?;
                let delta = data
                    .get("delta")
                    .ok_or_else(|| protocol("content_block_delta without a delta"))?;
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let text = delta
                            .get("text")
                            .and_then(Value::as_str)
                            .ok_or_else(|| protocol("text_delta without text"))?;
                        if !text.is_empty() {
                            out.push_back(ModelEvent::TextDelta(text.to_owned()));
                        }
                    }
                    Some("input_json_delta") => {
                        let partial = delta
                            .get("partial_json")
                            .and_then(Value::as_str)
                            .ok_or_else(|| protocol("input_json_delta without partial_json"))?;
                        if partial.is_empty() {
                            return Ok(());
                        }
                        if self.server_blocks.contains_key(&index) {
                            self.hold_server_bytes(partial.len())?;
                            if let Some((_, input)) = self.server_blocks.get_mut(&index) {
                                input.push_str(partial);
                            }
                            return Ok(());
                        }
                        // A delta for a block that never opened as tool_use
                        // is passed on: the assembler flags the nameless call
                        // and it is never run.
                        self.tool_blocks.insert(index, true);
                        out.push_back(ModelEvent::ToolCallDelta(ToolCallDelta {
                            index,
                            id: None,
                            name: None,
                            arguments: partial.to_owned(),
                        }));
                    }
                    Some("thinking_delta") => {
                        let text = delta
                            .get("thinking")
                            .and_then(Value::as_str)
                            .ok_or_else(|| protocol("thinking_delta without thinking"))?;
                        out.push_back(ModelEvent::ThinkingDelta(ThinkingDelta::Text {
                            index,
                            text: text.to_owned(),
                        }));
                    }
                    Some("signature_delta") => {
                        let signature = delta
                            .get("signature")
                            .and_then(Value::as_str)
                            .ok_or_else(|| protocol("signature_delta without signature"))?;
                        out.push_back(ModelEvent::ThinkingDelta(ThinkingDelta::Signature {
                            index,
                            signature: signature.to_owned(),
                        }));
                    }
                    // citations_delta.
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = index_of(&data)?;
                if let Some(open) = self.server_blocks.remove(&index) {
                    self.server_bytes = self.server_bytes.saturating_sub(open_block_bytes(&open));
                    let (mut block, input) = open;
                    if !input.is_empty() {
                        let input: Value = serde_json::from_str(&input).map_err(|error| {
                            protocol(&format!("a server block's input is not JSON: {error}"))
                        })?;
                        if let Some(object) = block.as_object_mut() {
                            object.insert("input".into(), input);
                        }
                    }
                    let hosted = self.hosted_event(&block);
                    out.push_back(ModelEvent::ServerBlock(block));
                    out.extend(hosted.map(ModelEvent::Hosted));
                    return Ok(());
                }
                // A tool without parameters streams no input at all, though
                // its input is `{}`; say so, so that the call's arguments
                // are a JSON object like every other call's.
                if self.tool_blocks.remove(&index) == Some(false) {
                    out.push_back(ModelEvent::ToolCallDelta(ToolCallDelta {
                        index,
                        id: None,
                        name: None,
                        arguments: "{}".to_owned(),
                    }));
                }
            }
            "message_delta" => {
                if let Some(reason) = data
                    .get("delta")
                    .and_then(|delta| delta.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(usage) = data.get("usage") {
                    self.read_usage(usage);
                }
            }
            "message_stop" => {
                let reason = self
                    .stop_reason
                    .as_deref()
                    .ok_or_else(|| protocol("message_stop before any stop_reason"))?;
                let usage =
                    (self.input_tokens.is_some() || self.output_tokens.is_some()).then(|| Usage {
                        cache_read_tokens: self.cache_read_tokens,
                        cache_write_tokens: self.cache_write_tokens,
                        ..Usage::new(
                            self.input_tokens.unwrap_or(0),
                            self.output_tokens.unwrap_or(0),
                        )
                    });
                out.push_back(ModelEvent::Finish {
                    reason: finish_reason(reason),
                    usage,
                });
            }
            "error" => {
                let error = data.get("error");
                let kind = error
                    .and_then(|error| error.get("type"))
                    .and_then(Value::as_str)
                    .unwrap_or("error");
                let message = error
                    .and_then(|error| error.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("the stream reported an error");
                return Err(ModelError::Protocol(format!(
                    "{}: {}",
                    quoted(kind, 64),
                    quoted(message, QUOTE_LIMIT)
                )));
            }
            // Anthropic may add event types; unknown ones are skipped.
            _ => {}
        }
        Ok(())
    }

    /// Usage appears in `message_start` and (cumulatively) in
    /// `message_delta`; the later figure wins. Tokens read include the
    /// prompt-cache reads and writes, which Anthropic counts separately.
    fn read_usage(&mut self, usage: &Value) {
        let count = |name: &str| usage.get(name).and_then(Value::as_u64);
        if let Some(input) = count("input_tokens") {
            let written = count("cache_creation_input_tokens").unwrap_or(0);
            let read = count("cache_read_input_tokens").unwrap_or(0);
            self.cache_write_tokens = written;
            self.cache_read_tokens = read;
            self.input_tokens = Some(input.saturating_add(written).saturating_add(read));
        }
        if let Some(output) = count("output_tokens") {
            self.output_tokens = Some(output);
        }
    }
}

impl Decoder {
    /// Counts `bytes` more held by the open server blocks, within
    /// [`SERVER_INPUT_BYTES`].
    fn hold_server_bytes(&mut self, bytes: usize) -> Result<(), ModelError> {
        let held = self.server_bytes.saturating_add(bytes);
        if held > SERVER_INPUT_BYTES {
            return Err(protocol(&format!(
                "the server tool blocks still open hold over {SERVER_INPUT_BYTES} bytes"
            )));
        }
        self.server_bytes = held;
        Ok(())
    }

    /// What a person is shown of a whole server block: a hosted tool's
    /// call (a `server_tool_use` whose name is a hosted tool offered), or
    /// the result of one of this turn's hosted calls, whose `content` is
    /// the output and an error when its type ends in `_error`
    /// (`web_search_tool_result_error`, ...). The tool search's blocks are
    /// not hosted tools of the catalog: nothing.
    fn hosted_event(&mut self, block: &Value) -> Option<HostedToolEvent> {
        let kind = block.get("type").and_then(Value::as_str)?;
        if kind == "server_tool_use" {
            let wire_name = block.get("name").and_then(Value::as_str)?;
            let name = self.hosted_names.get(wire_name)?.clone();
            let id = string_at(block, "id")?;
            self.hosted_calls.insert(id.clone(), name.clone());
            return Some(HostedToolEvent::Called {
                id,
                name,
                input: block.get("input").cloned().unwrap_or(Value::Null),
            });
        }
        if !kind.ends_with("_tool_result") {
            return None;
        }
        let id = string_at(block, "tool_use_id")?;
        let name = self.hosted_calls.get(&id)?.clone();
        let output = block.get("content").cloned().unwrap_or(Value::Null);
        let is_error = output
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|kind| kind.ends_with("_error"));
        Some(HostedToolEvent::Finished {
            id,
            name,
            output,
            is_error,
        })
    }
}

/// What an open server block counts against [`SERVER_INPUT_BYTES`]: what
/// [`Decoder::hold_server_bytes`] was given for it.
fn open_block_bytes((block, input): &(Value, String)) -> usize {
    OPEN_BLOCK_OVERHEAD + block.to_string().len() + input.len()
}

fn protocol(message: &str) -> ModelError {
    ModelError::Protocol(message.to_owned())
}

fn index_of(data: &Value) -> Result<usize, ModelError> {
    data.get("index")
        .and_then(Value::as_u64)
        .and_then(|index| usize::try_from(index).ok())
        .ok_or_else(|| protocol("a content block event without an index"))
}

fn string_at(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn finish_reason(stop_reason: &str) -> FinishReason {
    match stop_reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        // Anthropic may add reasons; a peer's own is cut like a type name.
        other => FinishReason::Other(quoted(other, 64)),
    }
}

impl crate::model::event_stream::EventDecoder for Decoder {
    fn decode(
        &mut self,
        event: &SseEvent,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<(), ModelError> {
        Decoder::decode(self, event, out)
    }
}
