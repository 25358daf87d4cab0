//! The guide: how to declare tools, run them, and build agents on them, one
//! page per topic. Every snippet a page shows is compiled as a doctest of
//! this crate (`cargo test --doc -p aptix`); those that need a network, a
//! model or a server are compiled but not run.
//!
//! | page | what it covers |
//! | --- | --- |
//! | [`declaring`] | `#[agent_tool]`: its keys, the five executors, signatures, what the compiler refuses, catalogs, tools made at run time, schemas per provider |
//! | [`running`] | the executor, the result envelope and its error codes, the tool's context, progress and partial results, questions to a person, images |
//! | [`agent`] | the agent loop: events, detached runs (`Agent::start`) and cancellation, the finished-turn rule, models, tracing, hooks, approval policies, per-step tools, retention and a context budget |
//! | [`durable`] | durable suspension: approvals, client and human tools, `resolve` from any process, deadlines, crash safety, stores |
//! | [`schema_first`] | latent tools, activities bound per environment, fakes, composed calls for models without tool calling |
//! | [`providers`] | choosing a model provider without code (`APTIX_PROVIDER`), what each adapter supports, a mock of each to run against |
//! | [`openai_chat`] | OpenAI-compatible Chat Completions: OpenAI, vLLM, llama.cpp, Ollama, DeepSeek; reasoning sent back, servers without streamed tool calls |
//! | [`openai_responses`] | OpenAI's Responses API: reasoning items kept across calls, stateless or `previous_response_id`, hosted web search, file search, code interpreter |
//! | [`anthropic`] | Anthropic Messages: thinking, server tools (web search, web fetch, code execution), strict tools, prompt caching |
//! | [`gemini`] | Gemini natively: thought signatures, parallel calls, Google Search, code execution, URL context |
//! | [`mcp_server`] | the catalog as an MCP server (feature `mcp`) |
//! | [`mcp_client`] | other MCP servers' tools in your catalog (feature `mcp-client`) |
//! | [`tool_search`] | hundreds of tools behind a search (feature `tool-search`) |
//! | [`security`] | the threat model, what is promised and what enforces it, redaction, every limit |
//! | [`testing`] | `aptix-testkit`: the harness, catalog checks, schema snapshots, scripted and mock models |
//! | [`cli`] | the developer CLI for any binary with tools (feature `cli`) |
//! | [`limits`] | what Aptix does not do yet, in one place |
//!
//! The examples (`cargo run --example NAME`):
//!
//! | example | shows |
//! | --- | --- |
//! | `quickstart` | an agent run, streamed: two parallel tool calls, then the answer; the scripted model offline, or any OpenAI-compatible endpoint with `OPENAI_BASE_URL` (`APTIX_CALL_MODE=composed` for a model without tool calling) |
//! | `hello_world` | the reference tool, `agent_hello_world`, through the executor |
//! | `get_current_time` | a range-checked optional parameter |
//! | `get_location` | a client tool declared on its arguments struct |
//! | `send_email` | an approval-gated tool; typed state; the call id as idempotency key |
//! | `approval` | a durable conversation: `send_email` suspends, a person approves, denies or edits it on the terminal |
//! | `client_tool` | a client tool suspended in SQLite and resolved by a second process with only the two ids |
//! | `schema_first` | a latent tool, one with a development activity, one whose activity `APTIX_ENV=prod` switches to production's |
//! | `live` | one run rendered live: streamed arguments, a progress bar and partial results, an approval policy, the `RunSummary` |
//! | `chart` | `ToolReturn`: a PNG chart reaches the model beside the series' summary |
//! | `mcp_client` | the quickstart agent with a Python MCP server's tools mounted (prefixed, one gated) |
//! | `mcp_conformance` | the MCP server the conformance suite and `tests/mcp/mcp_client.rs` run against |
//! | `cli` | the developer CLI over the example tools |

#[doc = include_str!("../docs/declaring.md")]
pub mod declaring {}

#[doc = include_str!("../docs/running.md")]
pub mod running {}

#[doc = include_str!("../docs/agent.md")]
pub mod agent {}

// The page shows tests as a user writes them, `#[test]` included; a hidden
// macro in each snippet turns the test into a function the doctest calls,
// so they do run.
#[allow(clippy::test_attr_in_doctest)]
#[doc = include_str!("../docs/testing.md")]
pub mod testing {}

#[doc = include_str!("../docs/durable.md")]
pub mod durable {}

#[doc = include_str!("../docs/schema_first.md")]
pub mod schema_first {}

#[doc = include_str!("../docs/providers.md")]
pub mod providers {}

#[doc = include_str!("../docs/openai_chat.md")]
pub mod openai_chat {}

#[doc = include_str!("../docs/openai_responses.md")]
pub mod openai_responses {}

#[doc = include_str!("../docs/anthropic.md")]
pub mod anthropic {}

#[doc = include_str!("../docs/gemini.md")]
pub mod gemini {}

#[doc = include_str!("../docs/mcp_server.md")]
pub mod mcp_server {}

#[doc = include_str!("../docs/mcp_client.md")]
pub mod mcp_client {}

#[doc = include_str!("../docs/tool_search.md")]
pub mod tool_search {}

#[doc = include_str!("../docs/security.md")]
pub mod security {}

#[doc = include_str!("../docs/cli.md")]
pub mod cli {}

#[doc = include_str!("../docs/limits.md")]
pub mod limits {}
