//! The response half of the adapter: the Server-Sent Events of one model
//! call (each a `GenerateContentResponse` chunk) decoded into
//! [`ModelEvent`]s, chunk by chunk, and the phases of the call's stream
//! (connecting, reading, done) that end the turn as the module
//! documentation describes. Function calls arrive whole and pass on as
//! their JSON text; the assembler
//! ([`crate::model::adapter::TurnAssembler`]) builds the calls.

use std::collections::VecDeque;

use serde_json::{Value, json};

use super::Gemini;
use crate::model::http::{QUOTE_LIMIT, SseEvent, quoted};
use crate::model::{
    ChatRequest, FinishReason, HostedToolEvent, ModelError, ModelEvent, ThinkingBlock,
    ThinkingDelta, ToolCallDelta, Usage,
};

/// The most chunks in a row that add nothing to the turn (no candidate,
/// empty parts, usage alone). Nothing downstream counts them against the
/// turn's limits, so a server that streams only those would otherwise hold
/// the run for as long as it keeps sending; Gemini itself sends a handful.
pub(super) const MAX_EMPTY_CHUNKS: usize = 1000;

/// The catalog's names for Gemini's own tools in this request, so that
/// what they did is shown as the calls of the tools the agent knows (a
/// `web_search` declared for Google Search shows as `web_search`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HostedNames {
    search: String,
    code: String,
    url: String,
}

impl Default for HostedNames {
    fn default() -> Self {
        HostedNames {
            search: "google_search".into(),
            code: "code_execution".into(),
            url: "url_context".into(),
        }
    }
}

impl HostedNames {
    /// The names `request`'s provider tools have, by the Gemini tool each
    /// is sent as; the built-in names for those it does not offer.
    pub(super) fn of(adapter: &Gemini, request: &ChatRequest) -> HostedNames {
        let mut names = HostedNames::default();
        let mut seen = [false; 3];
        for spec in request.tools.iter().filter(|spec| spec.hosted) {
            let Some(Value::Object(wire)) = adapter.hosted_wire(&spec.name) else {
                continue;
            };
            let slot = if wire.contains_key("googleSearch")
                || wire.contains_key("googleSearchRetrieval")
            {
                0
            } else if wire.contains_key("codeExecution") {
                1
            } else if wire.contains_key("urlContext") {
                2
            } else {
                continue;
            };
            if !seen[slot] {
                seen[slot] = true;
                let name = spec.name.clone();
                match slot {
                    0 => names.search = name,
                    1 => names.code = name,
                    _ => names.url = name,
                }
            }
        }
        names
    }

    /// The name for a server-side `toolCall`'s `toolType`
    /// (`GOOGLE_SEARCH_WEB`, ...).
    fn for_type(&self, tool_type: &str) -> String {
        if tool_type.starts_with("GOOGLE_SEARCH") {
            self.search.clone()
        } else if tool_type.starts_with("CODE_EXECUTION") {
            self.code.clone()
        } else if tool_type.starts_with("URL_CONTEXT") {
            self.url.clone()
        } else {
            // A type the adapter does not know names the call; the peer
            // wrote it, so it is cut like any type name.
            quoted(&tool_type.to_ascii_lowercase(), 64)
        }
    }
}

/// Translates Gemini's chunks into [`ModelEvent`]s, one chunk at a time.
#[derive(Debug, Default)]
pub(super) struct Decoder {
    names: HostedNames,
    /// Function calls seen: the next call's index.
    calls: usize,
    /// Thinking blocks emitted: the next block's index.
    blocks: usize,
    response_id: Option<String>,
    usage: Option<Usage>,
    /// The latest `groundingMetadata` of a Google Search, shown when the
    /// turn ends (each chunk's replaces the last, so it stays one value).
    grounding: Option<Value>,
    /// The provider-run call last opened (code execution, a server-side
    /// tool), which a result without an id answers.
    open_hosted: Option<String>,
    /// Chunks in a row that added nothing ([`MAX_EMPTY_CHUNKS`]).
    empty: usize,
}

impl Decoder {
    pub(super) fn new(names: HostedNames) -> Decoder {
        Decoder {
            names,
            ..Decoder::default()
        }
    }

