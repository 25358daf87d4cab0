//! Model adapters over the wire (Chat Completions, the Responses API,
//! Anthropic, Gemini) and the conformance suite every one passes, tool
//! results with attachments in each provider's form, and a real local model.
//!
//! Each file is a module of this one test binary; `tests/common/` holds the
//! set-up that every test binary shares.

#[path = "../common/mod.rs"]
mod common;

#[path = "../../examples/chart.rs"]
#[allow(dead_code)]
mod chart;
#[path = "../../examples/hello_world.rs"]
mod hello_world;

// `pub`: the modules' `pub` items (documented for `missing_docs`) stay
// public, as they were at the root of a test crate of their own.
pub mod anthropic_adapter;
pub mod conformance;
pub mod gemini_adapter;
pub mod hostile_providers;
pub mod openai_adapter;
pub mod real_llm;
pub mod responses_adapter;
pub mod tool_return;

/// The provider's web search, run by its servers: one declaration for the
/// whole binary, whose tool names must be unique.
#[aptix::prelude::agent_tool(
    name = "web_search",
    usage = "Call to search the web for current facts.",
    executor = provider
)]
#[derive(Debug, aptix::prelude::Deserialize, aptix::prelude::JsonSchema)]
pub struct WebSearch {
    /// The query.
    pub query: String,
}
