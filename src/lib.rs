// The crate's front page is the README; the links below point its
// references at the guide when rustdoc renders it (the README's own
// definitions, for GitHub, come later and lose: the first one counts).
//! [guide]: crate::guide
//! [declaring]: crate::guide::declaring
//! [running]: crate::guide::running
//! [agent]: crate::guide::agent
//! [providers]: crate::guide::providers
//! [durable]: crate::guide::durable
//! [schema_first]: crate::guide::schema_first
//! [mcp_server]: crate::guide::mcp_server
//! [mcp_client]: crate::guide::mcp_client
//! [tool_search]: crate::guide::tool_search
//! [security]: crate::guide::security
//! [testing]: crate::guide::testing
//! [cli]: crate::guide::cli
//! [limits]: crate::guide::limits
//! [examples]: https://github.com/aptix-rs/aptix/tree/main/examples
//! [contributing]: https://github.com/aptix-rs/aptix/blob/main/CONTRIBUTING.md
//! [benchmarks]: https://github.com/aptix-rs/aptix/blob/main/BENCHMARKS.md
#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub mod guide;

// The root holds what a user writes most; everything else has one home
// module below. The macro reaches its support through `__private` only.
pub use aptix_macros::agent_tool;

// The contract of a tool.
pub use aptix_core::{Content, ErrorCode, Tool, ToolContext, ToolError, ToolReturn};
// Declared tools, gathered.
pub use aptix_core::{Catalog, CatalogBuilder, Dialect, ToolDefinition, ToolEntry, tools};
// A call in, an outcome out.
pub use aptix_core::{Envelope, Executor, Outcome, ToolCall};
// The agent loop, plain and durable.
pub use aptix_core::{
    Agent, AgentEvent, Conversation, DoneReason, DurableAgent, Input, Resolution,
    agent::AgentBuilder,
};

// One module per concept (`agent`, `catalog`, `durable`, `mcp`, `model`,
// `store`, ...), each present when `aptix-core` builds it.
pub use aptix_core::__modules::*;
// Defined inside `catalog`, documented here (rustdoc does not follow a
// glob to a module defined elsewhere).
#[doc(inline)]
pub use aptix_core::activity;

// Algorithms the runtime applies on its own; public for the tests and tools
// that check them, not part of what a user writes.
#[doc(hidden)]
pub use aptix_core::{secrets, validate};

#[doc(hidden)]
pub use aptix_core::__private;

/// Everything a tool declaration needs, in one import.
pub mod prelude {
    pub use aptix_core::{Content, ErrorCode, Tool, ToolContext, ToolError, ToolReturn};
    pub use aptix_macros::agent_tool;
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
}
