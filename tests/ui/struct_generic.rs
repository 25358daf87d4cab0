use aptix::prelude::*;

/// Searches the web.
#[agent_tool(name = "web_search", usage = "Call to search the web.", executor = provider)]
#[derive(Deserialize, JsonSchema)]
pub struct WebSearch<Q> {
    /// What to search for.
    pub query: Q,
}

fn main() {}
