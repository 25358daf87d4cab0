//! The Anthropic Messages API, streamed.
//!
//! [`Anthropic`] turns a [`ChatRequest`] into one `POST {base}/v1/messages`
//! with `stream: true` and translates the answer's Server-Sent Events into
//! [`ModelEvent`]s. Like every adapter it only *emits*: text deltas as they
//! come, and each `tool_use` content block as [`ToolCallDelta`]s keyed by
//! the block's `index` (its id and name when the block opens, then every
//! `input_json_delta.partial_json` piece verbatim). Joining those pieces and
//! deciding whether a call is complete is [`super::adapter::TurnAssembler`]'s job; nothing
//! here parses tool arguments out of a stream.
//!
//! The event sequence Anthropic sends, and what each becomes:
//!
//! | event | becomes |
//! | --- | --- |
//! | `message_start` | remembers `usage.input_tokens` |
//! | `content_block_start` (text) | its initial text, if any |
//! | `content_block_start` (tool_use) | `ToolCallDelta { index, id, name, arguments: "" }` |
//! | `content_block_delta` (text_delta) | `TextDelta` |
//! | `content_block_delta` (input_json_delta) | `ToolCallDelta { index, arguments }` |
//! | `content_block_start` (thinking) | `ThinkingDelta::Text` with its initial text (and `Signature`, if any) |
//! | `content_block_start` (redacted_thinking) | `ThinkingDelta::Redacted { index, data }` |
//! | `content_block_delta` (thinking_delta / signature_delta) | `ThinkingDelta::Text` / `Signature` |
//! | `content_block_stop` | `"{}"` for a tool_use block that got no input at all |
//! | `message_delta` | remembers `stop_reason` and `usage.output_tokens` |
//! | `message_stop` | the one `Finish { reason, usage }`; reading stops here |
//! | `ping`, unknown events | nothing |
//! | `error` | `Err(ModelError::Protocol)` with Anthropic's error type and message |
//!
//! A stream that ends (cleanly or not) before `message_stop` yields an
//! error, never a `Finish`: a half-received turn must not look finished.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::OnceLock;

use futures_util::{Stream, StreamExt};
use serde::Serialize;
use serde_json::{Map, Value, json};
use tracing::Instrument;

use super::attachments::{Attachment, classify, is_blank_text, left_out};
use super::http::{self, HttpPolicy, SseEvent};
use super::{
    ChatModel, ChatRequest, FinishReason, Message, ModelError, ModelEvent, ModelStream,
    NativeToolSearch, ThinkingBlock, ThinkingDelta, ToolCallDelta, ToolChoice, ToolSpec, Usage,
};
use crate::content::Content;
use crate::schema::Dialect;

/// The API version this adapter speaks (the `anthropic-version` header).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// The endpoint used when none is configured.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The model [`Anthropic::from_env`] uses when `ANTHROPIC_MODEL` is unset.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
/// The `anthropic-beta` a request with deferred tools carries: Anthropic's
/// tool search is in beta.
pub const TOOL_SEARCH_BETA: &str = "advanced-tool-use-2025-11-20";
/// The `max_tokens` sent when neither the request nor the adapter sets one
/// (Anthropic requires the field).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// A [`ChatModel`] backed by the Anthropic Messages API.
#[derive(Clone)]
pub struct Anthropic {
    model: String,
    api_key: String,
    base_url: String,
    policy: HttpPolicy,
    max_tokens: u32,
    /// Built on first use with the policy's connect timeout, then shared so
    /// that requests reuse connections.
    client: OnceLock<reqwest::Client>,
}

impl std::fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Anthropic")
            .field("model", &self.model)
            .field("api_key", &"[redacted]")
            .field("base_url", &self.base_url)
            .field("max_tokens", &self.max_tokens)
            .field("policy", &self.policy)
            .finish()
    }
}

