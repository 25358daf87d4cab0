//! The response half of the adapter: the SSE stream's data lines decoded
//! into [`ModelEvent`]s, leniently, ending the turn as the module
//! documentation describes. Tool-call deltas pass through unparsed; the
//! assembler ([`crate::model::adapter::TurnAssembler`]) builds the calls.

use futures_util::{Stream, StreamExt, stream};
use serde_json::{Map, Value};

use crate::model::http::{QUOTE_LIMIT, SseEvent, quoted};
use crate::model::{FinishReason, ModelError, ModelEvent, ThinkingDelta, ToolCallDelta, Usage};

/// How much of an offending data line an error message quotes.
const QUOTE_CHARS: usize = 200;

/// How much of the start of a turn's text is kept to tell whether it is a
/// tool call written as text.
const TEXT_START_BYTES: usize = 64;

/// The most chunks in a row that add nothing to the turn (`{}`, a delta
/// without content, usage alone, an empty data line). Nothing downstream
/// counts them against the turn's limits and each resets the stream's
/// silence limit, so a server that streams only those would hold the run
/// until the model call's time-out (or for ever without one); servers send
/// a handful.
pub(super) const MAX_EMPTY_CHUNKS: usize = 1000;

/// What to do about a server that cannot stream tool calls, for the errors
/// that find one.
const NATIVE_CALLS_FIX: &str = "offer the tools as one structured-output schema instead: \
    `AgentBuilder::call_mode(CallMode::Composed)`, or `OpenAiChat::with_native_tool_calls(false)` \
    (`OPENAI_NATIVE_TOOL_CALLS=false`) with `CallMode::Auto`";

/// An error status answering a request that offered tools, whose body
/// says tools or tool calls are not supported there (llama.cpp's `Cannot
/// use tools with stream`, llama-cpp-python's `Automatic streaming tool
/// choice is not supported`, Ollama's `... does not support tools`, vLLM's
/// `"auto" tool choice requires --enable-auto-tool-choice ...`), is the
/// server saying it cannot do tool calls here: a [`ModelError::Config`]
/// naming the cause and the fix. Any other error is passed on as it is,
/// a refused schema (`Invalid schema for function ...`) among them.
pub(super) fn explain_refusal(error: ModelError, tools_offered: bool) -> ModelError {
    match error {
        ModelError::Http { status, body }
            if tools_offered
                && (400..600).contains(&status)
                && !matches!(status, 401 | 403 | 404 | 408 | 429)
                && refuses_tool_calls(&body) =>
        {
            ModelError::Config(format!(
                "the server refused the tools of a streamed request ({status}: {}): it cannot \
                 stream native tool calls; {NATIVE_CALLS_FIX}",
                quote(&body)
            ))
        }
        other => other,
    }
}

/// Turns the response's events into model events, ending after the first
/// `Finish` or error.
pub(super) fn decode<S>(
    events: S,
    tools_offered: bool,
    span: tracing::Span,
) -> impl Stream<Item = Result<ModelEvent, ModelError>> + Send
where
    S: Stream<Item = Result<SseEvent, ModelError>> + Send,
{
    let state = (Box::pin(events), ChunkDecoder::new(tools_offered), false);
    stream::unfold(state, move |(mut events, mut decoder, ended)| {
        let span = span.clone();
        async move {
            if ended {
                return None;
            }
            let step = match events.next().await {
                Some(Ok(event)) => decoder.on_data(&event.data),
                Some(Err(error)) => Step::end(Vec::new(), Err(error)),
                None => decoder.on_end(),
            };
            span.in_scope(|| match step.events.last() {
                Some(Ok(ModelEvent::Finish { reason, usage })) if step.ended => {
                    tracing::debug!(?reason, ?usage, "chat completion finished");
                }
                Some(Err(error)) => tracing::debug!(%error, "chat completion stream failed"),
                _ => {}
            });
            Some((step.events, (events, decoder, step.ended)))
        }
    })
    .flat_map(stream::iter)
}

