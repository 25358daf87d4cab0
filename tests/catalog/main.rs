//! Tools and their catalog: building and checking it, the executor, the
//! example tools (their behaviour, schemas and CLI), hostile schemas, and a
//! property that no arguments make the executor panic.
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
#[path = "../../examples/live.rs"]
mod live;
#[path = "../../examples/schema_first.rs"]
mod schema_first;
#[path = "../../examples/send_email.rs"]
mod send_email;

// `pub`: the modules' `pub` items (documented for `missing_docs`) stay
// public, as they were at the root of a test crate of their own.
pub mod catalog;
pub mod catalog_errors;
pub mod cli;
pub mod example_tools;
pub mod executor;
pub mod hostile_schemas;
pub mod never_panics;
pub mod schemas;