impl Anthropic {
    /// An adapter for `model` on the public endpoint.
    pub fn new(model: impl Into<String>, api_key: impl Into<String>) -> Self {
        Anthropic {
            model: model.into(),
            api_key: api_key.into(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            policy: HttpPolicy::default(),
            max_tokens: DEFAULT_MAX_TOKENS,
            client: OnceLock::new(),
        }
    }

    /// An adapter configured from the environment: `ANTHROPIC_API_KEY`
    /// (required), `ANTHROPIC_BASE_URL` (default [`DEFAULT_BASE_URL`]) and
    /// `ANTHROPIC_MODEL` (default [`DEFAULT_MODEL`]). Empty values count as
    /// unset.
    pub fn from_env() -> Result<Self, ModelError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Like [`Anthropic::from_env`], reading variables through `lookup`
    /// instead of the process environment (tests, config files).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ModelError> {
        let get = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let api_key = get("ANTHROPIC_API_KEY")
            .ok_or_else(|| ModelError::Config("ANTHROPIC_API_KEY is not set".into()))?;
        let model = get("ANTHROPIC_MODEL").unwrap_or_else(|| DEFAULT_MODEL.to_owned());
        let mut adapter = Self::new(model, api_key.trim());
        if let Some(base_url) = get("ANTHROPIC_BASE_URL") {
            adapter = adapter.with_base_url(base_url.trim());
        }
        Ok(adapter)
    }

    /// Sends requests to `base_url` (scheme, host and optional path prefix;
    /// `/v1/messages` is appended) instead of the public endpoint.
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into().trim_end_matches('/').to_owned();
        self
    }

    /// Uses `policy` for time limits and retries.
    pub fn with_policy(mut self, policy: HttpPolicy) -> Self {
        self.policy = policy;
        self.client = OnceLock::new();
        self
    }

    /// The `max_tokens` sent when the request does not set its own.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// The model name sent with every request.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The full URL requests are posted to.
    pub fn endpoint(&self) -> String {
        format!("{}/v1/messages", self.base_url)
    }

    /// The JSON body sent for `request` (always streaming).
    pub fn request_body(&self, request: &ChatRequest) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.model.clone()));
        body.insert(
            "max_tokens".into(),
            json!(request.max_tokens.unwrap_or(self.max_tokens)),
        );
        body.insert("stream".into(), Value::Bool(true));
        let system: Vec<&str> = request
            .messages
            .iter()
            .filter_map(|message| match message {
                Message::System { content } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        let system = system.join("\n\n");
        if !system.is_empty() {
            body.insert("system".into(), Value::String(system));
        }
        body.insert("messages".into(), Value::Array(messages(&request.messages)));
        let deferred = request.deferred_tools.as_ref();
        if !request.tools.is_empty() || deferred.is_some() {
            // The search tool first, never deferred (Anthropic refuses a
            // request whose every tool is), the tools always loaded, then
            // every tool it searches. Plain structs of strings and JSON
            // values: serializing them cannot fail.
            let mut tools: Vec<Value> = deferred
                .map(|deferred| search_tool(deferred.search))
                .into_iter()
                .collect();
            tools.extend(request.tools.iter().map(|spec| json!(Tool::from(spec))));
            if let Some(deferred) = deferred {
                tools.extend(deferred.tools.iter().map(|spec| {
                    json!(Tool {
                        defer_loading: true,
                        ..Tool::from(spec)
                    })
                }));
            }
            body.insert("tools".into(), Value::Array(tools));
            body.insert(
                "tool_choice".into(),
                tool_choice(&request.tool_choice, request.parallel_tool_calls),
            );
        }
        if let Some(temperature) = request.temperature.and_then(temperature) {
            body.insert("temperature".into(), temperature);
        }
        Value::Object(body)
    }

    fn client(&self) -> Result<reqwest::Client, ModelError> {
        if let Some(client) = self.client.get() {
            return Ok(client.clone());
        }
        let client = http::client(&self.policy)?;
        // Two first requests may race to build one; either client will do.
        let _ = self.client.set(client.clone());
        Ok(client)
    }

    async fn connect(&self, body: Value, beta: bool) -> Result<SseStream, ModelError> {
        let url = self.endpoint();
        reqwest::Url::parse(&url)
            .map_err(|error| ModelError::Config(format!("bad base URL `{url}`: {error}")))?;
        let client = self.client()?;
        let mut headers = vec![
            ("x-api-key", self.api_key.clone()),
            ("anthropic-version", ANTHROPIC_VERSION.to_owned()),
            ("accept", "text/event-stream".to_owned()),
        ];
        if beta {
            headers.push(("anthropic-beta", TOOL_SEARCH_BETA.to_owned()));
        }
        let events = http::post_sse(&client, &url, &headers, &body, &self.policy).await?;
        Ok(Box::pin(events))
    }
}