/// What one SSE event produced.
#[derive(Debug, PartialEq)]
pub(super) struct Step {
    pub(super) events: Vec<Result<ModelEvent, ModelError>>,
    /// Whether the turn is over (finished or failed).
    pub(super) ended: bool,
}

impl Step {
    fn more(events: Vec<Result<ModelEvent, ModelError>>) -> Self {
        Step {
            events,
            ended: false,
        }
    }

    fn end(
        mut events: Vec<Result<ModelEvent, ModelError>>,
        last: Result<ModelEvent, ModelError>,
    ) -> Self {
        events.push(last);
        Step {
            events,
            ended: true,
        }
    }
}

/// The little a stream must remember between chunks: never the calls
/// themselves, which are the assembler's business.
#[derive(Debug, Default)]
pub(super) struct ChunkDecoder {
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
    saw_tool_call: bool,
    /// Whether the request offered tools.
    tools_offered: bool,
    /// Whether any chunk arrived.
    saw_chunk: bool,
    /// The start of the turn's text (at most [`TEXT_START_BYTES`]), to tell
    /// a tool call written as text.
    text_start: String,
    /// Chunks in a row that added nothing ([`MAX_EMPTY_CHUNKS`]).
    empty: usize,
}

impl ChunkDecoder {
    /// A decoder for the answer to a request that offered tools or not.
    pub(super) fn new(tools_offered: bool) -> Self {
        ChunkDecoder {
            tools_offered,
            ..ChunkDecoder::default()
        }
    }
    /// Decodes the data of one SSE event, ending the stream after more
    /// than [`MAX_EMPTY_CHUNKS`] in a row that add nothing.
    pub(super) fn on_data(&mut self, data: &str) -> Step {
        let step = self.decode_data(data);
        if !step.events.is_empty() {
            self.empty = 0;
            return step;
        }
        self.empty += 1;
        if self.empty > MAX_EMPTY_CHUNKS {
            return Step::end(
                Vec::new(),
                Err(ModelError::Protocol(format!(
                    "the stream sent more than {MAX_EMPTY_CHUNKS} chunks in a row without content"
                ))),
            );
        }
        step
    }

    fn decode_data(&mut self, data: &str) -> Step {
        let data = data.trim();
        if data.is_empty() {
            return Step::more(Vec::new());
        }
        if data == "[DONE]" {
            let reason = match self.finish_reason.take() {
                Some(reason) => reason,
                None => {
                    if let Some(error) = self.call_written_as_text() {
                        return Step::end(Vec::new(), Err(error));
                    }
                    if self.saw_tool_call {
                        FinishReason::ToolCalls
                    } else {
                        FinishReason::Stop
                    }
                }
            };
            return Step::end(Vec::new(), Ok(self.finish(reason)));
        }
        let chunk = match serde_json::from_str::<Value>(data) {
            Ok(Value::Object(chunk)) => chunk,
            Ok(_) => {
                return Step::end(
                    Vec::new(),
                    Err(ModelError::Protocol(format!(
                        "a chunk is not a JSON object: {}",
                        quote(data)
                    ))),
                );
            }
            Err(error) => {
                return Step::end(
                    Vec::new(),
                    Err(ModelError::Protocol(format!(
                        "a data line is not JSON ({error}): {}",
                        quote(data)
                    ))),
                );
            }
        };
        if let Some(error) = chunk.get("error").filter(|error| !error.is_null()) {
            return Step::end(
                Vec::new(),
                Err(ModelError::Protocol(format!(
                    "the provider reported an error: {}",
                    provider_error(error)
                ))),
            );
        }
        self.saw_chunk = true;
        let mut events = Vec::new();
        if let Some(choice) = first_choice(&chunk) {
            if let Some(delta) = choice.get("delta").and_then(Value::as_object) {
                self.read_delta(delta, &mut events);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(finish_reason(reason));
            }
        }
        if let Some(usage) = chunk.get("usage").and_then(Value::as_object) {
            let tokens = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
            // Cached prompt tokens: OpenAI's (and vLLM's, llama.cpp's)
            // `prompt_tokens_details.cached_tokens`, DeepSeek's
            // `prompt_cache_hit_tokens`; both are part of `prompt_tokens`.
            let cached = usage
                .get("prompt_tokens_details")
                .and_then(|details| details.get("cached_tokens"))
                .and_then(Value::as_u64)
                .unwrap_or_else(|| tokens("prompt_cache_hit_tokens"));
            self.usage = Some(Usage {
                cache_read_tokens: cached,
                ..Usage::new(tokens("prompt_tokens"), tokens("completion_tokens"))
            });
        }
        Step::more(events)
    }

