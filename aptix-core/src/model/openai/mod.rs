//! The OpenAI-compatible Chat Completions adapter: OpenAI itself, and the
//! many servers that speak its wire format (llama.cpp, vLLM, Ollama, LM
//! Studio, proxies).
//!
//! The adapter only translates. It turns a [`ChatRequest`] into a
//! `POST {base}/chat/completions` body with `stream: true`, and each streamed
//! chunk into [`ModelEvent`]s: text deltas, tool-call deltas exactly as they
//! arrive (per `index`, arguments unparsed), and one final
//! [`ModelEvent::Finish`]. Tool calls are assembled in one place for every
//! provider, [`super::adapter::TurnAssembler`]; nothing here parses arguments.
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
//!
//! What each piece of a chunk becomes:
//!
//! | wire | becomes |
//! | --- | --- |
//! | `delta.content` | `TextDelta` |
//! | `delta.reasoning_content` (DeepSeek, vLLM, llama.cpp, Kimi) or `delta.reasoning` (Ollama, OpenRouter, newer vLLM) | `ThinkingDelta::Reasoning { index: 0, text }`, kept as [`ThinkingBlock::Reasoning`] |
//! | `delta.tool_calls[]` (or the older `delta.function_call`) | `ToolCallDelta` per `index` |
//! | `choices[0].finish_reason` | remembered for the `Finish` |
//! | `usage` (`prompt_tokens`, `completion_tokens`, `prompt_tokens_details.cached_tokens` or DeepSeek's `prompt_cache_hit_tokens`) | the `Finish`'s [`Usage`](super::Usage), cached tokens as `cache_read_tokens` |
//! | `error` | [`ModelError::Protocol`] with the provider's message |
//! | `[DONE]` | the `Finish` |
//!
//! Reasoning goes back as the servers require it ([`ReasoningEcho`]): by
//! default, on the assistant messages of every user turn in which the model
//! called a tool, in the field [`ReasoningField`] names. Other providers'
//! [`ThinkingBlock`] kinds are never sent.
//!
//! A server that cannot stream tool calls (llama.cpp's server before it
//! streamed them, llama-cpp-python's `chatml-function-calling` format,
//! Ollama models without tool support, vLLM without
//! `--enable-auto-tool-choice`) shows it in one of three ways: an error
//! status whose body says tools are not supported there (`Cannot use tools
//! with stream`, `Automatic streaming tool choice is not supported`, `...
//! does not support tools`; a refused schema is not that), a stream that writes the call as text and ends without a
//! `finish_reason`, or a stream that ends before its first chunk. Each ends
//! the turn with an error that names the cause and the fix: offer the tools as one structured-output schema, with
//! `AgentBuilder::call_mode(CallMode::Composed)`, or
//! [`OpenAiChat::with_native_tool_calls`]`(false)` (`OPENAI_NATIVE_TOOL_CALLS=false`)
//! and `CallMode::Auto`.
//!
//! [`ThinkingBlock`]: crate::transcript::ThinkingBlock
//! [`ThinkingBlock::Reasoning`]: crate::transcript::ThinkingBlock::Reasoning
//! [`ModelEvent`]: super::ModelEvent
//! [`ModelEvent::Finish`]: super::ModelEvent::Finish

mod request;
mod stream;

use std::fmt;
use std::sync::OnceLock;

use futures_util::StreamExt;
use serde_json::{Map, Value};
use tracing::Instrument;

use super::http::{self, HttpPolicy};
use super::{ChatModel, ChatRequest, ModelError, ModelStream};
use crate::schema::Dialect;
use stream::decode;

/// OpenAI's own endpoint, the default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The model [`OpenAiChat::from_env`] uses when `OPENAI_MODEL` is unset.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";

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
    /// `None`: the default rule, see [`OpenAiChat::reasoning_echo`].
    reasoning_echo: Option<ReasoningEcho>,
    reasoning_field: ReasoningField,
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
            .field("native_tools", &self.native_tools)
            .field("reasoning_echo", &self.reasoning_echo)
            .field("reasoning_field", &self.reasoning_field)
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

/// Which past assistant messages carry their reasoning back
/// ([`OpenAiChat::with_reasoning_echo`]).
///
/// Servers disagree. DeepSeek's thinking mode requires the
/// `reasoning_content` of every assistant message of a user turn in which
/// the model called a tool, in that request and every later one, and
/// answers 400 without it; it ignores the reasoning of turns without tool
/// calls (its guide "Thinking Mode", sections "Tool Calls" and "Multi-turn
/// Conversation"). Its older `deepseek-reasoner`, which called no tools,
/// refused `reasoning_content` in any input message: the default sends it
/// exactly where DeepSeek requires it, which is also where Kimi's thinking
/// models and llama.cpp's templates use it, and nowhere else. OpenAI's own
/// endpoint takes no reasoning field at all: there the default is
/// [`ReasoningEcho::Never`] ([`OpenAiChat::reasoning_echo`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ReasoningEcho {
    /// On every assistant message of a user turn (the messages between two
    /// user messages) in which the model called a tool: DeepSeek's rule.
    #[default]
    ToolTurns,
    /// On every assistant message that has reasoning.
    Always,
    /// Never: for servers that refuse the field.
    Never,
}

