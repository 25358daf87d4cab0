//! OpenAI's Responses API: `POST {base}/responses`, streamed.
//!
//! [`OpenAiResponses`] turns a [`ChatRequest`] into one request with
//! `stream: true` and translates the answer's Server-Sent Events into
//! [`ModelEvent`]s. Like every adapter it only translates: function calls
//! stream as [`ToolCallDelta`]s, one `index` per output item that is a
//! call, and [`super::adapter::TurnAssembler`] builds them.
//!
//! | event | becomes |
//! | --- | --- |
//! | `response.created`, `response.in_progress`, `response.queued` | remembers the response's `id` |
//! | `response.output_item.added` (function_call) | `ToolCallDelta { index, id: call_id, name, arguments }` |
//! | `response.function_call_arguments.delta` | `ToolCallDelta { index, arguments: delta }` |
//! | `response.function_call_arguments.done` | the whole arguments, only when no delta brought any |
//! | `response.output_text.delta`, `response.refusal.delta` | `TextDelta` |
//! | `response.reasoning_summary_text.delta`, `response.reasoning_text.delta` | `ThinkingDelta::Preview` (shown, not kept) |
//! | `response.output_item.done` (reasoning) | `ThinkingDelta::Block { block: ThinkingBlock::OpenaiReasoning { item } }`, the item as it arrived |
//! | `response.output_item.done` (a hosted tool's `*_call`) | `Hosted(Called)`, `Hosted(Finished)` and `ServerBlock(item)` |
//! | `response.output_item.done` (function_call) | `"{}"` for a call that streamed no arguments |
//! | `response.completed` | `ServerBlock` of the turn's record (below), then `Finish` (`ToolCalls` when the turn called a function, else `Stop`) with its `Usage` |
//! | `response.incomplete` | the record, then `Finish`: `Length` for `max_output_tokens`, `ContentFilter` for `content_filter` |
//! | `response.failed`, `error` | `Err(ModelError::Protocol)` with the provider's code and message |
//! | anything else | nothing (logged at debug), so events OpenAI adds later do not break runs |
//!
//! A stream that ends before `response.completed` (or `incomplete`) ends
//! in an error, never a `Finish`: a half-received call is never run.
//!
//! # What goes back
//!
//! The API is stateless by default here (`store: false`): every request
//! carries the whole conversation as input items. A reasoning model's
//! reasoning items come back with `encrypted_content` (asked for with
//! `include: ["reasoning.encrypted_content"]`) and are sent back unchanged
//! in their place, so the model reasons on from them after a tool call.
//! The hosted tools' items (`web_search_call`, ...) are kept as the turn's
//! server blocks and sent back the same way.
//!
//! A turn's items are kept apart in the transcript (reasoning, server
//! blocks, text, calls), but the API wants them back in the order they
//! came. So each turn also keeps one server block of its own, its record:
//! `{"type":"aptix_responses_turn","response_id":"resp_…","output":["reasoning","web_search_call","message","function_call"]}`,
//! the response's id and the types of its output items in order. The
//! request puts the turn's items back in that order; the record itself is
//! never sent. With [`OpenAiResponses::with_previous_response_id`] the
//! record's `response_id` is what the next request continues from.
//!
//! # Hosted tools
//!
//! A tool declared `executor = provider` is sent in the API's hosted form,
//! by name:
//!
//! | catalog name | sent as |
//! | --- | --- |
//! | `web_search` | `{"type":"web_search"}` |
//! | `file_search` | `{"type":"file_search","vector_store_ids":[…]}`: give the ids with [`OpenAiResponses::hosted_tool`]; a request without them is refused |
//! | `code_interpreter` | `{"type":"code_interpreter","container":{"type":"auto"}}` |
//! | any name given to [`OpenAiResponses::hosted_tool`] | the JSON given there |
//!
//! [`ModelEvent`]: super::ModelEvent
//! [`ToolCallDelta`]: super::ToolCallDelta

mod request;
mod stream;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;

use futures_util::StreamExt;
use serde_json::Value;
use tracing::Instrument;