    fn read_delta(
        &mut self,
        delta: &Map<String, Value>,
        events: &mut Vec<Result<ModelEvent, ModelError>>,
    ) {
        // Reasoning before the answer. A server that sends both names
        // (vLLM while it renamed the field) sends the same text twice: the
        // first non-empty one counts.
        if let Some(text) = ["reasoning_content", "reasoning"]
            .iter()
            .find_map(|key| delta.get(*key).and_then(Value::as_str))
            .filter(|text| !text.is_empty())
        {
            events.push(Ok(ModelEvent::ThinkingDelta(ThinkingDelta::Reasoning {
                index: 0,
                text: text.to_owned(),
            })));
        }
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            if self.text_start.len() < TEXT_START_BYTES {
                let room = TEXT_START_BYTES - self.text_start.len();
                self.text_start.extend(text.chars().scan(0, |taken, c| {
                    *taken += c.len_utf8();
                    (*taken <= room).then_some(c)
                }));
            }
            events.push(Ok(ModelEvent::TextDelta(text.to_owned())));
        }
        let tool_calls = delta.get("tool_calls").and_then(Value::as_array);
        if let Some(calls) = tool_calls {
            for (position, call) in calls.iter().enumerate() {
                let Some(call) = call.as_object() else {
                    continue;
                };
                // Servers that leave out `index` send one call per array.
                let index = call
                    .get("index")
                    .and_then(Value::as_u64)
                    .and_then(|index| usize::try_from(index).ok())
                    .unwrap_or(position);
                let function = call.get("function").and_then(Value::as_object);
                self.push_call(
                    index,
                    call.get("id").and_then(Value::as_str),
                    function,
                    events,
                );
            }
        }
        // The deprecated `functions` API: one call, no id. Some servers
        // (llama.cpp's) send it beside `tool_calls` with the same pieces, so
        // it counts only when `tool_calls` is absent, or the arguments double.
        if tool_calls.is_none()
            && let Some(function) = delta.get("function_call").and_then(Value::as_object)
        {
            self.push_call(0, None, Some(function), events);
        }
    }

    fn push_call(
        &mut self,
        index: usize,
        id: Option<&str>,
        function: Option<&Map<String, Value>>,
        events: &mut Vec<Result<ModelEvent, ModelError>>,
    ) {
        let name = function
            .and_then(|function| function.get("name"))
            .and_then(Value::as_str);
        let arguments = match function.and_then(|function| function.get("arguments")) {
            Some(Value::String(text)) => text.clone(),
            None | Some(Value::Null) => String::new(),
            // A server that sends the arguments as an object: its JSON text.
            Some(other) => other.to_string(),
        };
        if id.is_none() && name.is_none() && arguments.is_empty() {
            return;
        }
        self.saw_tool_call = true;
        events.push(Ok(ModelEvent::ToolCallDelta(ToolCallDelta {
            index,
            id: id.map(str::to_owned),
            name: name.map(str::to_owned),
            arguments,
        })));
    }

    /// The body ended without `[DONE]`.
    pub(super) fn on_end(&mut self) -> Step {
        let last = match self.finish_reason.take() {
            Some(reason) => Ok(self.finish(reason)),
            None => Err(self
                .call_written_as_text()
                .or_else(|| self.nothing_after_tools())
                .unwrap_or(ModelError::Incomplete)),
        };
        Step::end(Vec::new(), last)
    }

    /// The error for a body that ended without a single chunk after a
    /// request with tools: what llama-cpp-python's server does when its
    /// chat format cannot stream tool calls (it fails with `Automatic
    /// streaming tool choice is not supported` after the response began).
    fn nothing_after_tools(&self) -> Option<ModelError> {
        (self.tools_offered && !self.saw_chunk).then(|| {
            ModelError::Protocol(format!(
                "the server ended the stream without a single chunk after a request with tools, \
                 as a server that cannot stream native tool calls does (llama-cpp-python's \
                 function-calling chat formats; its log says `Automatic streaming tool choice is \
                 not supported`); {NATIVE_CALLS_FIX}"
            ))
        })
    }

    /// The error for a turn that ended without a `finish_reason` after a
    /// request with tools, having streamed no tool call but text that looks
    /// like one: how a server that cannot stream tool calls answers (it
    /// writes the call the model made in its own format, as text).
    fn call_written_as_text(&self) -> Option<ModelError> {
        if !self.tools_offered || self.saw_tool_call || !looks_like_a_call(&self.text_start) {
            return None;
        }
        Some(ModelError::Protocol(format!(
            "the server streamed what looks like a tool call as text ({}) and ended without a \
             finish_reason: it cannot stream native tool calls; {NATIVE_CALLS_FIX}",
            quote(&self.text_start)
        )))
    }

    fn finish(&mut self, reason: FinishReason) -> ModelEvent {
        ModelEvent::Finish {
            reason,
            usage: self.usage.take(),
        }
    }
}

