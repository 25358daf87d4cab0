use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize)]
pub struct Args {
    /// A name.
    pub name: String,
}

/// Greets.
#[agent_tool(name = "greet", usage = "Call to greet.")]
async fn greet(args: Args) -> Result<String, ToolError> {
    Ok(args.name)
}

fn main() {}