use super::http::{self, HttpPolicy};
use super::{ChatModel, ChatRequest, ModelError, ModelStream};
use crate::schema::Dialect;

pub use request::TURN_RECORD;

/// OpenAI's own endpoint, the default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The model [`OpenAiResponses::from_env`] uses when `OPENAI_MODEL` is unset.
pub const DEFAULT_MODEL: &str = "gpt-5-mini";

/// The largest Server-Sent Event the adapter reads by default, in bytes:
/// `response.completed` repeats the whole turn, so this is well above the
/// agent's default turn limit. A bigger event ends the call.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 32 * 1024 * 1024;

/// The names hosted without any configuration.
const BUILT_IN_HOSTED: [&str; 3] = ["web_search", "file_search", "code_interpreter"];

/// How hard a reasoning model thinks (`reasoning.effort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReasoningEffort {
    /// No reasoning (the models that offer it).
    None,
    /// The least reasoning.
    Minimal,
    /// Little reasoning.
    Low,
    /// Some reasoning (OpenAI's default).
    Medium,
    /// Deep reasoning.
    High,
    /// The deepest reasoning (the models that offer it).
    XHigh,
}

impl ReasoningEffort {
    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::None => "none",
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
            ReasoningEffort::XHigh => "xhigh",
        }
    }
}

/// Which summary of its reasoning the model writes (`reasoning.summary`):
/// the text a person is shown while it reasons, since the reasoning
/// itself comes encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReasoningSummary {
    /// No summary (the field is left out).
    Off,
    /// The most detailed summary the model offers.
    Auto,
    /// A short summary.
    Concise,
    /// A detailed summary.
    Detailed,
}

impl ReasoningSummary {
    /// The wire name; `None` for [`ReasoningSummary::Off`].
    pub const fn as_str(self) -> Option<&'static str> {
        match self {
            ReasoningSummary::Off => None,
            ReasoningSummary::Auto => Some("auto"),
            ReasoningSummary::Concise => Some("concise"),
            ReasoningSummary::Detailed => Some("detailed"),
        }
    }
}

/// A chat model behind OpenAI's Responses API.
///
/// ```no_run
/// use aptix_core::model::responses::{OpenAiResponses, ReasoningEffort, ReasoningSummary};
///
/// // Configured from OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL:
/// let model = OpenAiResponses::from_env()?
///     .with_reasoning(ReasoningEffort::Low, ReasoningSummary::Auto);
/// # Ok::<(), aptix_core::model::ModelError>(())
/// ```
///
/// `Debug` never shows the API key.
#[derive(Clone)]
pub struct OpenAiResponses {
    model: String,
    base_url: String,
    api_key: Option<String>,
    policy: HttpPolicy,
    strict: bool,
    max_output_tokens: Option<u32>,
    reasoning: Option<(ReasoningEffort, ReasoningSummary)>,
    previous_response_id: bool,
    hosted: BTreeMap<String, Value>,
    max_event_bytes: usize,
    /// Built on first use (building one loads the TLS roots), then shared.
    client: OnceLock<Result<reqwest::Client, ModelError>>,
}

impl fmt::Debug for OpenAiResponses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiResponses")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field(
                "api_key",
                &self
                    .api_key
                    .as_ref()
                    .map(|_| "[redacted]")
                    .unwrap_or("none"),
            )
            .field("policy", &self.policy)
            .field("strict", &self.strict)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("reasoning", &self.reasoning)
            .field("previous_response_id", &self.previous_response_id)
            .field("hosted", &self.hosted)
            .field("max_event_bytes", &self.max_event_bytes)
            .finish()
    }
}