    pub(super) fn decode(
        &mut self,
        event: &SseEvent,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<(), ModelError> {
        let before = out.len();
        self.decode_chunk(event, out)?;
        if out.len() > before {
            self.empty = 0;
        } else {
            self.empty += 1;
            if self.empty > MAX_EMPTY_CHUNKS {
                return Err(protocol(&format!(
                    "the stream sent more than {MAX_EMPTY_CHUNKS} chunks in a row without content"
                )));
            }
        }
        Ok(())
    }

    fn decode_chunk(
        &mut self,
        event: &SseEvent,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<(), ModelError> {
        if event.data.trim().is_empty() {
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(&event.data)
            .map_err(|error| protocol(&format!("a chunk is not JSON: {error}")))?;
        if let Some(error) = chunk.get("error") {
            return Err(stream_error(error));
        }
        if let Some(id) = chunk.get("responseId").and_then(Value::as_str)
            && self.response_id.is_none()
        {
            self.response_id = Some(quoted(id, 128));
        }
        if let Some(usage) = chunk.get("usageMetadata") {
            self.read_usage(usage);
        }
        // One candidate is asked for; Gemini numbers it 0.
        let candidate = chunk
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|candidates| {
                candidates
                    .iter()
                    .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
            });
        let Some(candidate) = candidate else {
            // A prompt Gemini refuses comes back without candidates.
            if let Some(reason) = chunk
                .get("promptFeedback")
                .and_then(|feedback| feedback.get("blockReason"))
                .and_then(Value::as_str)
            {
                tracing::debug!(reason, "the prompt was blocked");
                out.push_back(ModelEvent::Finish {
                    reason: FinishReason::ContentFilter,
                    usage: self.usage,
                });
            }
            return Ok(());
        };
        if let Some(parts) = candidate
            .get("content")
            .and_then(|content| content.get("parts"))
            .and_then(Value::as_array)
        {
            for part in parts {
                self.part(part, out)?;
            }
        }
        if let Some(grounding) = candidate.get("groundingMetadata")
            && grounding.is_object()
        {
            self.grounding = Some(grounding.clone());
        }
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            self.show_grounding(out);
            out.push_back(ModelEvent::Finish {
                reason: self.finish_reason(reason),
                usage: self.usage,
            });
        }
        Ok(())
    }

    /// One part of the candidate's content.
    fn part(&mut self, part: &Value, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        let signature = part.get("thoughtSignature").and_then(Value::as_str);
        if let Some(call) = part.get("functionCall") {
            if call.get("partialArgs").is_some() || call.get("willContinue").is_some() {
                return Err(protocol(
                    "a function call streamed in pieces (streamFunctionCallArguments), which this adapter never asks for",
                ));
            }
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .map_or_else(new_call_id, str::to_owned);
            let arguments = match call.get("args") {
                Some(args @ Value::Object(_)) => args.to_string(),
                // A call without parameters comes without `args`.
                None | Some(Value::Null) => "{}".to_owned(),
                Some(other) => other.to_string(),
            };
            out.push_back(ModelEvent::ToolCallDelta(ToolCallDelta {
                index: self.calls,
                id: Some(id.clone()),
                name: call.get("name").and_then(Value::as_str).map(str::to_owned),
                arguments,
            }));
            self.calls += 1;
            if let Some(signature) = signature {
                self.block(out, json!({ "thoughtSignature": signature }), Some(id));
            }
            return Ok(());
        }
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            if let Some(text) = part.get("text").and_then(Value::as_str)
                && !text.is_empty()
            {
                out.push_back(ModelEvent::ThinkingDelta(ThinkingDelta::Preview {
                    text: text.to_owned(),
                }));
            }
            self.block(out, part.clone(), None);
            return Ok(());
        }
        if let Some(code) = part.get("executableCode") {
            let id = hosted_id(code).unwrap_or_else(new_call_id);
            self.open_hosted = Some(id.clone());
            out.push_back(ModelEvent::ServerBlock(part.clone()));
            out.push_back(ModelEvent::Hosted(HostedToolEvent::Called {
                id,
                name: self.names.code.clone(),
                input: code.clone(),
            }));
            return Ok(());
        }
        if let Some(result) = part.get("codeExecutionResult") {
            let id = self.answered(result);
            let failed = result.get("outcome").and_then(Value::as_str) != Some("OUTCOME_OK");
            out.push_back(ModelEvent::ServerBlock(part.clone()));
            out.push_back(ModelEvent::Hosted(HostedToolEvent::Finished {
                id,
                name: self.names.code.clone(),
                output: result.clone(),
                is_error: failed,
            }));
            return Ok(());
        }
        if let Some(call) = part.get("toolCall") {
            let id = hosted_id(call).unwrap_or_else(new_call_id);
            self.open_hosted = Some(id.clone());
            let tool_type = call.get("toolType").and_then(Value::as_str).unwrap_or("");
            out.push_back(ModelEvent::ServerBlock(part.clone()));
            out.push_back(ModelEvent::Hosted(HostedToolEvent::Called {
                id,
                name: self.names.for_type(tool_type),
                input: call.get("args").cloned().unwrap_or(Value::Null),
            }));
            return Ok(());
        }
        if let Some(response) = part.get("toolResponse") {
            let id = self.answered(response);
            let tool_type = response
                .get("toolType")
                .and_then(Value::as_str)
                .unwrap_or("");
            out.push_back(ModelEvent::ServerBlock(part.clone()));
            out.push_back(ModelEvent::Hosted(HostedToolEvent::Finished {
                id,
                name: self.names.for_type(tool_type),
                output: response.get("response").cloned().unwrap_or(Value::Null),
                is_error: false,
            }));
            return Ok(());
        }
        if let Some(text) = part.get("text").and_then(Value::as_str)
            && !text.is_empty()
        {
            out.push_back(ModelEvent::TextDelta(text.to_owned()));
        }
        // A signature on a text part (often an empty one that closes the
        // turn) goes back on the turn's text part.
        if let Some(signature) = signature
            && (part.get("text").is_some() || part.as_object().is_some_and(|p| p.len() == 1))
        {
            self.block(out, json!({ "thoughtSignature": signature }), None);
        }
        // Anything else (inlineData, a part kind added later) is not
        // something this adapter shows or keeps.
        Ok(())
    }

