use aptix::meta::Retention;
use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Query {
    /// What to look for.
    pub q: String,
}

/// Searches; only the last three results stay whole in requests.
#[agent_tool(name = "search", usage = "Call to search.", retention = "keep_last(3)")]
async fn search(args: Query) -> Result<String, ToolError> {
    Ok(args.q)
}

/// Reads the news; a result stays whole for ten model turns.
#[agent_tool(name = "news", usage = "Call to read the news.", retention = "turns(10)")]
async fn news(args: Query) -> Result<String, ToolError> {
    Ok(args.q)
}

/// The user's profile, never evicted (a struct tool).
#[agent_tool(name = "profile", usage = "Call to read the profile.", executor = human, output = String, retention = "never_evict")]
#[derive(Deserialize, JsonSchema)]
pub struct Profile {
    /// Whose.
    pub who: String,
}

fn main() {
    assert_eq!(SearchTool::META.retention, Retention::KeepLast(3));
    assert_eq!(NewsTool::META.retention, Retention::Turns(10));
    assert_eq!(Profile::META.retention, Retention::NeverEvict);
}
