use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Query {
    /// What to look for.
    pub q: String,
}

/// Searches; the retention is misspelled and out of range.
#[agent_tool(name = "search", usage = "Call to search.", retention = "last(3)")]
async fn search(args: Query) -> Result<String, ToolError> {
    Ok(args.q)
}

/// Reads; a result kept for no turns at all.
#[agent_tool(name = "read", usage = "Call to read.", retention = "turns(0)")]
async fn read(args: Query) -> Result<String, ToolError> {
    Ok(args.q)
}

/// The provider keeps its tools' results.
#[agent_tool(name = "web_search", usage = "Call to search the web.", executor = provider, retention = "keep_last(1)")]
#[derive(Deserialize, JsonSchema)]
pub struct WebSearch {
    /// The query.
    pub q: String,
}

/// Not a string.
#[agent_tool(name = "list", usage = "Call to list.", retention = keep_last)]
async fn list(args: Query) -> Result<String, ToolError> {
    Ok(args.q)
}

fn main() {}