/// A tool in a Messages API request.
#[derive(Debug, Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    /// Loaded into the model's context only once the tool search finds it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    defer_loading: bool,
}

impl<'a> From<&'a ToolSpec> for Tool<'a> {
    fn from(spec: &'a ToolSpec) -> Self {
        Tool {
            name: &spec.name,
            description: &spec.description,
            input_schema: &spec.parameters,
            defer_loading: false,
        }
    }
}

/// The server tool that searches the deferred tools.
fn search_tool(search: NativeToolSearch) -> Value {
    let (kind, name) = match search {
        NativeToolSearch::Bm25 => ("tool_search_tool_bm25_20251119", "tool_search_tool_bm25"),
        NativeToolSearch::Regex => ("tool_search_tool_regex_20251119", "tool_search_tool_regex"),
    };
    json!({ "type": kind, "name": name })
}

type SseStream = Pin<Box<dyn Stream<Item = Result<SseEvent, ModelError>> + Send>>;

impl ChatModel for Anthropic {
    fn model_name(&self) -> Option<&str> {
        Some(self.model())
    }

    fn dialect(&self) -> Dialect {
        Dialect::Anthropic
    }

    fn native_tool_search(&self) -> bool {
        true
    }

    fn stream<'a>(&'a self, request: &'a ChatRequest) -> ModelStream<'a> {
        let span = tracing::debug_span!("anthropic.messages", model = %self.model);
        let body = self.request_body(request);
        tracing::debug!(
            parent: &span,
            messages = request.messages.len(),
            tools = request.tools.len(),
            "starting a model call"
        );
        let start = Phase::Connect {
            adapter: self,
            body,
            beta: request.deferred_tools.is_some(),
        };
        Box::pin(futures_util::stream::unfold(start, move |phase| {
            next(phase).instrument(span.clone())
        }))
    }
}

/// Where one model call's stream stands.
enum Phase<'a> {
    Connect {
        adapter: &'a Anthropic,
        body: Value,
        beta: bool,
    },
    Reading {
        events: SseStream,
        decoder: Decoder,
        pending: VecDeque<ModelEvent>,
    },
    Done,
}

type Item = Result<ModelEvent, ModelError>;

async fn next(mut phase: Phase<'_>) -> Option<(Item, Phase<'_>)> {
    loop {
        phase = match phase {
            Phase::Done => return None,
            Phase::Connect {
                adapter,
                body,
                beta,
            } => match adapter.connect(body, beta).await {
                Ok(events) => Phase::Reading {
                    events,
                    decoder: Decoder::default(),
                    pending: VecDeque::new(),
                },
                Err(error) => return fail(error),
            },
            Phase::Reading {
                mut events,
                mut decoder,
                mut pending,
            } => {
                if let Some(event) = pending.pop_front() {
                    // After `Finish` nothing more is read: whatever the
                    // server sends after `message_stop` is not part of the turn.
                    let rest = if matches!(event, ModelEvent::Finish { .. }) {
                        tracing::debug!("model call finished");
                        Phase::Done
                    } else {
                        Phase::Reading {
                            events,
                            decoder,
                            pending,
                        }
                    };
                    return Some((Ok(event), rest));
                }
                match events.next().await {
                    None => return fail(ModelError::Incomplete),
                    Some(Err(error)) => return fail(error),
                    Some(Ok(event)) => {
                        if let Err(error) = decoder.decode(&event, &mut pending) {
                            return fail(error);
                        }
                    }
                }
                Phase::Reading {
                    events,
                    decoder,
                    pending,
                }
            }
        };
    }
}

fn fail<'a>(error: ModelError) -> Option<(Item, Phase<'a>)> {
    tracing::debug!(%error, "model call failed");
    Some((Err(error), Phase::Done))
}

/// Translates Anthropic's events into [`ModelEvent`]s, one event at a time.
#[derive(Debug, Default)]
struct Decoder {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    stop_reason: Option<String>,
    /// Open `tool_use` blocks by index, and whether any input text has been
    /// emitted for them.
    tool_blocks: HashMap<usize, bool>,
    /// Open blocks the provider runs itself, by index, with the input
    /// streamed for them so far.
    server_blocks: HashMap<usize, (Value, String)>,
}

