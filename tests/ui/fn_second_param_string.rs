use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A name.
    pub name: String,
}

/// Greets.
#[agent_tool(name = "greet", usage = "Call to greet.")]
async fn greet(args: Args, greeting: String) -> Result<String, ToolError> {
    Ok(format!("{greeting}, {}", args.name))
}

fn main() {}