/// Whether an error body says the server does not do tool calls (as
/// opposed to refusing one tool's schema).
fn refuses_tool_calls(body: &str) -> bool {
    let body = body.to_ascii_lowercase();
    body.contains("tool")
        && !body.contains("schema")
        && [
            "stream",
            "not support",
            "unsupported",
            "tool choice",
            "tool_choice",
        ]
        .iter()
        .any(|phrase| body.contains(phrase))
}

/// Whether the start of a turn's text looks like a tool call written out:
/// a JSON object or array (the generic form, Hermes' and Llama's JSON), or
/// one of the call markers chat templates use (`<tool_call>`,
/// `<function=`, `<|python_tag|>`, `[TOOL_CALLS]`, `functools[`).
fn looks_like_a_call(text_start: &str) -> bool {
    let text = text_start.trim_start();
    text.starts_with('{')
        || text.starts_with('[')
        || [
            "<tool_call>",
            "<function",
            "<|python_tag|>",
            "[TOOL_CALLS]",
            "functools[",
            "<|tool_call",
        ]
        .iter()
        .any(|marker| text.starts_with(marker))
}

/// The choice with index 0 (the only one unless `n` > 1 was asked for).
fn first_choice(chunk: &Map<String, Value>) -> Option<&Map<String, Value>> {
    chunk
        .get("choices")
        .and_then(Value::as_array)?
        .iter()
        .filter_map(Value::as_object)
        .find(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        // A server's own reason is kept, cut like a type name.
        other => FinishReason::Other(quoted(other, 64)),
    }
}

/// The provider's message from an `error` value: OpenAI's
/// `{"message", "type", "code"}`, a bare string, or whatever else it is.
fn provider_error(error: &Value) -> String {
    match error {
        Value::String(message) => quoted(message, QUOTE_LIMIT),
        Value::Object(object) => {
            let message = object.get("message").and_then(Value::as_str).map_or_else(
                || quote(&error.to_string()),
                |message| quoted(message, QUOTE_LIMIT),
            );
            let details: Vec<String> = ["type", "code"]
                .iter()
                .filter_map(|key| match object.get(*key) {
                    Some(Value::String(text)) => Some(format!("{key} {}", quoted(text, 64))),
                    Some(Value::Number(number)) => Some(format!("{key} {number}")),
                    _ => None,
                })
                .collect();
            if details.is_empty() {
                message
            } else {
                format!("{message} ({})", details.join(", "))
            }
        }
        other => quote(&other.to_string()),
    }
}

/// The start of `text`, for an error message.
fn quote(text: &str) -> String {
    let mut quoted: String = text.chars().take(QUOTE_CHARS).collect();
    if quoted.len() < text.len() {
        quoted.push('…');
    }
    quoted
}
