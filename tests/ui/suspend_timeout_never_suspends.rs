use aptix::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// Who to greet.
    pub name: String,
}

/// Greets someone.
#[agent_tool(name = "greet", usage = "Call to greet.", suspend_timeout = "15m")]
async fn greet(args: Args) -> Result<String, ToolError> {
    Ok(args.name)
}

fn main() {}
