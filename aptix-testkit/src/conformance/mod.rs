//! One conformance suite for every model adapter.
//!
//! Each provider speaks its own wire format; the agent loop needs the same
//! things from all of them. The suite states those things once, as
//! scenarios (plain text; one call; parallel calls; a gated call that
//! suspends and resumes; reasoning kept across a tool call; a provider
//! tool; an error body; a stream cut mid-call; a turn over its limits),
//! and runs them against a mock server per provider: a [`ProviderWire`]
//! writes each scripted [`WireTurn`] byte for byte as its provider streams
//! it, and reads the requests the adapter sent back into a neutral
//! [`WireRequest`], so one assertion checks every adapter. The request
//! bodies of each scenario come back in the [`Report`] for the test to
//! snapshot: they are the provider's documented shapes, reviewed as API
//! changes like the schema snapshots.
//!
//! A provider's wire lives beside its mock (`mock_openai`,
//! `mock_anthropic`, ...); the adapter under test is the test's to build,
//! so this crate needs none of the HTTP adapters.

pub mod anthropic;
pub mod gemini;
pub mod openai_responses;

pub use anthropic::AnthropicWire;
pub use gemini::GeminiWire;
pub use openai_responses::OpenAiResponsesWire;

use std::sync::Arc;

use aptix_core::model::ChatModel;
use serde_json::Value;

use crate::mock_server::ScriptedResponse;

pub mod mock_model;
mod openai_chat;
mod scenarios;

pub use openai_chat::OpenAiChatWire;
pub use scenarios::{
    CUT_MARKER, Failure, QUESTION, REASONING_TOKEN, SYSTEM, Scenario, ScenarioReport, pretty_json,
    run, run_one,
};

/// Builds the adapter under test, pointed at a mock server's base URL
/// (`http://127.0.0.1:PORT`, without a path).
pub type ModelFactory = dyn Fn(&str) -> Arc<dyn ChatModel> + Send + Sync;

/// One scripted model turn, in no provider's format.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WireTurn {
    /// Reasoning before the answer, when the turn has any.
    pub reasoning: Option<WireReasoning>,
    /// A tool the provider runs itself during the turn, before the text.
    pub hosted: Option<WireHosted>,
    /// The answer text, in the pieces it streams in.
    pub text: Vec<String>,
    /// The function calls, in order.
    pub calls: Vec<WireCall>,
    /// Whether the turn ends at the token limit (`length`,
    /// `max_tokens`, `MAX_TOKENS`, `incomplete`) rather than normally.
    pub cut_at_limit: bool,
    /// Tokens read and written.
    pub usage: (u64, u64),
}

/// Reasoning as a provider streams it: text a person may see, and the
/// opaque token (signature, encrypted content) that must come back
/// unchanged with the turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WireReasoning {
    /// The text, in the pieces it streams in (a summary, for providers
    /// that show only that).
    pub text: Vec<String>,
    /// The opaque token; the suite looks for it, unchanged, in the next
    /// request. Empty for a provider whose reasoning has none (an
    /// OpenAI-compatible server's `reasoning_content`): then the text
    /// itself must come back.
    pub token: String,
}

/// One function call of a turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WireCall {
    /// The call's id (a provider without ids ignores it).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments text, in the pieces it streams in (a provider that
    /// sends a call whole joins them).
    pub arguments: Vec<String>,
}

/// A tool the provider ran during a turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WireHosted {
    /// The provider's id for the call.
    pub id: String,
    /// What the model asked of it (`{"query":…}`).
    pub input: Value,
    /// What it found, in the provider's form of a result.
    pub output: Value,
}

/// What a request asked for, read back from the provider's format.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WireRequest {
    /// The function tools offered, by name.
    pub tools: Vec<String>,
    /// The provider's own tools offered, by the catalog's name for them.
    pub hosted_tools: Vec<String>,
    /// The conversation sent, in order.
    pub messages: Vec<WireMessage>,
}

/// One message of a request, in no provider's format.
#[derive(Debug, Clone, PartialEq)]
pub enum WireMessage {
    /// Instructions.
    System(String),
    /// The user's words.
    User(String),
    /// A past model turn as it was sent back.
    Assistant {
        /// Its text.
        text: String,
        /// Its calls: id (empty where the provider has none), name, and
        /// arguments parsed.
        calls: Vec<(String, String, Value)>,
        /// The reasoning sent back with it: the opaque tokens, or the
        /// reasoning text where the provider's has no token.
        reasoning: Vec<String>,
        /// Whether the provider's own tool's call and result went back.
        hosted: bool,
    },
    /// A tool's result: the call's id (or the tool's name, for a provider
    /// that pairs results by name) and the envelope text.
    ToolResult {
        /// The call it answers.
        id: String,
        /// The envelope, as sent.
        content: String,
    },
}

/// One provider's side of the suite.
pub trait ProviderWire: Send + Sync {
    /// The provider's name, in failure messages and snapshot names
    /// (`openai_chat`, `openai_responses`, `anthropic`, `gemini`).
    fn name(&self) -> &'static str;

    /// `turn`, streamed byte for byte as the provider does.
    fn turn(&self, turn: &WireTurn) -> ScriptedResponse;

    /// An error answer with `status`, in the provider's error body.
    fn error(&self, status: u16, message: &str) -> ScriptedResponse;

    /// Reads a request the adapter sent back into neutral form; `Err` says
    /// what in it is not the provider's documented shape.
    fn read_request(&self, body: &Value) -> Result<WireRequest, String>;

    /// The catalog name of a hosted tool this provider runs, for the
    /// provider-tool scenario (`web_search`, `google_search`); `None`
    /// when the provider hosts none, and the scenario is skipped.
    fn hosted_tool(&self) -> Option<&'static str>;

    /// Whether this provider's reasoning carries an opaque token
    /// ([`WireReasoning::token`]). The suite scripts one and looks for it
    /// in the next request when true (the default), and looks for the
    /// reasoning text when false (an OpenAI-compatible server's
    /// `reasoning_content`).
    fn reasoning_has_token(&self) -> bool {
        true
    }

    /// Whether the provider takes its hosted tool's call and result back
    /// with the turn (true, the default: Anthropic's server blocks, the
    /// Responses API's items). Gemini takes no grounding back: its wire
    /// says false, and the suite checks that nothing of it is sent.
    fn hosted_goes_back(&self) -> bool {
        true
    }

    /// The result the provider-tool scenario scripts for the hosted call
    /// ([`WireHosted::output`]), in this provider's form of it. The default
    /// is a neutral list of one search hit; a wire whose provider writes
    /// results otherwise overrides it.
    fn hosted_output(&self) -> Value {
        serde_json::json!([{
            "type": "web_search_result",
            "title": "Paris weather",
            "url": "https://example.com/paris-weather"
        }])
    }
}

/// What a run of the suite sent, for the test to snapshot.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Per scenario, by name, the raw bodies of the requests the adapter
    /// sent, in order.
    pub requests: Vec<(&'static str, Vec<String>)>,
    /// Per scenario, by name, why it was skipped (a provider that hosts
    /// no tool skips the provider-tool scenario).
    pub notes: Vec<(&'static str, String)>,
}
