// The crate's front page is the README; the links below point its
// references at the guide when rustdoc renders it (the README's own
// definitions, for GitHub, come later and lose: the first one counts).
//! [guide]: crate::guide
//! [declaring]: crate::guide::declaring
//! [running]: crate::guide::running
//! [agent]: crate::guide::agent
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

pub use aptix_core::*;
pub use aptix_macros::agent_tool;

/// Everything a tool declaration needs, in one import.
pub mod prelude {
    pub use aptix_core::{Content, Tool, ToolContext, ToolError, ToolReturn};
    pub use aptix_macros::agent_tool;
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
}
