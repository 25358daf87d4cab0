use aptix::prelude::*;

/// Searches the web.
#[agent_tool(name = "web_search", usage = "Call to search the web.", executor = provider)]
#[derive(Deserialize, JsonSchema)]
pub enum WebSearch {
    /// Search for pages.
    Pages { query: String },
    /// Search for images.
    Images { query: String },
}

fn main() {}
