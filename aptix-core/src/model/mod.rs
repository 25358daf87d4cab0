//! The model port: what the agent loop needs from any chat model.
//!
//! A request is a provider-neutral transcript plus tool definitions already
//! lowered to the model's [`Dialect`]; the answer is a stream of
//! [`ModelEvent`]s. Adapters translate their provider's wire format into
//! these events and nothing more: assembling streamed tool calls happens in
//! one place for every provider, [`adapter::TurnAssembler`].

#[cfg(feature = "anthropic")]
pub mod anthropic;
pub(crate) mod assembly;
#[cfg(any(feature = "openai", feature = "anthropic", feature = "gemini"))]
mod attachments;
#[cfg(any(feature = "anthropic", feature = "gemini"))]
mod event_stream;
#[cfg(feature = "gemini")]
pub mod gemini;
#[cfg(any(feature = "openai", feature = "anthropic", feature = "gemini"))]
pub(crate) mod http;
#[cfg(feature = "openai")]
pub mod openai;
pub mod provider;
#[cfg(feature = "openai")]
pub mod responses;
#[cfg(any(feature = "openai", feature = "anthropic", feature = "gemini"))]
mod sse;

#[cfg(any(feature = "openai", feature = "anthropic", feature = "gemini"))]
pub use http::{ERROR_BODY_LIMIT, HttpPolicy};

/// What an adapter of one's own builds on: the tool-call assembler every
/// adapter here feeds its provider's deltas to, so ids, names, argument
/// text and the turn's limits are handled once for all of them. A user who
/// only runs agents never needs it.
pub mod adapter {
    pub use super::assembly::{
        AssembledCall, AssembledTurn, CallSeen, CallStatus, TurnAssembler, TurnLimitExceeded,
        TurnLimits,
    };
}

use std::pin::Pin;

use futures_util::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::catalog::ToolEntry;
use crate::definition::ToolDefinition;
use crate::schema::{Dialect, DialectError};
use crate::transcript::{Message, ThinkingBlock};

/// A piece of a thinking block as it streams in, keyed by the block's
/// `index` in the turn like [`ToolCallDelta`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThinkingDelta {
    /// More thinking text; opens a [`ThinkingBlock::Thinking`] at `index`
    /// if none is open there.
    Text {
        /// Which block of the turn this belongs to.
        index: usize,
        /// The next piece of the text.
        text: String,
    },
    /// More of the signature of the thinking block at `index`.
    Signature {
        /// Which block of the turn this belongs to.
        index: usize,
        /// The next piece of the signature.
        signature: String,
    },
    /// A whole [`ThinkingBlock::RedactedThinking`].
    Redacted {
        /// Which block of the turn this is.
        index: usize,
        /// The encrypted thinking.
        data: String,
    },
    /// More reasoning text from an OpenAI-compatible server; opens a
    /// [`ThinkingBlock::Reasoning`] at `index` if none is open there.
    Reasoning {
        /// Which block of the turn this belongs to.
        index: usize,
        /// The next piece of the text.
        text: String,
    },
    /// Reasoning text to show while it streams, whose block arrives whole
    /// later in a [`ThinkingDelta::Block`] (a Responses reasoning summary, a
    /// Gemini thought): shown as
    /// [`AgentEvent::ReasoningDelta`](crate::agent::AgentEvent::ReasoningDelta),
    /// never kept.
    Preview {
        /// The next piece of the text.
        text: String,
    },
    /// A whole block, as the provider sent it (a Responses reasoning item,
    /// a Gemini part with a thought signature), kept at `index` in the
    /// turn's order of blocks.
    Block {
        /// Which block of the turn this is.
        index: usize,
        /// The block.
        block: ThinkingBlock,
    },
}

/// A tool the provider ran itself during a turn (a hosted web search, code
/// execution), for whoever shows the run: the agent reports it as
/// [`AgentEvent::ToolCallStart`](crate::agent::AgentEvent::ToolCallStart) and
/// [`AgentEvent::ToolCallResult`](crate::agent::AgentEvent::ToolCallResult)
/// of an `executor = provider` tool. What goes back to the provider with
/// the turn is its [`ModelEvent::ServerBlock`]s, not this.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HostedToolEvent {
    /// The model called the hosted tool.
    Called {
        /// The provider's id for the call.
        id: String,
        /// The tool's name, as the agent's catalog knows it.
        name: String,
        /// What the model asked for (the query, the code), as the provider
        /// wrote it.
        input: Value,
    },
    /// The provider's tool finished.
    Finished {
        /// The call's id, as in [`HostedToolEvent::Called`].
        id: String,
        /// The tool's name.
        name: String,
        /// What it found or produced, as the provider wrote it.
        output: Value,
        /// Whether the provider reports it failed.
        is_error: bool,
    },
}

/// Which tools the model may or must call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// This tool, by name.
    Tool(String),
}

