// A function with an `extern` ABI cannot be a tool.
use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A name.
    pub name: String,
}

/// Greets.
#[agent_tool(name = "greet", usage = "Call to greet.")]
async extern "C" fn greet(args: Args) -> Result<String, ToolError> {
    Ok(args.name)
}

fn main() {}
