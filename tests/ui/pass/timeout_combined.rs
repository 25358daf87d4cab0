use aptix::prelude::*;
use std::time::Duration;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A name.
    pub name: String,
}

/// Greets slowly.
#[agent_tool(name = "greet", usage = "Call to greet.", timeout = "1m30s")]
async fn greet(args: Args) -> Result<String, ToolError> {
    Ok(args.name)
}

fn main() {
    assert_eq!(GreetTool::META.timeout, Some(Duration::from_secs(90)));
}
