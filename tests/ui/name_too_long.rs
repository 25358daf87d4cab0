use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A name.
    pub name: String,
}

/// The result.
#[derive(Serialize, JsonSchema)]
pub struct Out {
    /// A message.
    pub message: String,
}

/// Greets.
#[agent_tool(name = "a1234567890123456789012345678901234567890123456789012345678901234", usage = "Call to greet.")]
async fn greet(args: Args) -> Result<Out, ToolError> {
    Ok(Out { message: args.name })
}

fn main() {}
