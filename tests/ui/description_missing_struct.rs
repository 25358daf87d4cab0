use aptix::prelude::*;

#[agent_tool(name = "web_search", usage = "Call to search the web.", executor = provider)]
#[derive(Deserialize, JsonSchema)]
pub struct WebSearch {
    /// What to search for.
    pub query: String,
}

fn main() {}
