//! The OpenAI-compatible Chat Completions adapter: OpenAI itself, and the
//! many servers that speak its wire format (llama.cpp, vLLM, Ollama, LM
//! Studio, proxies).
//!
//! The adapter only translates. It turns a [`ChatRequest`] into a
//! `POST {base}/chat/completions` body with `stream: true`, and each streamed
//! chunk into [`ModelEvent`]s: text deltas, tool-call deltas exactly as they
//! arrive (per `index`, arguments unparsed), and one final
//! [`ModelEvent::Finish`]. Tool calls are assembled in one place for every
//! provider, [`super::assembly`]; nothing here parses arguments.
//!
//! Leniency: OpenAI-compatible servers differ in the details, so every field
//! of a chunk is optional and a field of an unexpected type is treated as
//! absent. Only a data line that is not JSON at all, or an `error` object in
//! the stream, ends the turn with [`ModelError::Protocol`]. The stream never
//! panics, whatever bytes arrive.
//!
//! How a turn ends:
//!
//! * `data: [DONE]`: one `Finish` with the last `finish_reason` seen (and
//!   the usage, which OpenAI sends in a last chunk with empty `choices`).
//!   A server that sends `[DONE]` without any `finish_reason` finished
//!   nonetheless: the reason is `tool_calls` if it streamed a tool call,
//!   `stop` otherwise.
//! * the body ends without `[DONE]` (some servers omit it): `Finish` if a
//!   `finish_reason` was seen, [`ModelError::Incomplete`] otherwise.
//! * the connection breaks: [`ModelError::Transport`], never a `Finish`.

use std::fmt;
use std::sync::OnceLock;

use futures_util::{Stream, StreamExt, stream};
use serde::Serialize;
use serde_json::{Map, Number, Value, json};
use tracing::Instrument;

use super::attachments::{Attachment, classify, data_url, is_blank_text, left_out};
use super::http::{self, HttpPolicy, SseEvent};
use super::{
    ChatModel, ChatRequest, FinishReason, Message, ModelError, ModelEvent, ModelStream,
    ToolCallDelta, ToolChoice, ToolSpec, Usage,
};
use crate::content::Content;
use crate::schema::Dialect;

/// OpenAI's own endpoint, the default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The model [`OpenAiChat::from_env`] uses when `OPENAI_MODEL` is unset.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";

/// How much of an offending data line an error message quotes.
const QUOTE_CHARS: usize = 200;

/// A chat model behind an OpenAI-compatible `/chat/completions` endpoint.
///
/// ```no_run
/// use aptix_core::model::openai::OpenAiChat;
///
/// // OpenAI, configured from OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL:
/// let model = OpenAiChat::from_env()?;
///
/// // A local llama.cpp server: no key, no strict mode.
/// let local = OpenAiChat::new("smollm2")
///     .with_base_url("http://127.0.0.1:8080/v1")
///     .with_strict(false);
/// # Ok::<(), aptix_core::model::ModelError>(())
/// ```
///
/// `Debug` never shows the API key.
#[derive(Clone)]
pub struct OpenAiChat {
    model: String,
    base_url: String,
    api_key: Option<String>,
    policy: HttpPolicy,
    strict: bool,
    structured_output: StructuredOutput,
    native_tools: bool,
    extra_body: Map<String, Value>,
    /// Built on first use (building one loads the TLS roots), then shared.
    client: OnceLock<Result<reqwest::Client, ModelError>>,
}

impl fmt::Debug for OpenAiChat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiChat")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field(
                "api_key",
                match &self.api_key {
                    Some(_) => &Redacted as &dyn fmt::Debug,
                    None => &None::<()>,
                },
            )
            .field("policy", &self.policy)
            .field("strict", &self.strict)
            .field("extra_body", &self.extra_body)
            .finish()
    }
}

/// Prints as `"[redacted]"` wherever a secret would be.
struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"[redacted]\"")
    }
}