/// The field of an assistant message that carries its reasoning back
/// ([`OpenAiChat::with_reasoning_field`]). Either is read from the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ReasoningField {
    /// `reasoning_content`: DeepSeek, llama.cpp, vLLM, Kimi.
    #[default]
    ReasoningContent,
    /// `reasoning`: Ollama, OpenRouter.
    Reasoning,
}

impl ReasoningField {
    /// The field's name on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            ReasoningField::ReasoningContent => "reasoning_content",
            ReasoningField::Reasoning => "reasoning",
        }
    }
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
            reasoning_echo: None,
            reasoning_field: ReasoningField::default(),
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
    ///   `json_object`, see [`StructuredOutput`];
    /// * `OPENAI_NATIVE_TOOL_CALLS`: `true` (default) or `false`, see
    ///   [`OpenAiChat::with_native_tool_calls`]: `false` for a server that
    ///   cannot stream tool calls, so that an agent in `CallMode::Auto`
    ///   offers the tools as structured output instead;
    /// * `OPENAI_REASONING_FIELD`: `reasoning_content` (default) or
    ///   `reasoning`, see [`ReasoningField`].
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
        match var("OPENAI_NATIVE_TOOL_CALLS")
            .map(|value| value.to_ascii_lowercase())
            .as_deref()
        {
            None | Some("true" | "1" | "yes") => {}
            Some("false" | "0" | "no") => model = model.with_native_tool_calls(false),
            Some(other) => {
                return Err(ModelError::Config(format!(
                    "OPENAI_NATIVE_TOOL_CALLS is `{other}`; use `true` or `false`"
                )));
            }
        }
        match var("OPENAI_REASONING_FIELD").as_deref() {
            None | Some("reasoning_content") => {}
            Some("reasoning") => model = model.with_reasoning_field(ReasoningField::Reasoning),
            Some(other) => {
                return Err(ModelError::Config(format!(
                    "OPENAI_REASONING_FIELD is `{other}`; use `reasoning_content` or `reasoning`"
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
    /// structured-output schema by an agent in `CallMode::Auto`. Say `false`
    /// for a server that cannot stream tool calls (see the module
    /// documentation for how one shows it).
    pub fn with_native_tool_calls(mut self, native: bool) -> Self {
        self.native_tools = native;
        self
    }

    /// Which past assistant messages carry their reasoning
    /// ([`ThinkingBlock::Reasoning`](crate::transcript::ThinkingBlock::Reasoning))
    /// back; default [`ReasoningEcho::ToolTurns`], what DeepSeek requires,
    /// except on OpenAI's own endpoint (see [`OpenAiChat::reasoning_echo`]).
    pub fn with_reasoning_echo(mut self, echo: ReasoningEcho) -> Self {
        self.reasoning_echo = Some(echo);
        self
    }

    /// Which past assistant messages carry their reasoning back: the one
    /// set with [`OpenAiChat::with_reasoning_echo`], or by default
    /// [`ReasoningEcho::ToolTurns`], except [`ReasoningEcho::Never`] on
    /// OpenAI's own endpoint (`api.openai.com`), whose messages have no
    /// such field and which refuses fields it does not know: a transcript
    /// brought from a DeepSeek-style server must not break there.
    pub fn reasoning_echo(&self) -> ReasoningEcho {
        self.reasoning_echo.unwrap_or_else(|| {
            let host = reqwest::Url::parse(&self.base_url)
                .ok()
                .and_then(|url| url.host_str().map(str::to_owned));
            if host.as_deref() == Some("api.openai.com") {
                ReasoningEcho::Never
            } else {
                ReasoningEcho::ToolTurns
            }
        })
    }

    /// The field reasoning goes back in; default
    /// [`ReasoningField::ReasoningContent`].
    pub fn with_reasoning_field(mut self, field: ReasoningField) -> Self {
        self.reasoning_field = field;
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
            base_url = %http::shown_url(&self.base_url),
        );
        let prepared = self
            .client()
            .and_then(|client| Ok((client, self.endpoint()?, self.headers()?)));
        let body = self.request_body(request);
        let policy = &self.policy;
        let tools_offered = request.tools.iter().any(|spec| !spec.hosted);
        let opened = async move {
            let (client, url, headers) = prepared?;
            tracing::debug!(
                messages = request.messages.len(),
                tools = request.tools.len(),
                "requesting a chat completion"
            );
            http::post_sse(&client, &url, &headers, &body, policy)
                .await
                .map_err(|error| stream::explain_refusal(error, tools_offered))
        }
        .instrument(span.clone());
        Box::pin(
            futures_util::stream::once(opened).flat_map(move |opened| match opened {
                Ok(events) => decode(events, tools_offered, span.clone()).left_stream(),
                Err(error) => {
                    span.in_scope(|| tracing::debug!(%error, "chat completion request failed"));
                    futures_util::stream::iter([Err(error)]).right_stream()
                }
            }),
        )
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

#[cfg(test)]
mod tests;
