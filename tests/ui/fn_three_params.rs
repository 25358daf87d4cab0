use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A name.
    pub name: String,
}

/// Greets.
#[agent_tool(name = "greet", usage = "Call to greet.")]
async fn greet(args: Args, ctx: &ToolContext, loud: bool) -> Result<String, ToolError> {
    let _ = (ctx, loud);
    Ok(args.name)
}

fn main() {}
