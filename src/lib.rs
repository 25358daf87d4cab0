//! # Aptix
//!
//! Define the tools an LLM agent may call with one attribute, and run them
//! safely. See the README for the guide; this page is the reference.
//!
//! ```
//! use aptix::prelude::*;
//!
//! /// Arguments of `agent_hello_world`.
//! #[derive(Deserialize, JsonSchema)]
//! pub struct HelloArgs {
//!     /// The name of the person to greet.
//!     pub name: String,
//! }
//!
//! #[derive(Serialize, JsonSchema)]
//! pub struct Greeting {
//!     /// The greeting.
//!     pub message: String,
//! }
//!
//! /// Creates a friendly greeting using the user's name.
//! #[agent_tool(name = "agent_hello_world", usage = "Call when the user asks to be greeted.")]
//! async fn hello_world(args: HelloArgs) -> Result<Greeting, ToolError> {
//!     Ok(Greeting { message: format!("Hello, {}!", args.name) })
//! }
//!
//! assert_eq!(HelloWorldTool::NAME, "agent_hello_world");
//! ```
//!
//! ## The attribute
//!
//! `#[agent_tool(name = "...", usage = "...", executor = server, approval = auto)]`
//! goes on an `async fn` or on an arguments struct.
//!
//! | key | value | default |
//! | --- | --- | --- |
//! | `name` | `^[A-Za-z0-9_-]{1,64}$`, unique | required |
//! | `usage` | when the model should call the tool | required |
//! | `description` | what the tool does | the doc comment |
//! | `executor` | `server`, `client`, `human`, `provider` | `server` |
//! | `approval` | `auto`, `requires_approval` | `auto` |
//! | `output` | the type a client or person sends back | required for `client`/`human` |
//! | `timeout` | `"500ms"`, `"30s"`, `"2m"`, `"1m30s"` | the executor's (60 s) |
//! | `redact` | JSON pointers hidden from events and logs, `["/password"]` | none |
//!
//! On a function, the macro adds a unit struct named after it in PascalCase
//! with a `Tool` suffix (`hello_world` → `HelloWorldTool`) implementing
//! [`Tool`] and [`ToolFn`]; the function itself stays callable as written.
//! On a struct, the struct itself implements [`Tool`].

#![forbid(unsafe_code)]

pub mod guide;

pub use aptix_core::*;
pub use aptix_macros::agent_tool;

/// Everything a tool declaration needs, in one import.
pub mod prelude {
    pub use aptix_core::{Content, Tool, ToolContext, ToolError, ToolReturn};
    pub use aptix_macros::agent_tool;
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
}
