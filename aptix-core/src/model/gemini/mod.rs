//! Google's Gemini API, natively: `streamGenerateContent` over HTTP.
//!
//! [`Gemini`] turns a [`ChatRequest`] into one
//! `POST {base}/models/{model}:streamGenerateContent?alt=sse` (the key in
//! the `x-goog-api-key` header) and translates the answer's Server-Sent
//! Events into [`ModelEvent`]s. Each event's data is one
//! `GenerateContentResponse`: a candidate whose `content.parts` hold the
//! new text, thoughts and function calls, and, on the last chunk, its
//! `finishReason` and the turn's `usageMetadata`. Like every adapter it
//! only *emits*; the calls are assembled by
//! [`super::adapter::TurnAssembler`].
//!
//! What each piece of a chunk becomes:
//!
//! | wire | becomes |
//! | --- | --- |
//! | part `{"text"}` | `TextDelta` |
//! | part `{"text", "thought": true}` | `ThinkingDelta::Preview` (its text), then `ThinkingDelta::Block` holding the part whole ([`ThinkingBlock::Gemini`], no call id) |
//! | part `{"functionCall": {name, args, id?}}` | one `ToolCallDelta` with the id (Gemini's, or one made here for the turn), the name and the whole `args` as JSON text: Gemini sends each call whole; several in a turn are parallel calls |
//! | `thoughtSignature` on a function call's part | `ThinkingDelta::Block` of `{"thoughtSignature"}` with that call's id, sent back on that call's part |
//! | `thoughtSignature` on a text part | `ThinkingDelta::Block` of `{"thoughtSignature"}` without a call id, sent back on the turn's text part |
//! | part `executableCode` / `codeExecutionResult` (code execution), `toolCall` / `toolResponse` (a server-side tool) | `ServerBlock` (the part whole, sent back with the turn) and `Hosted` `Called` / `Finished` for display |
//! | candidate `groundingMetadata` (Google Search) | at the end of the turn, `Hosted` `Called` (its `webSearchQueries`) and `Finished` (its `groundingChunks`): shown, not kept, as Gemini takes no grounding back |
//! | other parts (`inlineData`, ...), unknown fields | nothing |
//! | `finishReason` | the one `Finish`: `STOP` → `Stop` (`ToolCalls` when the turn called functions), `MAX_TOKENS` → `Length`, `SAFETY` / `RECITATION` / `BLOCKLIST` / `PROHIBITED_CONTENT` / `SPII` / `IMAGE_SAFETY` → `ContentFilter`, anything else (`MALFORMED_FUNCTION_CALL`, ...) → `Other`; reading stops here |
//! | `usageMetadata` | the `Finish`'s usage: `promptTokenCount` in, `candidatesTokenCount` + `thoughtsTokenCount` out, `cachedContentTokenCount` read from the cache |
//! | `promptFeedback.blockReason` | `Finish` with `ContentFilter` |
//! | `{"error": {code, message, status}}` in the stream | `Err(ModelError::Protocol)` with the status and message |
//!
//! An error status (`400`, `429`, ...) comes back as
//! [`ModelError::Http`] with the start of Google's
//! error body; `429` and `5xx` are retried before the first byte. A stream
//! that ends without a `finishReason` yields [`ModelError::Incomplete`],
//! never a `Finish`; one that sends more than 1000 chunks in a row without
//! content (nothing downstream would count them) ends with
//! [`ModelError::Protocol`].
//!
//! Provider tools: an `executor = provider` tool is sent as Gemini's own
//! tool of its name, and [`Gemini::hosted_tool`] adds or overrides names.
//!
//! | catalog name | sent as |
//! | --- | --- |
//! | `google_search`, `web_search` | `{"googleSearch":{}}` |
//! | `code_execution` | `{"codeExecution":{}}` |
//! | `url_context` | `{"urlContext":{}}` |
//!
//! [`ModelEvent`]: super::ModelEvent
//! [`ThinkingBlock::Gemini`]: crate::transcript::ThinkingBlock::Gemini

mod request;
mod stream;

use std::sync::OnceLock;

use serde_json::{Value, json};

use super::event_stream::SseStream;
use super::http::{self, HttpPolicy};
use super::{ChatModel, ChatRequest, ModelError, ModelStream};
use crate::schema::Dialect;

/// The endpoint used when none is configured.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";
/// The model [`Gemini::from_env`] uses when `GEMINI_MODEL` is unset.
pub const DEFAULT_MODEL: &str = "gemini-2.5-flash";

