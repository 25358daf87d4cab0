//! MCP: the catalog served as an MCP server (in process, over HTTP, to the
//! official Python SDK) and other servers' tools mounted with
//! `McpToolset`, hostile peers on both sides included.
//!
//! Each file is a module of this one test binary; `tests/common/` holds the
//! set-up that every test binary shares.

#[path = "../common/mod.rs"]
mod common;

#[path = "../../examples/get_current_time.rs"]
mod get_current_time;
#[path = "../../examples/get_location.rs"]
mod get_location;
#[path = "../../examples/hello_world.rs"]
mod hello_world;
#[path = "../../examples/send_email.rs"]
mod send_email;

// `pub`: the modules' `pub` items (documented for `missing_docs`) stay
// public, as they were at the root of a test crate of their own.
pub mod mcp_client;
pub mod mcp_hostile;
pub mod mcp_http_limits;
pub mod mcp_process_group;
pub mod mcp_python;
pub mod mcp_server;
