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
//! | `content_block_start` (server_tool_use, `*_tool_result`) | kept whole until its stop |
//! | `content_block_stop` | `"{}"` for a tool_use block that got no input at all; a server block whole as `ServerBlock` (with its streamed input), then, for a hosted tool's call or result, `Hosted(Called / Finished)` |
//! | `message_delta` | remembers `stop_reason` and `usage.output_tokens` |
//! | `message_stop` | the one `Finish { reason, usage }`; reading stops here |
//! | `ping`, unknown events | nothing |
//! | `error` | `Err(ModelError::Protocol)` with Anthropic's error type and message |
//!
//! A stream that ends (cleanly or not) before `message_stop` yields an
//! error, never a `Finish`: a half-received turn must not look finished.
//!
//! Usage: `input_tokens` of the `Finish` counts every token read, the
//! prompt cache's reads (`cache_read_input_tokens`, also
//! `Usage::cache_read_tokens`) and writes (`cache_creation_input_tokens`,
//! also `Usage::cache_write_tokens`) included.
//!
//! # Hosted tools
//!
//! A tool declared `executor = provider` is run by Anthropic's servers
//! ([`ChatModel::hosts_tool`] is true for these names), sent in its
//! server-tool form and never as a custom tool:
//!
//! | catalog name | sent as | beta |
//! | --- | --- | --- |
//! | `web_search` | `{"type":"web_search_20250305","name":"web_search"}` | none |
//! | `web_fetch` | `{"type":"web_fetch_20250910","name":"web_fetch"}` | [`WEB_FETCH_BETA`] |
//! | `code_execution` | `{"type":"code_execution_20250825","name":"code_execution"}` | [`CODE_EXECUTION_BETA`] |
//!
//! [`Anthropic::hosted_tool`] adds a name or replaces what is sent for one
//! (`max_uses`, `allowed_domains`, a newer version). The turn's
//! `server_tool_use` and `*_tool_result` blocks are kept whole and go back
//! with the turn; a hosted tool's call and result are also emitted as
//! [`ModelEvent::Hosted`](super::ModelEvent::Hosted) for display (never
//! the tool search's, which is Aptix's own business).
//!
//! [`ModelEvent`]: super::ModelEvent
//! [`ToolCallDelta`]: super::ToolCallDelta

mod request;
mod stream;

use std::sync::OnceLock;

use serde_json::Value;

use super::event_stream::SseStream;
use super::http::{self, HttpPolicy};
use super::{ChatModel, ChatRequest, ModelError, ModelStream};
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
/// The `anthropic-beta` a request with a fixed thinking budget carries, so
/// that the model may think again between tool calls (adaptive thinking
/// interleaves without it).
pub const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";
/// The smallest thinking budget Anthropic accepts.
pub const MIN_THINKING_BUDGET: u32 = 1024;
/// The `anthropic-beta` a request offering `code_execution_20250825`
/// carries (the SDK lists the tool as generally available; the beta is
/// still accepted and was required before).
pub const CODE_EXECUTION_BETA: &str = "code-execution-2025-08-25";
/// The `anthropic-beta` a request offering `web_fetch_20250910` carries.
pub const WEB_FETCH_BETA: &str = "web-fetch-2025-09-10";

/// Whether and how the model thinks before it answers
/// ([`Anthropic::with_thinking`]). Its thinking blocks are kept in the
/// transcript and sent back unchanged before the tool results they led
/// to, as Anthropic requires across tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Thinking {
    /// `thinking: {type: "adaptive"}`: the model decides when and how much
    /// to think, at an optional effort (`output_config.effort`). Claude
    /// 4.6 and later; the only mode Claude Opus 4.7 and later accept.
    Adaptive {
        /// How hard to think; `None` leaves it to the model.
        effort: Option<Effort>,
    },
    /// `thinking: {type: "enabled", budget_tokens}`: a fixed budget (at
    /// least [`MIN_THINKING_BUDGET`]), for Claude 4.5 and earlier (deprecated
    /// on 4.6, refused by 4.7 and later). Requests carry the interleaved
    /// thinking beta, and `max_tokens` is raised above the budget when it
    /// is not.
    Budget(u32),
}

