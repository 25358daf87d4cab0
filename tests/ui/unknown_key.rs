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
#[agent_tool(name = "greet", usage = "Call to greet.", max_calls = 3)]
async fn greet(args: Args) -> Result<Out, ToolError> {
    Ok(Out { message: args.name })
}

fn main() {}
