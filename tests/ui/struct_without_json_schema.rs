use aptix::prelude::*;

/// Searches the web at the model provider.
#[agent_tool(name = "web_search", usage = "Call to search the web.", executor = provider)]
#[derive(Deserialize)]
pub struct WebSearch {
    /// What to search for.
    pub query: String,
}

fn main() {}
