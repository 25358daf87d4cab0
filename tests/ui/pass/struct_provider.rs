use aptix::prelude::*;

/// Searches the web at the model provider.
#[agent_tool(
    name = "web_search",
    usage = "Call when the answer needs current information.",
    executor = provider,
)]
#[derive(Deserialize, JsonSchema)]
pub struct WebSearch {
    /// What to search for.
    pub query: String,
}

fn main() {
    assert_eq!(WebSearch::META.executor, aptix::meta::ExecutorKind::Provider);
}