/// Whether and how much the model thinks ([`Gemini::with_thinking`]). The
/// request asks for the thoughts too (`includeThoughts: true`), so they
/// are shown as they stream; their parts and every thought signature are
/// kept in the transcript and sent back unchanged, as Gemini requires
/// across function calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Thinking {
    /// `thinkingBudget`: at most this many thinking tokens (Gemini 2.5;
    /// `0` turns thinking off where the model allows it).
    Budget(u32),
    /// `thinkingBudget: -1`: the model decides how much (Gemini 2.5).
    Dynamic,
    /// `thinkingLevel` (Gemini 3 and later).
    Level(ThinkingLevel),
}

/// How hard a Gemini 3 model thinks (`thinkingConfig.thinkingLevel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ThinkingLevel {
    /// As little as the model allows.
    Minimal,
    /// Little thinking: faster and cheaper.
    Low,
    /// Some thinking.
    Medium,
    /// Deep thinking (Gemini 3's default).
    High,
}

impl ThinkingLevel {
    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
        }
    }
}

impl Thinking {
    /// The `generationConfig.thinkingConfig` object.
    fn config(self) -> Value {
        match self {
            Thinking::Budget(budget) => {
                json!({ "includeThoughts": true, "thinkingBudget": budget })
            }
            Thinking::Dynamic => json!({ "includeThoughts": true, "thinkingBudget": -1 }),
            Thinking::Level(level) => {
                json!({ "includeThoughts": true, "thinkingLevel": level.as_str() })
            }
        }
    }
}

/// Gemini's own tools by the catalog names that map to them.
const BUILT_IN_TOOLS: [(&str, &str); 4] = [
    ("google_search", "googleSearch"),
    ("web_search", "googleSearch"),
    ("code_execution", "codeExecution"),
    ("url_context", "urlContext"),
];

/// A [`ChatModel`] backed by Google's Gemini API (`generateContent`,
/// streamed).
///
/// ```no_run
/// use aptix_core::model::gemini::{Gemini, Thinking, ThinkingLevel};
///
/// // From GEMINI_API_KEY (or GOOGLE_API_KEY), GEMINI_BASE_URL, GEMINI_MODEL:
/// let model = Gemini::from_env()?.with_thinking(Thinking::Level(ThinkingLevel::Low));
/// # Ok::<(), aptix_core::model::ModelError>(())
/// ```
///
/// `Debug` never shows the API key.
#[derive(Clone)]
pub struct Gemini {
    model: String,
    api_key: String,
    base_url: String,
    policy: HttpPolicy,
    max_output_tokens: Option<u32>,
    thinking: Option<Thinking>,
    /// Provider tools added or overridden with [`Gemini::hosted_tool`]:
    /// catalog name and the exact tool object sent.
    hosted: Vec<(String, Value)>,
    /// Built on first use with the policy's connect timeout, then shared so
    /// that requests reuse connections.
    client: OnceLock<reqwest::Client>,
}

impl std::fmt::Debug for Gemini {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gemini")
            .field("model", &self.model)
            .field("api_key", &"[redacted]")
            .field("base_url", &self.base_url)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("thinking", &self.thinking)
            .field("hosted", &self.hosted)
            .field("policy", &self.policy)
            .finish()
    }
}