impl Decoder {
    fn decode(
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
                        if let Some((_, input)) = self.server_blocks.get_mut(&index) {
                            input.push_str(partial);
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
                if let Some((mut block, input)) = self.server_blocks.remove(&index) {
                    if !input.is_empty() {
                        let input: Value = serde_json::from_str(&input).map_err(|error| {
                            protocol(&format!("a server block's input is not JSON: {error}"))
                        })?;
                        if let Some(object) = block.as_object_mut() {
                            object.insert("input".into(), input);
                        }
                    }
                    out.push_back(ModelEvent::ServerBlock(block));
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
                        input_tokens: self.input_tokens.unwrap_or(0),
                        output_tokens: self.output_tokens.unwrap_or(0),
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
                return Err(ModelError::Protocol(format!("{kind}: {message}")));
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
            let cached = count("cache_creation_input_tokens")
                .unwrap_or(0)
                .saturating_add(count("cache_read_input_tokens").unwrap_or(0));
            self.input_tokens = Some(input.saturating_add(cached));
        }
        if let Some(output) = count("output_tokens") {
            self.output_tokens = Some(output);
        }
    }
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
        other => FinishReason::Other(other.to_owned()),
    }
}

fn tool_choice(choice: &ToolChoice, parallel_tool_calls: bool) -> Value {
    let mut value = match choice {
        ToolChoice::Auto => json!({ "type": "auto" }),
        ToolChoice::Required => json!({ "type": "any" }),
        ToolChoice::None => return json!({ "type": "none" }),
        ToolChoice::Tool(name) => json!({ "type": "tool", "name": name }),
    };
    if !parallel_tool_calls && let Value::Object(map) = &mut value {
        map.insert("disable_parallel_tool_use".into(), Value::Bool(true));
    }
    value
}

/// An `f32` as the decimal it was written as: widening `0.2f32` to `f64`
/// would send `0.20000000298023224`.
fn temperature(value: f32) -> Option<Value> {
    let widened: f64 = value.to_string().parse().ok()?;
    serde_json::Number::from_f64(widened).map(Value::Number)
}

/// Lowers the transcript to Anthropic's `messages`.
///
/// System messages go to the top-level `system` field instead. Tool results
/// become `tool_result` blocks of a user message, and all results of one
/// turn share a single user message (Anthropic rejects a turn whose results
/// are spread over several); a user text that directly follows them joins
/// that message after the results, which Anthropic requires to come first.
fn messages(transcript: &[Message]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in transcript {
        match message {
            Message::System { .. } => {}
            Message::User { content } => {
                let block = json!({ "type": "text", "text": content });
                match out.last_mut() {
                    Some(("user", blocks)) if starts_with_tool_result(blocks) => {
                        blocks.push(block);
                    }
                    _ => out.push(("user", vec![block])),
                }
            }
            Message::Assistant {
                content,
                tool_calls,
                thinking,
                server_blocks,
                runnable: _,
            } => {
                // Thinking first, as the model wrote it: Anthropic requires
                // a tool-using turn's thinking back unchanged before its
                // tool_use blocks. Then what its servers ran (a tool
                // search and the tools it found, whose `tool_reference`s
                // load them), before the calls of the tools found.
                let mut blocks: Vec<Value> = thinking.iter().map(thinking_block).collect();
                blocks.extend(server_blocks.iter().cloned());
                if !content.is_empty() {
                    blocks.push(json!({ "type": "text", "text": content }));
                }
                for call in tool_calls {
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": tool_input(&call.arguments),
                    }));
                }
                // Anthropic rejects an assistant message without content.
                if !blocks.is_empty() {
                    out.push(("assistant", blocks));
                }
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                attachments,
                ..
            } => {
                // The envelope as text, then what the tool attached: a
                // `tool_result` may hold text, image and document blocks.
                let content = if attachments.is_empty() {
                    Value::String(content.clone())
                } else {
                    let mut blocks = vec![json!({ "type": "text", "text": content })];
                    blocks.extend(
                        attachments
                            .iter()
                            .filter(|content| !is_blank_text(content))
                            .map(attachment_block),
                    );
                    Value::Array(blocks)
                };
                let block = json!({
                    "type": "tool_result",
                    "tool_use_id": tool_call_id,
                    "content": content,
                    "is_error": is_error,
                });
                match out.last_mut() {
                    Some(("user", blocks)) if only_tool_results(blocks) => blocks.push(block),
                    _ => out.push(("user", vec![block])),
                }
            }
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({ "role": role, "content": content }))
        .collect()
}