    fn block(&mut self, out: &mut VecDeque<ModelEvent>, part: Value, tool_call_id: Option<String>) {
        out.push_back(ModelEvent::ThinkingDelta(ThinkingDelta::Block {
            index: self.blocks,
            block: ThinkingBlock::Gemini { part, tool_call_id },
        }));
        self.blocks += 1;
    }

    /// The id of the provider-run call a result answers: its own, or the
    /// call last opened.
    fn answered(&mut self, result: &Value) -> String {
        let opened = self.open_hosted.take();
        hosted_id(result).or(opened).unwrap_or_else(new_call_id)
    }

    /// A Google Search's grounding, as the call and result of the search
    /// tool, once the turn ends.
    fn show_grounding(&mut self, out: &mut VecDeque<ModelEvent>) {
        let Some(grounding) = self.grounding.take() else {
            return;
        };
        let queries = grounding
            .get("webSearchQueries")
            .cloned()
            .unwrap_or(Value::Array(Vec::new()));
        let sources: Vec<Value> = grounding
            .get("groundingChunks")
            .and_then(Value::as_array)
            .map(|chunks| {
                chunks
                    .iter()
                    .filter_map(|chunk| chunk.get("web").cloned())
                    .collect()
            })
            .unwrap_or_default();
        let searched = queries.as_array().is_some_and(|q| !q.is_empty());
        if !searched && sources.is_empty() {
            return;
        }
        let id = match &self.response_id {
            Some(response) => format!("{response}_search"),
            None => new_call_id(),
        };
        out.push_back(ModelEvent::Hosted(HostedToolEvent::Called {
            id: id.clone(),
            name: self.names.search.clone(),
            input: json!({ "queries": queries }),
        }));
        out.push_back(ModelEvent::Hosted(HostedToolEvent::Finished {
            id,
            name: self.names.search.clone(),
            output: json!({ "sources": sources }),
            is_error: false,
        }));
    }

    /// Every chunk carries the usage so far; the last one seen wins.
    fn read_usage(&mut self, usage: &Value) {
        let count = |name: &str| usage.get(name).and_then(Value::as_u64);
        // The first chunks of a stream may carry no counts yet.
        if count("promptTokenCount").is_none() && count("candidatesTokenCount").is_none() {
            return;
        }
        self.usage = Some(Usage {
            input_tokens: count("promptTokenCount").unwrap_or(0),
            output_tokens: count("candidatesTokenCount")
                .unwrap_or(0)
                .saturating_add(count("thoughtsTokenCount").unwrap_or(0)),
            cache_read_tokens: count("cachedContentTokenCount").unwrap_or(0),
            cache_write_tokens: 0,
        });
    }

    fn finish_reason(&self, reason: &str) -> FinishReason {
        match reason {
            "STOP" if self.calls > 0 => FinishReason::ToolCalls,
            "STOP" => FinishReason::Stop,
            "MAX_TOKENS" => FinishReason::Length,
            "SAFETY"
            | "RECITATION"
            | "BLOCKLIST"
            | "PROHIBITED_CONTENT"
            | "SPII"
            | "IMAGE_SAFETY"
            | "IMAGE_PROHIBITED_CONTENT"
            | "IMAGE_RECITATION" => FinishReason::ContentFilter,
            other => FinishReason::Other(quoted(other, 64)),
        }
    }
}

/// A provider-run call's or result's own `id`, when it has one.
fn hosted_id(value: &Value) -> Option<String> {
    value
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// An id for a call Gemini gave none: made once, when the call arrives, so
/// the call, its signature and its result share it for the turn.
fn new_call_id() -> String {
    format!("call_{}", uuid::Uuid::new_v4().simple())
}

/// `{"error": {code, message, status}}` in the stream.
fn stream_error(error: &Value) -> ModelError {
    let field = |name: &str| error.get(name).and_then(Value::as_str);
    let status = field("status").unwrap_or("error");
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
    let message = field("message").unwrap_or("the stream reported an error");
    ModelError::Protocol(format!(
        "{} ({code}): {}",
        quoted(status, 64),
        quoted(message, QUOTE_LIMIT)
    ))
}

fn protocol(message: &str) -> ModelError {
    ModelError::Protocol(message.to_owned())
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