/// How an OpenAI-compatible server takes a structured-output schema in
/// `response_format`. Servers turn it into a grammar (llama.cpp) or a
/// decoding constraint (OpenAI, vLLM), so the answer matches by construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StructuredOutput {
    /// `{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`:
    /// OpenAI's structured outputs, also read by vLLM and llama.cpp's server.
    #[default]
    JsonSchema,
    /// `{"type": "json_object", "schema": ...}`: the older JSON mode with a
    /// schema, the only form llama-cpp-python's server reads.
    JsonObjectSchema,
}

impl OpenAiChat {
    /// `model` on OpenAI's endpoint, without an API key (add one with
    /// [`OpenAiChat::with_api_key`]), strict tools, the default [`HttpPolicy`].
    pub fn new(model: impl Into<String>) -> Self {
        OpenAiChat {
            model: model.into(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            policy: HttpPolicy::default(),
            strict: true,
            structured_output: StructuredOutput::JsonSchema,
            native_tools: true,
            extra_body: Map::new(),
            client: OnceLock::new(),
        }
    }

    /// Configured from the process environment:
    ///
    /// * `OPENAI_BASE_URL`: the endpoint, with or without a trailing slash
    ///   (default [`DEFAULT_BASE_URL`]);
    /// * `OPENAI_API_KEY`: sent as `Authorization: Bearer` when set; local
    ///   servers need none;
    /// * `OPENAI_MODEL`: the model (default [`DEFAULT_MODEL`]);
    /// * `OPENAI_STRUCTURED_OUTPUT`: `json_schema` (default) or
    ///   `json_object`, see [`StructuredOutput`].
    ///
    /// Empty variables count as unset. Fails with [`ModelError::Config`] if
    /// the base URL is not an `http` or `https` URL.
    pub fn from_env() -> Result<Self, ModelError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// As [`OpenAiChat::from_env`], reading the variables through `lookup`
    /// (a configuration file, a test's map) instead of the process
    /// environment.
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ModelError> {
        let var = |name: &str| {
            lookup(name)
                .map(|value| value.trim().to_owned())
                .filter(|value| !value.is_empty())
        };
        let mut model =
            OpenAiChat::new(var("OPENAI_MODEL").unwrap_or_else(|| DEFAULT_MODEL.into()));
        if let Some(base_url) = var("OPENAI_BASE_URL") {
            check_base_url(&base_url)
                .map_err(|reason| ModelError::Config(format!("OPENAI_BASE_URL {reason}")))?;
            model = model.with_base_url(base_url);
        }
        if let Some(api_key) = var("OPENAI_API_KEY") {
            model = model.with_api_key(api_key);
        }
        match var("OPENAI_STRUCTURED_OUTPUT").as_deref() {
            None | Some("json_schema") => {}
            Some("json_object") => {
                model = model.with_structured_output(StructuredOutput::JsonObjectSchema);
            }
            Some(other) => {
                return Err(ModelError::Config(format!(
                    "OPENAI_STRUCTURED_OUTPUT is `{other}`; use `json_schema` or `json_object`"
                )));
            }
        }
        Ok(model)
    }

    /// The endpoint's base URL, such as `http://127.0.0.1:8080/v1`; requests
    /// go to `{base_url}/chat/completions`. A trailing slash is ignored.
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into().trim().trim_end_matches('/').to_owned();
        self
    }

