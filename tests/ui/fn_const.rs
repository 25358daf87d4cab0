// A `const` function cannot be a tool.
use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A count.
    pub count: u32,
}

/// Greets.
#[agent_tool(name = "greet", usage = "Call to greet.")]
const fn greet(_args: Args) -> Result<String, ToolError> {
    Ok(String::new())
}

fn main() {}
