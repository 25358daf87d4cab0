use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A name.
    pub name: String,
}

/// Greets.
#[agent_tool(name = "greet", usage = "Call to greet.")]
async fn greet<T: Default>(args: Args) -> Result<String, ToolError> {
    let _ = T::default();
    Ok(args.name)
}

fn main() {}