    /// The API key, sent as `Authorization: Bearer {key}`. Never logged.
    pub fn with_api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(api_key.into());
        self
    }

    /// Time limits and retries.
    pub fn with_policy(mut self, policy: HttpPolicy) -> Self {
        self.policy = policy;
        self.client = OnceLock::new();
        self
    }

    /// Whether tools are sent in strict mode (Structured Outputs), the
    /// default. Servers that do not support strict mode, such as llama.cpp,
    /// take `false`: tools are then lowered to [`Dialect::OpenAiCompatible`]
    /// (the canonical schema) and sent without `strict`.
    pub fn with_strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// How a structured-output schema (composed calls) is sent; default
    /// [`StructuredOutput::JsonSchema`], what OpenAI, vLLM and llama.cpp's
    /// server read.
    pub fn with_structured_output(mut self, style: StructuredOutput) -> Self {
        self.structured_output = style;
        self
    }

    /// Declares whether the model calls tools natively (default yes). A
    /// model that does not is offered tools composed into one
    /// structured-output schema by an agent in `CallMode::Auto`.
    pub fn with_native_tool_calls(mut self, native: bool) -> Self {
        self.native_tools = native;
        self
    }

    /// Extra top-level fields of every request body, for vendor options
    /// (`seed`, `top_k`, `max_completion_tokens`, ...). They are merged last,
    /// so they replace the adapter's own fields of the same name, except
    /// `stream`, which stays `true`.
    pub fn with_extra_body(mut self, extra: Map<String, Value>) -> Self {
        self.extra_body = extra;
        self
    }

    /// The model name sent in requests.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The base URL, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The JSON body of a streaming request for `request`: what
    /// [`ChatModel::stream`] sends.
    pub fn request_body(&self, request: &ChatRequest) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.model.clone()));
        body.insert(
            "messages".into(),
            Value::Array(messages_json(&request.messages)),
        );
        body.insert("stream".into(), Value::Bool(true));
        body.insert("stream_options".into(), json!({ "include_usage": true }));
        if !request.tools.is_empty() {
            let tools: Vec<ChatTool<'_>> = request.tools.iter().map(ChatTool::from).collect();
            // Plain structs of strings and JSON values: serializing them
            // cannot fail.
            body.insert("tools".into(), json!(tools));
            body.insert("tool_choice".into(), tool_choice_json(&request.tool_choice));
            body.insert(
                "parallel_tool_calls".into(),
                Value::Bool(request.parallel_tool_calls),
            );
        }
        if let Some(format) = &request.response_format {
            let response_format = match self.structured_output {
                StructuredOutput::JsonSchema => json!({
                    "type": "json_schema",
                    "json_schema": {
                        "name": format.name,
                        "schema": format.schema.as_ref(),
                        "strict": format.strict,
                    }
                }),
                StructuredOutput::JsonObjectSchema => json!({
                    "type": "json_object",
                    "schema": format.schema.as_ref(),
                }),
            };
            body.insert("response_format".into(), response_format);
        }
        if let Some(max_tokens) = request.max_tokens {
            body.insert("max_tokens".into(), Value::from(max_tokens));
        }
        if let Some(temperature) = request.temperature.and_then(temperature_json) {
            body.insert("temperature".into(), temperature);
        }
        for (key, value) in &self.extra_body {
            body.insert(key.clone(), value.clone());
        }
        body.insert("stream".into(), Value::Bool(true));
        Value::Object(body)
    }

    fn client(&self) -> Result<reqwest::Client, ModelError> {
        self.client
            .get_or_init(|| http::client(&self.policy))
            .clone()
    }

    fn endpoint(&self) -> Result<String, ModelError> {
        check_base_url(&self.base_url)
            .map_err(|reason| ModelError::Config(format!("the base URL {reason}")))?;
        Ok(format!("{}/chat/completions", self.base_url))
    }

    fn headers(&self) -> Result<Vec<(&'static str, String)>, ModelError> {
        let mut headers = vec![("accept", "text/event-stream".to_owned())];
        if let Some(key) = self.api_key.as_deref().map(str::trim)
            && !key.is_empty()
        {
            if !key.bytes().all(|byte| byte.is_ascii_graphic()) {
                return Err(ModelError::Config(
                    "the API key contains characters an HTTP header cannot carry".into(),
                ));
            }
            headers.push(("authorization", format!("Bearer {key}")));
        }
        Ok(headers)
    }
}

impl ChatModel for OpenAiChat {
    fn model_name(&self) -> Option<&str> {
        Some(self.model())
    }

