// An `unsafe` function cannot be a tool: the model decides its arguments.
use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A name.
    pub name: String,
}

/// Greets.
#[agent_tool(name = "greet", usage = "Call to greet.")]
async unsafe fn greet(args: Args) -> Result<String, ToolError> {
    Ok(args.name)
}

fn main() {}
