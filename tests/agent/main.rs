//! The agent loop and what runs in it: limits, approvals, call events,
//! elicitation, hooks, progressive tools, redaction, retention, retries,
//! schema-first tools and tool search.
//!
//! Each file is a module of this one test binary; `tests/common/` holds the
//! set-up that every test binary shares.

#[path = "../common/mod.rs"]
mod common;

#[path = "../../examples/get_location.rs"]
mod get_location;
#[path = "../../examples/hello_world.rs"]
mod hello_world;

// `pub`: the modules' `pub` items (documented for `missing_docs`) stay
// public, as they were at the root of a test crate of their own.
pub mod agent_limits;
pub mod agent_loop;
pub mod approval_policy;
pub mod call_events;
pub mod detached_run;
pub mod elicitation;
pub mod hooks;
pub mod hostile_composed;
pub mod progressive;
pub mod provider_events;
pub mod redaction;
pub mod retention;
pub mod retries;
pub mod schema_first;
pub mod tool_context;
pub mod tool_search;
pub mod tracing_spans;