impl OpenAiResponses {
    /// `model` on OpenAI's endpoint, without an API key (add one with
    /// [`OpenAiResponses::with_api_key`]): strict tools, stateless
    /// requests, the default [`HttpPolicy`].
    pub fn new(model: impl Into<String>) -> Self {
        OpenAiResponses {
            model: model.into(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            policy: HttpPolicy::default(),
            strict: true,
            max_output_tokens: None,
            reasoning: None,
            previous_response_id: false,
            hosted: BTreeMap::new(),
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            client: OnceLock::new(),
        }
    }

    /// Configured from the process environment: `OPENAI_BASE_URL` (default
    /// [`DEFAULT_BASE_URL`], with or without a trailing slash),
    /// `OPENAI_API_KEY` (sent as `Authorization: Bearer` when set) and
    /// `OPENAI_MODEL` (default [`DEFAULT_MODEL`]). Empty variables count as
    /// unset. Fails with [`ModelError::Config`] if the base URL is not an
    /// `http` or `https` URL.
    pub fn from_env() -> Result<Self, ModelError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// As [`OpenAiResponses::from_env`], reading the variables through
    /// `lookup` (a configuration file, a test's map) instead of the process
    /// environment.
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ModelError> {
        let var = |name: &str| {
            lookup(name)
                .map(|value| value.trim().to_owned())
                .filter(|value| !value.is_empty())
        };
        let mut model =
            OpenAiResponses::new(var("OPENAI_MODEL").unwrap_or_else(|| DEFAULT_MODEL.into()));
        if let Some(base_url) = var("OPENAI_BASE_URL") {
            check_base_url(&base_url)
                .map_err(|reason| ModelError::Config(format!("OPENAI_BASE_URL {reason}")))?;
            model = model.with_base_url(base_url);
        }
        if let Some(api_key) = var("OPENAI_API_KEY") {
            model = model.with_api_key(api_key);
        }
        Ok(model)
    }

    /// The endpoint's base URL, such as `https://api.openai.com/v1`;
    /// requests go to `{base_url}/responses`. A trailing slash is ignored.
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

    /// Whether function tools are sent in strict mode (the default):
    /// lowered to [`Dialect::OpenAiStrict`] with `"strict": true`. With
    /// `false` they are lowered to [`Dialect::OpenAiCompatible`] and sent
    /// with `"strict": false` (the Responses API is strict unless told).
    pub fn with_strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// The `max_output_tokens` sent when the request does not set its own
    /// (reasoning tokens count against it).
    pub fn with_max_output_tokens(mut self, tokens: u32) -> Self {
        self.max_output_tokens = Some(tokens);
        self
    }

    /// Asks a reasoning model for `effort` and a reasoning `summary`
    /// (`reasoning: {effort, summary}`); the summary streams as reasoning
    /// a person may be shown. With reasoning on, a request's temperature is
    /// left out (reasoning models refuse it; logged at WARN).
    pub fn with_reasoning(mut self, effort: ReasoningEffort, summary: ReasoningSummary) -> Self {
        self.reasoning = Some((effort, summary));
        self
    }

    /// Whether each request continues the last one on OpenAI's side
    /// (`previous_response_id`, `store: true`), sending only what came after
    /// that turn: less to send, but OpenAI keeps the conversation, and a
    /// transcript edited before that turn is not what the model sees.
    /// Default `false`: stateless (`store: false`), every request carries
    /// the whole conversation with the reasoning encrypted.
    pub fn with_previous_response_id(mut self, continue_on_server: bool) -> Self {
        self.previous_response_id = continue_on_server;
        self
    }

    /// Hosts the `executor = provider` tool `name`, sent as `wire` (the
    /// exact JSON of an entry of `tools`), adding to or replacing the
    /// built-in forms: `.hosted_tool("file_search", json!({"type":
    /// "file_search", "vector_store_ids": ["vs_1"]}))`, or
    /// `.hosted_tool("image_generation", json!({"type": "image_generation"}))`.
    pub fn hosted_tool(mut self, name: impl Into<String>, wire: Value) -> Self {
        self.hosted.insert(name.into(), wire);
        self
    }

    /// The largest Server-Sent Event read (default
    /// [`DEFAULT_MAX_EVENT_BYTES`]); a bigger one ends the call with
    /// [`ModelError::Protocol`]. It raises the policy's
    /// [`HttpPolicy::max_event_bytes`] for this adapter when larger.
    pub fn with_max_event_bytes(mut self, bytes: usize) -> Self {
        self.max_event_bytes = bytes;
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

    /// Whether the model reasons: asked to with
    /// [`OpenAiResponses::with_reasoning`], or named like OpenAI's
    /// reasoning models (`o1`, `o3`, `o4-mini`, `gpt-5`, `codex-mini`, not
    /// `gpt-5-chat`). Such a model gets `include:
    /// ["reasoning.encrypted_content"]` when stateless and no temperature.
    pub fn reasons(&self) -> bool {
        if self.reasoning.is_some() {
            return true;
        }
        let name = self.model.rsplit('/').next().unwrap_or(&self.model);
        let o_series = name.starts_with('o')
            && name
                .as_bytes()
                .get(1)
                .is_some_and(|byte| byte.is_ascii_digit());
        o_series
            || (name.starts_with("gpt-5") && !name.starts_with("gpt-5-chat"))
            || name.starts_with("codex")
    }

    fn client(&self) -> Result<reqwest::Client, ModelError> {
        self.client
            .get_or_init(|| http::client(&self.policy))
            .clone()
    }

    fn endpoint(&self) -> Result<String, ModelError> {
        check_base_url(&self.base_url)
            .map_err(|reason| ModelError::Config(format!("the base URL {reason}")))?;
        Ok(format!("{}/responses", self.base_url))
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

    /// The hosted form of the tool `name`, if it is hosted.
    fn hosted_wire(&self, name: &str) -> Option<Result<Value, ModelError>> {
        if let Some(wire) = self.hosted.get(name) {
            return Some(Ok(wire.clone()));
        }
        match name {
            "web_search" => Some(Ok(serde_json::json!({ "type": "web_search" }))),
            "code_interpreter" => Some(Ok(serde_json::json!({
                "type": "code_interpreter",
                "container": { "type": "auto" },
            }))),
            "file_search" => Some(Ok(serde_json::json!({ "type": "file_search" }))),
            _ => None,
        }
    }
}

impl ChatModel for OpenAiResponses {
    fn model_name(&self) -> Option<&str> {
        Some(self.model())
    }

    fn dialect(&self) -> Dialect {
        if self.strict {
            Dialect::OpenAiStrict
        } else {
            Dialect::OpenAiCompatible
        }
    }

    fn hosts_tool(&self, name: &str) -> bool {
        BUILT_IN_HOSTED.contains(&name) || self.hosted.contains_key(name)
    }

    fn stream<'a>(&'a self, request: &'a ChatRequest) -> ModelStream<'a> {
        let span = tracing::debug_span!(
            "openai_responses",
            model = %self.model,
            base_url = %http::shown_url(&self.base_url),
        );
        let prepared = self.client().and_then(|client| {
            Ok((
                client,
                self.endpoint()?,
                self.headers()?,
                self.request_body(request)?,
            ))
        });
        let names = self.hosted_names(request);
        let max_event_bytes = self.max_event_bytes;
        // The transport reads events up to this adapter's own limit when it
        // is the larger one (`response.completed` repeats the whole turn);
        // the decoder holds each event to it.
        let policy = HttpPolicy {
            max_event_bytes: self.policy.max_event_bytes.max(max_event_bytes),
            ..self.policy.clone()
        };
        let opened = async move {
            let policy = &policy;
            let (client, url, headers, body) = prepared?;
            tracing::debug!(
                messages = request.messages.len(),
                tools = request.tools.len(),
                "requesting a response"
            );
            http::post_sse(&client, &url, &headers, &body, policy).await
        }
        .instrument(span.clone());
        Box::pin(futures_util::stream::once(opened).flat_map(move |opened| {
            match opened {
                Ok(events) => stream::decode(
                    events,
                    stream::Decoder::new(names.clone(), max_event_bytes),
                    span.clone(),
                )
                .left_stream(),
                Err(error) => {
                    span.in_scope(|| tracing::debug!(%error, "response request failed"));
                    futures_util::stream::iter([Err(error)]).right_stream()
                }
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

#[cfg(test)]
mod tests;