/// The effort of adaptive thinking (`output_config.effort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Effort {
    /// Little thinking; skips it for simple requests.
    Low,
    /// Some thinking.
    Medium,
    /// Deep thinking (Anthropic's default).
    High,
    /// No limit (the models that offer it).
    Max,
}

impl Effort {
    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
            Effort::Max => "max",
        }
    }
}

/// A [`ChatModel`] backed by the Anthropic Messages API.
#[derive(Clone)]
pub struct Anthropic {
    model: String,
    api_key: String,
    base_url: String,
    policy: HttpPolicy,
    max_tokens: u32,
    thinking: Option<Thinking>,
    strict: bool,
    prompt_cache: bool,
    /// Hosted tools added or replaced with [`Anthropic::hosted_tool`], by
    /// catalog name.
    hosted: std::collections::BTreeMap<String, Value>,
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
            .field("thinking", &self.thinking)
            .field("strict", &self.strict)
            .field("prompt_cache", &self.prompt_cache)
            .field("hosted", &self.hosted)
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
            thinking: None,
            strict: false,
            prompt_cache: false,
            hosted: std::collections::BTreeMap::new(),
            client: OnceLock::new(),
        }
    }

    /// An adapter configured from the environment: `ANTHROPIC_API_KEY`
    /// (required), `ANTHROPIC_BASE_URL` (default [`DEFAULT_BASE_URL`]) and
    /// `ANTHROPIC_MODEL` (default [`DEFAULT_MODEL`]). Empty values count as
    /// unset.
    pub fn from_env() -> Result<Self, ModelError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Like [`Anthropic::from_env`], reading variables through `lookup`
    /// instead of the process environment (tests, config files).
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ModelError> {
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

    /// Turns the model's thinking on ([`Thinking`]). With thinking on,
    /// Anthropic accepts no `temperature` and only the `auto` and `none`
    /// tool choices: a request's temperature is left out, and a required
    /// or named tool choice is sent as `auto` (the agent still holds the
    /// turn's calls to the step's choice); each is logged at WARN.
    pub fn with_thinking(mut self, thinking: Thinking) -> Self {
        self.thinking = Some(match thinking {
            Thinking::Budget(budget) => Thinking::Budget(budget.max(MIN_THINKING_BUDGET)),
            adaptive => adaptive,
        });
        self
    }

    /// Strict tool use (default off): custom tools are sent with
    /// `strict: true`, and Anthropic then guarantees the model's input
    /// matches each tool's schema. Strict mode takes a subset of JSON
    /// Schema (every object `additionalProperties: false`; no numeric or
    /// string-length constraints): a tool whose schema is outside it is
    /// refused by the API with a 400. `strict` is a field of the generally
    /// available tool type: no beta header is sent.
    pub fn with_strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Prompt caching (default off): `cache_control: {"type":"ephemeral"}`
    /// on the last tool, on the system prompt, and on the last block of the
    /// last message, three of the four breakpoints Anthropic allows. Each
    /// request then reads the tools, the instructions and the conversation
    /// so far from the cache written by the one before (five minutes'
    /// lifetime), and the run's [`Usage`](super::Usage) shows the tokens
    /// read (`cache_read_tokens`) and written (`cache_write_tokens`).
    /// Prompts shorter than the model's minimum (1024 tokens for most) are
    /// not cached, without error.
    pub fn with_prompt_cache(mut self, cache: bool) -> Self {
        self.prompt_cache = cache;
        self
    }

    /// Sends `wire` for the `executor = provider` tool named `name`,
    /// instead of the built-in form (see the module documentation) or for a
    /// name there is none for: a server tool's JSON exactly as the Messages
    /// API takes it in `tools`, such as
    /// `{"type":"web_search_20250305","name":"web_search","max_uses":3}`.
    /// Its `name` is what the model's `server_tool_use` blocks will carry.
    pub fn hosted_tool(mut self, name: impl Into<String>, wire: Value) -> Self {
        self.hosted.insert(name.into(), wire);
        self
    }

    /// What is sent for the hosted tool `name`, if Anthropic runs it.
    pub(crate) fn hosted_wire(&self, name: &str) -> Option<Value> {
        if let Some(wire) = self.hosted.get(name) {
            return Some(wire.clone());
        }
        let (kind, wire_name) = match name {
            "web_search" => ("web_search_20250305", "web_search"),
            "web_fetch" => ("web_fetch_20250910", "web_fetch"),
            "code_execution" => ("code_execution_20250825", "code_execution"),
            _ => return None,
        };
        Some(serde_json::json!({ "type": kind, "name": wire_name }))
    }

    /// The model name sent with every request.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The full URL requests are posted to.
    pub fn endpoint(&self) -> String {
        format!("{}/v1/messages", self.base_url)
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

    /// The `anthropic-beta` header of a request, if it needs one:
    /// deferred tools, a fixed thinking budget, and the hosted tools that
    /// have one each add theirs.
    pub(crate) fn betas(&self, request: &ChatRequest) -> Option<String> {
        let mut betas = Vec::new();
        if request.deferred_tools.is_some() {
            betas.push(TOOL_SEARCH_BETA);
        }
        if matches!(self.thinking, Some(Thinking::Budget(_))) {
            betas.push(INTERLEAVED_THINKING_BETA);
        }
        let deferred = request.deferred_tools.iter().flat_map(|d| d.tools.iter());
        for spec in request.tools.iter().chain(deferred) {
            let kind = spec
                .hosted
                .then(|| self.hosted_wire(&spec.name))
                .flatten()
                .and_then(|wire| wire.get("type").and_then(Value::as_str).map(str::to_owned));
            let beta = match kind.as_deref() {
                Some("code_execution_20250825") => CODE_EXECUTION_BETA,
                Some("web_fetch_20250910") => WEB_FETCH_BETA,
                _ => continue,
            };
            if !betas.contains(&beta) {
                betas.push(beta);
            }
        }
        (!betas.is_empty()).then(|| betas.join(","))
    }

    /// For the stream: the catalog name of each hosted tool offered, by
    /// the name its `server_tool_use` blocks carry. Code execution's
    /// current version runs as `bash_code_execution` and
    /// `text_editor_code_execution`.
    pub(crate) fn hosted_names(
        &self,
        request: &ChatRequest,
    ) -> std::collections::HashMap<String, String> {
        let mut names = std::collections::HashMap::new();
        let deferred = request.deferred_tools.iter().flat_map(|d| d.tools.iter());
        for spec in request
            .tools
            .iter()
            .chain(deferred)
            .filter(|spec| spec.hosted)
        {
            let Some(wire) = self.hosted_wire(&spec.name) else {
                continue;
            };
            if let Some(wire_name) = wire.get("name").and_then(Value::as_str) {
                names.insert(wire_name.to_owned(), spec.name.clone());
            }
            if wire
                .get("type")
                .and_then(Value::as_str)
                .is_some_and(|kind| kind.starts_with("code_execution_"))
            {
                for runner in ["bash_code_execution", "text_editor_code_execution"] {
                    names.insert(runner.to_owned(), spec.name.clone());
                }
            }
        }
        names
    }

    async fn connect(&self, body: Value, beta: Option<String>) -> Result<SseStream, ModelError> {
        let url = self.endpoint();
        reqwest::Url::parse(&url)
            .map_err(|error| ModelError::Config(format!("bad base URL `{url}`: {error}")))?;
        let client = self.client()?;
        let mut headers = vec![
            ("x-api-key", self.api_key.clone()),
            ("anthropic-version", ANTHROPIC_VERSION.to_owned()),
            ("accept", "text/event-stream".to_owned()),
        ];
        if let Some(beta) = beta {
            headers.push(("anthropic-beta", beta));
        }
        let events = http::post_sse(&client, &url, &headers, &body, &self.policy).await?;
        Ok(Box::pin(events))
    }
}

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

    fn hosts_tool(&self, name: &str) -> bool {
        self.hosted_wire(name).is_some()
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
        let connect = self.connect(body, self.betas(request));
        let decoder = stream::Decoder::new(self.hosted_names(request));
        Box::pin(super::event_stream::model_events(connect, decoder, span))
    }
}

#[cfg(test)]
mod tests;