    fn calls_tools_natively(&self) -> bool {
        self.native_tools
    }

    fn dialect(&self) -> Dialect {
        if self.strict {
            Dialect::OpenAiStrict
        } else {
            Dialect::OpenAiCompatible
        }
    }

    fn stream<'a>(&'a self, request: &'a ChatRequest) -> ModelStream<'a> {
        let span = tracing::debug_span!(
            "openai_chat",
            model = %self.model,
            base_url = %self.base_url,
        );
        let prepared = self
            .client()
            .and_then(|client| Ok((client, self.endpoint()?, self.headers()?)));
        let body = self.request_body(request);
        let policy = &self.policy;
        let opened = async move {
            let (client, url, headers) = prepared?;
            tracing::debug!(
                messages = request.messages.len(),
                tools = request.tools.len(),
                "requesting a chat completion"
            );
            http::post_sse(&client, &url, &headers, &body, policy).await
        }
        .instrument(span.clone());
        Box::pin(stream::once(opened).flat_map(move |opened| match opened {
            Ok(events) => decode(events, span.clone()).left_stream(),
            Err(error) => {
                span.in_scope(|| tracing::debug!(%error, "chat completion request failed"));
                stream::iter([Err(error)]).right_stream()
            }
        }))
    }
}

/// Why `url` cannot be a base URL, if it cannot.
fn check_base_url(url: &str) -> Result<(), String> {
    match reqwest::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => Ok(()),
        Ok(parsed) => Err(format!(
            "must be an http or https URL, not {}: {url}",
            parsed.scheme()
        )),
        Err(error) => Err(format!("is not a URL ({error}): {url}")),
    }
}

/// The transcript in Chat Completions form.
///
/// Tool messages carry text only, so what tools attached for the model
/// (images, documents) follows the turn's tool messages as one user
/// message: a text part naming each call, then its attachments as
/// `image_url` (a `data:` URL), `file` (PDF) or `input_audio` (WAV, MP3)
/// parts. The turn's tool messages stay together right after the assistant
/// message, as the API requires; the user message comes after all of them.
fn messages_json(transcript: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(transcript.len());
    let mut attached: Vec<Value> = Vec::new();
    for message in transcript {
        if !matches!(message, Message::Tool { .. }) && !attached.is_empty() {
            out.push(attachments_message(std::mem::take(&mut attached)));
        }
        if let Message::Tool {
            tool_call_id,
            name,
            attachments,
            ..
        } = message
            && !attachments.is_empty()
        {
            attached.push(json!({
                "type": "text",
                "text": format!("Attached by the `{name}` result of call {tool_call_id}:"),
            }));
            attached.extend(
                attachments
                    .iter()
                    .filter(|content| !is_blank_text(content))
                    .map(attachment_part),
            );
        }
        out.push(message_json(message));
    }
    if !attached.is_empty() {
        out.push(attachments_message(attached));
    }
    out
}

fn attachments_message(parts: Vec<Value>) -> Value {
    json!({ "role": "user", "content": parts })
}

/// One attachment as a Chat Completions content part; what the API does not
/// take (other audio, other files) as a text part saying it was left out.
fn attachment_part(content: &Content) -> Value {
    match classify(content) {
        Attachment::Text(text) => json!({ "type": "text", "text": text }),
        Attachment::Image { data, mime_type } => json!({
            "type": "image_url",
            "image_url": { "url": data_url(mime_type, data) },
        }),
        Attachment::Audio { data, mime_type } if audio_format(mime_type).is_some() => json!({
            "type": "input_audio",
            "input_audio": { "data": data, "format": audio_format(mime_type) },
        }),
        Attachment::TextDocument { uri, text } => {
            json!({ "type": "text", "text": format!("{uri}:\n{text}") })
        }
        Attachment::Pdf { uri, data } => json!({
            "type": "file",
            "file": {
                "filename": uri.rsplit('/').next().unwrap_or(uri),
                "file_data": data_url("application/pdf", data),
            },
        }),
        Attachment::Audio { .. } | Attachment::Other => {
            json!({ "type": "text", "text": left_out(content, "this API") })
        }
    }
}