impl Gemini {
    /// An adapter for `model` (`gemini-2.5-flash`, `gemini-3-pro-preview`,
    /// ...) on the public endpoint.
    pub fn new(model: impl Into<String>, api_key: impl Into<String>) -> Self {
        Gemini {
            model: model.into(),
            api_key: api_key.into(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            policy: HttpPolicy::default(),
            max_output_tokens: None,
            thinking: None,
            hosted: Vec::new(),
            client: OnceLock::new(),
        }
    }

    /// An adapter configured from the environment: `GEMINI_API_KEY` or
    /// else `GOOGLE_API_KEY` (one is required), `GEMINI_BASE_URL` (default
    /// [`DEFAULT_BASE_URL`]) and `GEMINI_MODEL` (default [`DEFAULT_MODEL`]).
    /// Empty values count as unset.
    pub fn from_env() -> Result<Self, ModelError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Like [`Gemini::from_env`], reading variables through `lookup`
    /// instead of the process environment (tests, config files).
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ModelError> {
        let get = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let api_key = get("GEMINI_API_KEY")
            .or_else(|| get("GOOGLE_API_KEY"))
            .ok_or_else(|| {
                ModelError::Config("neither GEMINI_API_KEY nor GOOGLE_API_KEY is set".into())
            })?;
        let model = get("GEMINI_MODEL").unwrap_or_else(|| DEFAULT_MODEL.to_owned());
        let mut adapter = Self::new(model.trim(), api_key.trim());
        if let Some(base_url) = get("GEMINI_BASE_URL") {
            adapter = adapter.with_base_url(base_url.trim());
        }
        Ok(adapter)
    }

    /// Sends requests to `base_url` (scheme, host and API version path,
    /// like [`DEFAULT_BASE_URL`]; `/models/{model}:streamGenerateContent`
    /// is appended) instead of the public endpoint.
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

    /// The `generationConfig.maxOutputTokens` sent when the request does
    /// not set its own (unset: the model's own limit). Thinking tokens
    /// count against it.
    pub fn with_max_output_tokens(mut self, max_output_tokens: u32) -> Self {
        self.max_output_tokens = Some(max_output_tokens);
        self
    }

    /// Sets the model's thinking ([`Thinking`]) and asks for its thoughts
    /// (`generationConfig.thinkingConfig` with `includeThoughts: true`).
    /// Without it the model thinks as it does by default, and its thought
    /// signatures are kept and sent back all the same.
    pub fn with_thinking(mut self, thinking: Thinking) -> Self {
        self.thinking = Some(thinking);
        self
    }

    /// Sends the `executor = provider` tool `name` as exactly `wire` (one
    /// entry of Gemini's `tools` array, e.g.
    /// `json!({"googleSearch": {"timeRangeFilter": {…}}})`), adding a name
    /// or overriding a built-in one; [`ChatModel::hosts_tool`] is then true
    /// for it.
    pub fn hosted_tool(mut self, name: impl Into<String>, wire: Value) -> Self {
        let name = name.into();
        self.hosted.retain(|(held, _)| *held != name);
        self.hosted.push((name, wire));
        self
    }

    /// The model name sent with every request.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The full URL requests are posted to. A model name with a `/` is a
    /// resource path of its own (`tunedModels/my-model`,
    /// `models/gemini-2.5-flash`) and is used as it is; any other is under
    /// `models/`.
    pub fn endpoint(&self) -> String {
        let path = if self.model.contains('/') {
            self.model.clone()
        } else {
            format!("models/{}", self.model)
        };
        format!("{}/{path}:streamGenerateContent?alt=sse", self.base_url)
    }

    /// The tool object sent for the provider tool `name`, if it hosts one.
    pub(crate) fn hosted_wire(&self, name: &str) -> Option<Value> {
        if let Some((_, wire)) = self.hosted.iter().find(|(held, _)| held == name) {
            return Some(wire.clone());
        }
        BUILT_IN_TOOLS
            .iter()
            .find(|(held, _)| *held == name)
            .map(|(_, key)| json!({ *key: {} }))
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

    async fn connect(&self, body: Value) -> Result<SseStream, ModelError> {
        let url = self.endpoint();
        reqwest::Url::parse(&url)
            .map_err(|error| ModelError::Config(format!("bad base URL `{url}`: {error}")))?;
        // The name becomes part of the URL's path: nothing in it may end
        // the path or climb out of it.
        let bad = self.model.is_empty()
            || self.model.contains(['?', '#', '%', '\\'])
            || self.model.chars().any(char::is_whitespace)
            || self
                .model
                .split('/')
                .any(|segment| segment.is_empty() || segment == "..");
        if bad {
            return Err(ModelError::Config(format!(
                "`{}` is not a Gemini model name",
                self.model
            )));
        }
        let client = self.client()?;
        let headers = [
            ("x-goog-api-key", self.api_key.clone()),
            ("accept", "text/event-stream".to_owned()),
        ];
        let events = http::post_sse(&client, &url, &headers, &body, &self.policy).await?;
        Ok(Box::pin(events))
    }
}

impl ChatModel for Gemini {
    fn model_name(&self) -> Option<&str> {
        Some(self.model())
    }

    fn dialect(&self) -> Dialect {
        Dialect::Gemini
    }

    fn hosts_tool(&self, name: &str) -> bool {
        self.hosted_wire(name).is_some()
    }

    fn stream<'a>(&'a self, request: &'a ChatRequest) -> ModelStream<'a> {
        let span = tracing::debug_span!("gemini.stream_generate_content", model = %self.model);
        let body = self.request_body(request);
        tracing::debug!(
            parent: &span,
            messages = request.messages.len(),
            tools = request.tools.len(),
            "starting a model call"
        );
        let connect = self.connect(body);
        let decoder = stream::Decoder::new(stream::HostedNames::of(self, request));
        Box::pin(super::event_stream::model_events(connect, decoder, span))
    }
}

#[cfg(test)]
mod tests;