/// A tool as offered to a model: its name, what the model is told about it,
/// and its parameters lowered to the model's [`Dialect`]. Each adapter puts
/// these into its provider's own tool shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// The description, then when to call it: providers show the model only
    /// the description, so the usage goes there.
    pub description: String,
    /// The parameters schema in [`ToolSpec::dialect`].
    pub parameters: Value,
    /// The dialect `parameters` is written in.
    pub dialect: Dialect,
    /// Whether the provider runs it (`executor = provider`): an adapter
    /// sends it in its provider's hosted-tool form (by name, see
    /// [`ChatModel::hosts_tool`]) rather than as a function to call.
    pub hosted: bool,
}

impl ToolSpec {
    /// `definition` as offered to a model that takes `dialect`.
    pub fn new(definition: &ToolDefinition, dialect: Dialect) -> Result<ToolSpec, DialectError> {
        ToolSpec::with_parameters(definition, definition.parameters(), dialect)
    }

    /// A catalog's tool as offered to a model: with the `_output` member a
    /// latent tool asks for ([`ToolEntry::offered_parameters`]).
    pub fn for_entry(entry: &ToolEntry, dialect: Dialect) -> Result<ToolSpec, DialectError> {
        ToolSpec::offered(entry, dialect, false)
    }

    /// [`ToolSpec::for_entry`], with an optional `_reasoningForCall` member
    /// when `reasoning` is asked for.
    pub fn offered(
        entry: &ToolEntry,
        dialect: Dialect,
        reasoning: bool,
    ) -> Result<ToolSpec, DialectError> {
        let parameters = entry.offered_parameters();
        if reasoning {
            let parameters = crate::schema::meta_fields::with_reasoning(&parameters);
            ToolSpec::with_parameters(entry.definition(), &parameters, dialect)
        } else {
            ToolSpec::with_parameters(entry.definition(), &parameters, dialect)
        }
    }

    fn with_parameters(
        definition: &ToolDefinition,
        parameters: &Value,
        dialect: Dialect,
    ) -> Result<ToolSpec, DialectError> {
        let parameters = crate::schema::dialect::lower(dialect, parameters)
            .map_err(|error| error.for_tool(definition.name()))?;
        Ok(ToolSpec {
            name: definition.name().to_owned(),
            description: definition.offered_description(),
            parameters,
            dialect,
            hosted: definition.route().step == crate::meta::ServerStep::PassThrough,
        })
    }
}

/// One request to a chat model.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools the model may call, already lowered to its dialect;
    /// shared, because every request of a run sends the same ones.
    pub tools: std::sync::Arc<[ToolSpec]>,
    /// Which tools the model may call.
    pub tool_choice: ToolChoice,
    /// Whether the model may call several tools in one turn.
    pub parallel_tool_calls: bool,
    /// The most tokens the model may produce.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// The shape the answer must have, when it is structured output rather
    /// than text: the composed `calls` object of
    /// [`CallMode::Composed`](crate::agent::CallMode::Composed).
    pub response_format: Option<ResponseFormat>,
    /// Tools the provider keeps out of the model's context until its own
    /// tool search finds them (only for a model whose
    /// [`ChatModel::native_tool_search`] is true; see
    /// [`ToolSearch`](crate::tool_search::ToolSearch)). `tools` are then
    /// the ones always loaded.
    pub deferred_tools: Option<DeferredTools>,
}

/// Tools sent for the provider's own tool search: described to the
/// provider, loaded into the model's context only once a search finds them.
#[derive(Debug, Clone, PartialEq)]
pub struct DeferredTools {
    /// Which of the provider's searches the model gets.
    pub search: NativeToolSearch,
    /// The tools it searches, lowered like [`ChatRequest::tools`].
    pub tools: std::sync::Arc<[ToolSpec]>,
}

/// A provider's own tool search (Anthropic's `tool_search_tool_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NativeToolSearch {
    /// The model searches with words, ranked by BM25.
    #[default]
    Bm25,
    /// The model searches with regular expressions.
    Regex,
}

/// A shared model is a model: one `Arc` serves the agent and, say, an MCP
/// toolset's sampling (`McpToolset::sampling`).
impl<M: ChatModel + ?Sized> ChatModel for std::sync::Arc<M> {
    fn dialect(&self) -> Dialect {
        (**self).dialect()
    }

    fn stream<'a>(&'a self, request: &'a ChatRequest) -> ModelStream<'a> {
        (**self).stream(request)
    }

    fn hosts_tool(&self, name: &str) -> bool {
        (**self).hosts_tool(name)
    }

    fn native_tool_search(&self) -> bool {
        (**self).native_tool_search()
    }

    fn calls_tools_natively(&self) -> bool {
        (**self).calls_tools_natively()
    }

    fn model_name(&self) -> Option<&str> {
        (**self).model_name()
    }
}