/// The `input_audio` format of an audio media type, when the API takes it.
fn audio_format(mime_type: &str) -> Option<&'static str> {
    match mime_type {
        "audio/wav" | "audio/x-wav" | "audio/wave" => Some("wav"),
        "audio/mpeg" | "audio/mp3" => Some("mp3"),
        _ => None,
    }
}

/// One transcript message in Chat Completions form.
fn message_json(message: &Message) -> Value {
    match message {
        Message::System { content } => json!({ "role": "system", "content": content }),
        Message::User { content } => json!({ "role": "user", "content": content }),
        // Thinking and server blocks are Anthropic's; Chat Completions has
        // no place for them.
        Message::Assistant {
            content,
            tool_calls,
            thinking: _,
            server_blocks: _,
            runnable: _,
        } => {
            // `content` is always a string: llama.cpp rejects `null`, and
            // OpenAI accepts "" beside tool calls.
            let mut object = Map::new();
            object.insert("role".into(), Value::from("assistant"));
            object.insert("content".into(), Value::from(content.as_str()));
            if !tool_calls.is_empty() {
                let calls = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": { "name": call.name, "arguments": call.arguments },
                        })
                    })
                    .collect();
                object.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(object)
        }
        Message::Tool {
            tool_call_id,
            content,
            ..
        } => json!({ "role": "tool", "tool_call_id": tool_call_id, "content": content }),
    }
}

/// A tool in a Chat Completions request:
/// `{"type":"function","function":{name, description, parameters[, strict]}}`.
#[derive(Debug, Serialize)]
struct ChatTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

/// The function a [`ChatTool`] offers.
#[derive(Debug, Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
    /// `true` exactly when the parameters are in strict mode's dialect:
    /// strict mode refuses any other schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    strict: Option<bool>,
}

impl<'a> From<&'a ToolSpec> for ChatTool<'a> {
    fn from(spec: &'a ToolSpec) -> Self {
        ChatTool {
            kind: "function",
            function: Function {
                name: &spec.name,
                description: &spec.description,
                parameters: &spec.parameters,
                strict: (spec.dialect == Dialect::OpenAiStrict).then_some(true),
            },
        }
    }
}

fn tool_choice_json(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool(name) => json!({ "type": "function", "function": { "name": name } }),
    }
}

/// The temperature as the decimal the caller wrote: `0.7f32` widened to
/// `f64` would be sent as `0.699999988079071`. `None` for NaN or infinity.
fn temperature_json(temperature: f32) -> Option<Value> {
    let decimal = temperature.to_string().parse::<f64>().ok()?;
    Number::from_f64(decimal).map(Value::Number)
}