/// One attachment of a tool result as an Anthropic content block: images
/// (JPEG, PNG, GIF, WebP) as base64 `image` blocks, PDFs and text resources
/// as `document` blocks, text as text; what Anthropic does not take
/// (audio, other media) as a line of text saying it was left out.
fn attachment_block(content: &Content) -> Value {
    match classify(content) {
        Attachment::Text(text) => json!({ "type": "text", "text": text }),
        Attachment::Image { data, mime_type } => json!({
            "type": "image",
            "source": { "type": "base64", "media_type": mime_type, "data": data },
        }),
        Attachment::TextDocument { uri, text } => json!({
            "type": "document",
            "source": { "type": "text", "media_type": "text/plain", "data": text },
            "title": uri,
        }),
        Attachment::Pdf { uri, data } => json!({
            "type": "document",
            "source": { "type": "base64", "media_type": "application/pdf", "data": data },
            "title": uri,
        }),
        Attachment::Audio { .. } | Attachment::Other => {
            json!({ "type": "text", "text": left_out(content, "Anthropic") })
        }
    }
}

fn thinking_block(block: &ThinkingBlock) -> Value {
    match block {
        ThinkingBlock::Thinking {
            thinking,
            signature,
        } => json!({ "type": "thinking", "thinking": thinking, "signature": signature }),
        ThinkingBlock::RedactedThinking { data } => {
            json!({ "type": "redacted_thinking", "data": data })
        }
    }
}

fn is_tool_result(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("tool_result")
}

fn starts_with_tool_result(blocks: &[Value]) -> bool {
    blocks.first().is_some_and(is_tool_result)
}

fn only_tool_results(blocks: &[Value]) -> bool {
    !blocks.is_empty() && blocks.iter().all(is_tool_result)
}