/// A structured-output constraint on a model's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseFormat {
    /// A name for the schema (providers show it to the model).
    pub name: String,
    /// The JSON Schema the answer must match, in the model's dialect;
    /// shared, because every request of a run sends the same one.
    pub schema: std::sync::Arc<Value>,
    /// Whether the provider must enforce it exactly (OpenAI's `strict`).
    pub strict: bool,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// It finished its answer.
    Stop,
    /// It stopped to have tools called.
    ToolCalls,
    /// It ran into the token limit: anything open is truncated.
    Length,
    /// The provider filtered the output.
    ContentFilter,
    /// Something else, as the provider named it.
    Other(String),
}

/// Tokens used by one model call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens read.
    pub input_tokens: u64,
    /// Tokens written.
    pub output_tokens: u64,
    /// Of `input_tokens`, those read from the provider's prompt cache
    /// (Anthropic's `cache_read_input_tokens`, OpenAI's `cached_tokens`,
    /// Gemini's `cachedContentTokenCount`): billed at a fraction.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Of `input_tokens`, those written to the provider's prompt cache
    /// (Anthropic's `cache_creation_input_tokens`).
    #[serde(default)]
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Tokens read and written, nothing from a cache.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Usage {
        Usage {
            input_tokens,
            output_tokens,
            ..Usage::default()
        }
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }
}

/// A piece of a tool call as it streams in. OpenAI sends these per `index`;
/// the Anthropic adapter numbers its `tool_use` blocks the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallDelta {
    /// Which call of the turn this belongs to.
    pub index: usize,
    /// The call's id, on the delta that opens it.
    pub id: Option<String>,
    /// The tool's name, on the delta that opens it.
    pub name: Option<String>,
    /// The next piece of the arguments text.
    pub arguments: String,
}

/// What a model stream yields.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// More answer text.
    TextDelta(String),
    /// More of a tool call.
    ToolCallDelta(ToolCallDelta),
    /// More of a thinking block.
    ThinkingDelta(ThinkingDelta),
    /// A whole block the provider ran itself (Anthropic's `server_tool_use`
    /// with its input, or a server tool's result), as the provider wrote
    /// it: kept with the turn and sent back to that provider only.
    ServerBlock(Value),
    /// A tool the provider ran, for display; see [`HostedToolEvent`].
    Hosted(HostedToolEvent),
    /// The end of the turn. Always the last event of a complete stream.
    Finish {
        /// Why the model stopped.
        reason: FinishReason,
        /// Tokens used, when the provider reports them.
        usage: Option<Usage>,
    },
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The provider answered with an error status.
    #[error("the model endpoint answered {status}: {body}")]
    Http {
        /// The HTTP status.
        status: u16,
        /// The start of the response body.
        body: String,
    },
    /// The connection failed or broke.
    #[error("could not reach the model endpoint: {0}")]
    Transport(String),
    /// The stream did not follow the provider's protocol.
    #[error("the model stream is malformed: {0}")]
    Protocol(String),
    /// The stream ended before the model finished its turn.
    #[error("the model stream ended before the turn finished")]
    Incomplete,
    /// No answer within the time limit.
    #[error("the model did not answer in time")]
    Timeout,
    /// The run was cancelled.
    #[error("the model call was cancelled")]
    Cancelled,
    /// The adapter is misconfigured (missing key, bad URL).
    #[error("the model adapter is misconfigured: {0}")]
    Config(String),
}

/// A stream of model events.
pub type ModelStream<'a> = Pin<Box<dyn Stream<Item = Result<ModelEvent, ModelError>> + Send + 'a>>;

/// A chat model the agent loop can drive.
pub trait ChatModel: Send + Sync {
    /// The schema dialect its tool definitions must be in.
    fn dialect(&self) -> Dialect;

    /// Streams one turn of the model's answer to `request`.
    fn stream<'a>(&'a self, request: &'a ChatRequest) -> ModelStream<'a>;

    /// Whether the provider itself runs the tool `name` (a hosted tool such
    /// as web search). The agent refuses to offer a provider-executed tool
    /// to a model that does not host it: sent as an ordinary function, the
    /// model would call it and every call would fail.
    fn hosts_tool(&self, name: &str) -> bool {
        let _ = name;
        false
    }

    /// Whether the provider searches deferred tools itself
    /// ([`ChatRequest::deferred_tools`]): Anthropic's tool search. An agent
    /// with [`ToolSearch`](crate::tool_search::ToolSearch) uses it when
    /// true, and its own search tool otherwise.
    fn native_tool_search(&self) -> bool {
        false
    }

    /// Whether the model calls tools natively. A model that does not is
    /// offered the tools as one structured-output schema instead when the
    /// agent's call mode is [`CallMode::Auto`](crate::agent::CallMode::Auto).
    fn calls_tools_natively(&self) -> bool {
        true
    }

    /// The provider's name for the model (`gpt-4o-mini`, ...), hashed into
    /// [`RunSummary::request_hash`](crate::agent::RunSummary::request_hash).
    /// `None` (the default) for a model without one, such as a scripted
    /// model.
    fn model_name(&self) -> Option<&str> {
        None
    }
}
