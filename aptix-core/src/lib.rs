//! The Aptix runtime. Users depend on the `aptix` facade crate instead (its
//! `aptix::guide` module is the guide); this crate holds everything
//! `#[agent_tool]` generates code against, as plain Rust that can be read,
//! tested and benchmarked.
//!
//! | module | holds |
//! | --- | --- |
//! | [`meta`] | what a tool declares: the five executor kinds, approval, [`route`] |
//! | [`content`] | `Content` blocks and `ToolReturn`: what a tool shows the model besides JSON |
//! | [`tool`] | the `Tool` / `ToolFn` traits |
//! | [`live`] | `LiveSink`: where a running tool's progress, partial results and questions to a person go |
//! | [`context`] | `ToolContext`: ids, cancellation, typed state, progress, partial results, `elicit` |
//! | [`error`] | `ToolError` and the stable `ErrorCode`s |
//! | [`envelope`] | the `{"ok":…}` result envelope |
//! | [`schema`] | canonical schemas and provider [`schema::dialect`]s |
//! | [`definition`] | `ToolDefinition`: a tool as a run-time value |
//! | [`validate`] | argument validation with model-readable rejections |
//! | [`secrets`] | the rule for field names that look secret, checked on a definition |
//! | [`activity`] | `Activities`: code bound to schema-first tools by name; latent execution |
//! | [`catalog`] | `Catalog` of `ToolEntry`s: declared tools named one by one, or made at run time |
//! | [`executor`] | `Executor`: a call in, an `Outcome` out, nothing escapes |
//! | [`transcript`] | `Message`, `Conversation` and transcript repair |
//! | [`model`] | the `ChatModel` port, the one tool-call assembler, the OpenAI and Anthropic adapters (features `openai`, `anthropic`) |
//! | `tool_search` (feature `tool-search`) | hundreds of tools: a search tool (BM25) or the provider's, and the tools it revealed |
//! | [`agent`] | the agent loop: `Agent`, `AgentEvent`, hooks, approval policies |
//! | [`store`] | the `Store` port and its backends (`MemoryStore`; `SqliteStore`, `PostgresStore` behind features): transcripts, the call ledger |
//! | [`durable`] | `DurableAgent`: an agent plus a store; suspension, resolution, deadlines, leases |
//! | `mcp` (features `mcp`, `mcp-client`) | the catalog as an MCP server; other MCP servers' tools as catalog entries |
//! | `cli` (feature `cli`) | the developer CLI: `tools`, `schema`, `call`, `chat`, `mcp` |
//!
//! A module imports only the modules listed before its own in the layers
//! of `tests/layering.rs`, which fails on an import that points up.

#![forbid(unsafe_code)]

pub mod agent;
pub mod catalog;
#[cfg(feature = "cli")]
pub mod cli;
pub mod content;
pub mod context;
pub mod definition;
mod digest;
pub mod durable;
pub mod envelope;
pub mod error;
pub mod executor;
mod generator;
#[cfg(any(
    feature = "openai",
    feature = "anthropic",
    feature = "gemini",
    feature = "mcp-client"
))]
mod https;
pub mod live;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod meta;
pub mod model;
pub mod schema;
pub mod secrets;
pub mod store;
pub mod tool;
#[cfg(feature = "tool-search")]
pub mod tool_search;
pub mod transcript;
pub mod validate;

pub use activity::Activities;
pub use agent::{
    Agent, AgentEvent, AgentStream, DoneReason, Input, PreparedStep, RunSummary, Step,
    ToolCallStats, ToolKind,
};
// Its page stays at the root, where the module table and users find it.
#[doc(inline)]
pub use catalog::activity;
pub use catalog::{
    Catalog, CatalogBuilder, CatalogError, CatalogProblem, PendingEntry, ToolEntry,
    ToolEntryBuilder,
};
pub use content::{Content, ToolReturn};
pub use context::CancellationToken;
pub use context::{MissingState, NoPartials, PartialValue, StateType, ToolContext};
pub use definition::ToolDefinition;
pub use durable::{DurableAgent, Resolution, ResolveError, Resolved};
pub use envelope::{Envelope, EnvelopeError, EnvelopeIds, JsonText};
pub use error::{ErrorCode, ToolError};
pub use executor::{Awaiting, Execution, Executor, Outcome, ToolCall};
pub use live::{ElicitationAnswer, ElicitationReply, ElicitationRequest, LiveSink, ProgressUpdate};
pub use meta::{
    Annotations, Approval, AwaitReason, ExecutorKind, Redaction, Route, ServerStep, SourceLocation,
    ToolMeta, route,
};
pub use schema::{DefinitionError, Dialect, DialectError};
pub use tool::{Code, Tool, ToolArgs, ToolFn, ToolOutput, ToolOutputSchema, ToolPartialSchema};
#[cfg(feature = "tool-search")]
pub use tool_search::ToolSearch;
pub use transcript::Conversation;

#[doc(hidden)]
pub mod __private;

/// The modules the `aptix` facade shows. Gated here, on this crate's
/// features, so the facade shows a module whenever this crate builds it:
/// a feature turned on by another crate of the build (a dev-dependency, a
/// sibling crate) then reaches `aptix::mcp` as well.
#[doc(hidden)]
pub mod __modules {
    // `activity` the facade re-exports by name: rustdoc documents a module
    // defined in `catalog/` only through a re-export naming it.
    #[cfg(feature = "cli")]
    pub use crate::cli;
    #[cfg(feature = "mcp")]
    pub use crate::mcp;
    #[cfg(feature = "tool-search")]
    pub use crate::tool_search;
    pub use crate::{
        agent, catalog, content, context, definition, durable, envelope, error, executor, live,
        meta, model, schema, store, tool, transcript,
    };
}