/// A past call's arguments as the `input` object Anthropic requires.
///
/// The transcript keeps arguments exactly as the model wrote them, so they
/// may not be an object: a call the model truncated at its token limit, or
/// one it got wrong and that was answered with a validation error. Anthropic
/// rejects the whole request if `input` is not an object, so such calls are
/// replayed as `{}`; their `tool_result` still tells the model what went
/// wrong.
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(input)) => Value::Object(input),
        _ => Value::Object(Map::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_attachment_has_a_block_or_a_note() {
        let tool = Message::Tool {
            tool_call_id: "toolu_1".into(),
            name: "report".into(),
            content: "{}".into(),
            is_error: false,
            attachments: vec![
                Content::text("Caption"),
                Content::text("  \n"),
                Content::image("AAAA", "image/webp"),
                Content::image("BBBB", "image/tiff"),
                Content::audio("CCCC", "audio/wav"),
                Content::resource("file:///notes.txt", "text/plain", "Notes"),
                Content::resource_blob("file:///a/report.pdf", "application/pdf", "DDDD"),
                Content::resource_blob("file:///b.jpg", "image/jpeg", "EEEE"),
                Content::resource_blob("file:///c.bin", "application/octet-stream", "FFFF"),
            ],
        };
        let lowered = messages(&[tool]);
        let content = &lowered[0]["content"][0]["content"];
        assert_eq!(
            *content,
            json!([
                { "type": "text", "text": "{}" },
                { "type": "text", "text": "Caption" },
                { "type": "image", "source": { "type": "base64", "media_type": "image/webp", "data": "AAAA" } },
                { "type": "text", "text": "[The tool attached an image (image/tiff), which Anthropic does not accept; it was left out.]" },
                { "type": "text", "text": "[The tool attached an audio clip (audio/wav), which Anthropic does not accept; it was left out.]" },
                { "type": "document", "source": { "type": "text", "media_type": "text/plain", "data": "Notes" }, "title": "file:///notes.txt" },
                { "type": "document", "source": { "type": "base64", "media_type": "application/pdf", "data": "DDDD" }, "title": "file:///a/report.pdf" },
                { "type": "image", "source": { "type": "base64", "media_type": "image/jpeg", "data": "EEEE" } },
                { "type": "text", "text": "[The tool attached the resource file:///c.bin (application/octet-stream), which Anthropic does not accept; it was left out.]" },
            ])
        );
    }

    #[test]
    fn a_result_without_attachments_is_sent_as_a_string_as_before() {
        let tool = Message::Tool {
            tool_call_id: "toolu_1".into(),
            name: "report".into(),
            content: "{\"ok\":true}".into(),
            is_error: false,
            attachments: Vec::new(),
        };
        assert_eq!(
            messages(&[tool])[0]["content"][0]["content"],
            json!("{\"ok\":true}")
        );
    }

    fn decode_all(events: &[(&str, &str)]) -> Vec<Result<Vec<ModelEvent>, ModelError>> {
        let mut decoder = Decoder::default();
        events
            .iter()
            .map(|(event, data)| {
                let mut out = VecDeque::new();
                decoder
                    .decode(
                        &SseEvent {
                            event: (*event).to_owned(),
                            data: (*data).to_owned(),
                        },
                        &mut out,
                    )
                    .map(|()| out.into_iter().collect())
            })
            .collect()
    }

    #[test]
    fn hostile_events_are_errors_or_nothing_never_panics() {
        let names = [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
            "error",
            "message",
            "",
        ];
        let datas = [
            "",
            "null",
            "[]",
            "{}",
            "{not json",
            r#"{"index":-1}"#,
            r#"{"index":18446744073709551615,"content_block":{"type":"tool_use","id":5,"name":null}}"#,
            r#"{"index":0,"delta":{"type":"input_json_delta","partial_json":7}}"#,
            r#"{"index":0,"delta":{"type":"text_delta"}}"#,
            r#"{"index":0,"delta":{"type":"thinking_delta"}}"#,
            r#"{"index":0,"delta":{"type":"signature_delta","signature":1}}"#,
            r#"{"index":0,"content_block":{"type":"thinking","thinking":5,"signature":null}}"#,
            r#"{"index":0,"content_block":{"type":"redacted_thinking"}}"#,
            r#"{"message":{"usage":{"input_tokens":18446744073709551615,"cache_creation_input_tokens":18446744073709551615,"cache_read_input_tokens":18446744073709551615}}}"#,
            r#"{"error":null}"#,
            r#"{"type":"message_stop"}"#,
        ];
        for name in names {
            for data in datas {
                let _ = decode_all(&[(name, data)]);
            }
        }
    }

    #[test]
    fn message_stop_without_a_stop_reason_is_a_protocol_error() {
        let results = decode_all(&[("message_stop", r#"{"type":"message_stop"}"#)]);
        assert!(matches!(results[0], Err(ModelError::Protocol(_))));
    }

    #[test]
    fn cached_input_counts_as_read() {
        let results = decode_all(&[
            (
                "message_start",
                r#"{"message":{"usage":{"input_tokens":3,"cache_creation_input_tokens":10,"cache_read_input_tokens":100,"output_tokens":1}}}"#,
            ),
            (
                "message_delta",
                r#"{"delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}"#,
            ),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ]);
        assert_eq!(
            results[2],
            Ok(vec![ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: Some(Usage {
                    input_tokens: 113,
                    output_tokens: 4
                }),
            }])
        );
    }

    #[test]
    fn temperature_is_sent_as_written() {
        assert_eq!(temperature(0.2), Some(json!(0.2)));
        assert_eq!(temperature(1.0), Some(json!(1.0)));
        assert_eq!(temperature(f32::NAN), None);
    }

    #[test]
    fn tool_input_is_always_an_object() {
        assert_eq!(tool_input(r#"{"a":1}"#), json!({ "a": 1 }));
        assert_eq!(tool_input(r#"{"a":"#), json!({}));
        assert_eq!(tool_input("[1]"), json!({}));
        assert_eq!(tool_input(""), json!({}));
    }

    #[test]
    fn consecutive_user_texts_stay_separate_unless_they_follow_results() {
        let lowered = messages(&[Message::user("a"), Message::user("b")]);
        assert_eq!(lowered.len(), 2);
    }
}
