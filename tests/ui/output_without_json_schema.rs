use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A name.
    pub name: String,
}

/// The greeting.
#[derive(Serialize)]
pub struct Greeting {
    /// The message.
    pub message: String,
}

/// Greets.
#[agent_tool(name = "greet", usage = "Call to greet.")]
async fn greet(args: Args) -> Result<Greeting, ToolError> {
    Ok(Greeting { message: args.name })
}

fn main() {}