/// Turns the response's events into model events, ending after the first
/// `Finish` or error.
fn decode<S>(
    events: S,
    span: tracing::Span,
) -> impl Stream<Item = Result<ModelEvent, ModelError>> + Send
where
    S: Stream<Item = Result<SseEvent, ModelError>> + Send,
{
    let state = (Box::pin(events), ChunkDecoder::default(), false);
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
struct Step {
    events: Vec<Result<ModelEvent, ModelError>>,
    /// Whether the turn is over (finished or failed).
    ended: bool,
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
struct ChunkDecoder {
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
    saw_tool_call: bool,
}

impl ChunkDecoder {
    /// Decodes the data of one SSE event.
    fn on_data(&mut self, data: &str) -> Step {
        let data = data.trim();
        if data.is_empty() {
            return Step::more(Vec::new());
        }
        if data == "[DONE]" {
            let reason = self.finish_reason.take().unwrap_or(if self.saw_tool_call {
                FinishReason::ToolCalls
            } else {
                FinishReason::Stop
            });
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
            self.usage = Some(Usage {
                input_tokens: tokens("prompt_tokens"),
                output_tokens: tokens("completion_tokens"),
            });
        }
        Step::more(events)
    }

    fn read_delta(
        &mut self,
        delta: &Map<String, Value>,
        events: &mut Vec<Result<ModelEvent, ModelError>>,
    ) {
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
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
    fn on_end(&mut self) -> Step {
        let last = match self.finish_reason.take() {
            Some(reason) => Ok(self.finish(reason)),
            None => Err(ModelError::Incomplete),
        };
        Step::end(Vec::new(), last)
    }

    fn finish(&mut self, reason: FinishReason) -> ModelEvent {
        ModelEvent::Finish {
            reason,
            usage: self.usage.take(),
        }
    }
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
        other => FinishReason::Other(other.to_owned()),
    }
}

/// The provider's message from an `error` value: OpenAI's
/// `{"message", "type", "code"}`, a bare string, or whatever else it is.
fn provider_error(error: &Value) -> String {
    match error {
        Value::String(message) => message.clone(),
        Value::Object(object) => {
            let message = object
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| quote(&error.to_string()), str::to_owned);
            let details: Vec<String> = ["type", "code"]
                .iter()
                .filter_map(|key| match object.get(*key) {
                    Some(Value::String(text)) => Some(format!("{key} {text}")),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::AssistantToolCall;

    #[test]
    fn every_kind_of_attachment_has_a_part_or_a_note_after_the_turns_tool_messages() {
        let tool = |id: &str, attachments: Vec<Content>| Message::Tool {
            tool_call_id: id.into(),
            name: "report".into(),
            content: "{}".into(),
            is_error: false,
            attachments,
        };
        let transcript = [
            Message::assistant(
                "",
                vec![
                    AssistantToolCall {
                        id: "a".into(),
                        name: "report".into(),
                        arguments: "{}".into(),
                    },
                    AssistantToolCall {
                        id: "b".into(),
                        name: "report".into(),
                        arguments: "{}".into(),
                    },
                ],
            ),
            tool(
                "a",
                vec![
                    Content::text("Caption"),
                    Content::text(""),
                    Content::image("AAAA", "image/png"),
                    Content::image("TTTT", "image/tiff"),
                    Content::audio("CCCC", "audio/mpeg"),
                    Content::audio("GGGG", "audio/ogg"),
                ],
            ),
            tool(
                "b",
                vec![
                    Content::resource("file:///notes.txt", "text/plain", "Notes"),
                    Content::resource_blob("file:///a/report.pdf", "application/pdf", "DDDD"),
                    Content::resource_blob("file:///b.jpg", "image/jpeg", "EEEE"),
                    Content::resource_blob("file:///c.bin", "application/octet-stream", "FFFF"),
                ],
            ),
            Message::user("Thanks."),
        ];
        let lowered = messages_json(&transcript);
        let roles: Vec<&str> = lowered
            .iter()
            .map(|m| m["role"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(roles, ["assistant", "tool", "tool", "user", "user"]);
        assert_eq!(lowered[1]["content"], "{}");
        assert_eq!(
            lowered[3]["content"],
            json!([
                { "type": "text", "text": "Attached by the `report` result of call a:" },
                { "type": "text", "text": "Caption" },
                { "type": "image_url", "image_url": { "url": "data:image/png;base64,AAAA" } },
                { "type": "text", "text": "[The tool attached an image (image/tiff), which this API does not accept; it was left out.]" },
                { "type": "input_audio", "input_audio": { "data": "CCCC", "format": "mp3" } },
                { "type": "text", "text": "[The tool attached an audio clip (audio/ogg), which this API does not accept; it was left out.]" },
                { "type": "text", "text": "Attached by the `report` result of call b:" },
                { "type": "text", "text": "file:///notes.txt:\nNotes" },
                { "type": "file", "file": { "filename": "report.pdf", "file_data": "data:application/pdf;base64,DDDD" } },
                { "type": "image_url", "image_url": { "url": "data:image/jpeg;base64,EEEE" } },
                { "type": "text", "text": "[The tool attached the resource file:///c.bin (application/octet-stream), which this API does not accept; it was left out.]" },
            ])
        );
        assert_eq!(lowered[4], json!({ "role": "user", "content": "Thanks." }));
    }

    fn decode_all(lines: &[&str]) -> Vec<Result<ModelEvent, ModelError>> {
        let mut decoder = ChunkDecoder::default();
        let mut out = Vec::new();
        for line in lines {
            let step = decoder.on_data(line);
            out.extend(step.events);
            if step.ended {
                return out;
            }
        }
        out.extend(decoder.on_end().events);
        out
    }

    fn request(messages: Vec<Message>, tools: Vec<ToolSpec>) -> ChatRequest {
        ChatRequest {
            messages,
            tools: tools.into(),
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: true,
            max_tokens: None,
            temperature: None,
            response_format: None,
            deferred_tools: None,
        }
    }

    #[test]
    fn text_then_finish_with_usage_at_done() {
        let events = decode_all(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],"usage":null}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#,
            "[DONE]",
        ]);
        assert_eq!(
            events,
            vec![
                Ok(ModelEvent::TextDelta("Hi".into())),
                Ok(ModelEvent::Finish {
                    reason: FinishReason::Stop,
                    usage: Some(Usage {
                        input_tokens: 3,
                        output_tokens: 1
                    }),
                }),
            ]
        );
    }

    #[test]
    fn odd_fields_are_ignored_and_a_missing_index_is_the_position() {
        let events = decode_all(&[
            r#"{"choices":[{"delta":{"content":5,"tool_calls":[{"id":"a","function":{"name":"x","arguments":{"k":1}}},7,{"index":"z"}]}}]}"#,
            r#"{"choices":"nope","usage":[1]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"function_call"}]}"#,
        ]);
        assert_eq!(
            events,
            vec![
                Ok(ModelEvent::ToolCallDelta(ToolCallDelta {
                    index: 0,
                    id: Some("a".into()),
                    name: Some("x".into()),
                    arguments: "{\"k\":1}".into(),
                })),
                Ok(ModelEvent::Finish {
                    reason: FinishReason::ToolCalls,
                    usage: None
                }),
            ]
        );
    }

    #[test]
    fn a_legacy_function_call_beside_tool_calls_is_not_counted_twice() {
        // llama.cpp's server sends every piece in both fields.
        let events = decode_all(&[
            r#"{"choices":[{"index":0,"delta":{"function_call":{"name":"x","arguments":"{"},"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"x","arguments":"{"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"function_call":{"name":"x","arguments":"}"},"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"x","arguments":"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ]);
        let arguments: String = events
            .iter()
            .filter_map(|event| match event {
                Ok(ModelEvent::ToolCallDelta(delta)) => Some(delta.arguments.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(arguments, "{}");
    }

    #[test]
    fn done_without_a_finish_reason_infers_one() {
        let events = decode_all(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"x"}}]}}]}"#,
            "[DONE]",
        ]);
        assert!(matches!(
            events.last(),
            Some(Ok(ModelEvent::Finish {
                reason: FinishReason::ToolCalls,
                ..
            }))
        ));
        assert_eq!(
            decode_all(&["[DONE]"]),
            vec![Ok(ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: None
            })]
        );
    }

    #[test]
    fn errors_end_the_stream() {
        assert!(matches!(
            decode_all(&["{not json", "[DONE]"]).as_slice(),
            [Err(ModelError::Protocol(_))]
        ));
        assert!(matches!(
            decode_all(&["[1,2]"]).as_slice(),
            [Err(ModelError::Protocol(_))]
        ));
        assert_eq!(
            decode_all(&[r#"{"error":{"message":"overloaded","type":"server_error","code":529}}"#]),
            vec![Err(ModelError::Protocol(
                "the provider reported an error: overloaded (type server_error, code 529)".into()
            ))]
        );
        assert_eq!(
            decode_all(&[r#"{"choices":[{"index":0,"delta":{"content":"x"}}]}"#]),
            vec![
                Ok(ModelEvent::TextDelta("x".into())),
                Err(ModelError::Incomplete)
            ]
        );
    }

    #[test]
    fn assistant_content_is_never_null_and_tools_are_wrapped() {
        let model = OpenAiChat::new("m");
        let body = model.request_body(&request(
            vec![
                Message::assistant(
                    "",
                    vec![AssistantToolCall {
                        id: "c".into(),
                        name: "x".into(),
                        arguments: "{}".into(),
                    }],
                ),
                Message::assistant("done", Vec::new()),
            ],
            vec![ToolSpec {
                name: "x".into(),
                description: "d".into(),
                parameters: json!({"type":"object"}),
                dialect: model.dialect(),
            }],
        ));
        assert_eq!(body["messages"][0]["content"], json!(""));
        assert_eq!(body["messages"][1].get("tool_calls"), None);
        assert_eq!(
            body["tools"][0],
            json!({"type":"function","function":{"name":"x","description":"d","parameters":{"type":"object"},"strict":true}})
        );
    }

    #[test]
    fn thinking_blocks_are_never_sent() {
        let model = OpenAiChat::new("m");
        let body = model.request_body(&request(
            vec![
                Message::user("hi"),
                Message::Assistant {
                    content: "Checking.".into(),
                    server_blocks: Vec::new(),
                    runnable: None,
                    tool_calls: vec![AssistantToolCall {
                        id: "c".into(),
                        name: "x".into(),
                        arguments: "{}".into(),
                    }],
                    thinking: vec![
                        crate::transcript::ThinkingBlock::Thinking {
                            thinking: "secret reasoning".into(),
                            signature: "sig-value".into(),
                        },
                        crate::transcript::ThinkingBlock::RedactedThinking {
                            data: "redacted-data".into(),
                        },
                    ],
                },
            ],
            Vec::new(),
        ));
        let text = body.to_string();
        for needle in ["thinking", "secret reasoning", "sig-value", "redacted-data"] {
            assert!(!text.contains(needle), "`{needle}` in {text}");
        }
        assert_eq!(
            body["messages"][1],
            json!({
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [{
                    "id": "c",
                    "type": "function",
                    "function": { "name": "x", "arguments": "{}" },
                }],
            })
        );
    }

    #[test]
    fn temperature_is_sent_as_written() {
        assert_eq!(temperature_json(0.7), Some(json!(0.7)));
        assert_eq!(temperature_json(f32::NAN), None);
    }

    #[test]
    fn base_urls_are_checked() {
        assert!(check_base_url("http://127.0.0.1:8080/v1").is_ok());
        assert!(check_base_url("ftp://example.com").is_err());
        assert!(check_base_url("localhost:8080").is_err());
        assert!(
            OpenAiChat::from_vars(|name| (name == "OPENAI_BASE_URL").then(|| "nope".to_owned()))
                .is_err()
        );
    }

    proptest::proptest! {
        #[test]
        fn any_data_line_decodes_without_panicking(lines in proptest::collection::vec(".{0,80}", 0..6)) {
            let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
            let _ = decode_all(&lines);
        }

        #[test]
        fn any_json_chunk_decodes_without_panicking(
            content in proptest::option::of(".{0,10}"),
            index in proptest::num::i64::ANY,
            reason in proptest::option::of("[a-z_]{0,12}"),
            tokens in proptest::num::i64::ANY,
        ) {
            let chunk = json!({
                "choices": [{
                    "index": 0,
                    "delta": {
                        "content": content,
                        "tool_calls": [{"index": index, "id": content, "function": {"arguments": content}}]
                    },
                    "finish_reason": reason,
                }],
                "usage": {"prompt_tokens": tokens, "completion_tokens": -1.5},
            });
            let _ = decode_all(&[&chunk.to_string(), "[DONE]"]);
        }
    }
}
