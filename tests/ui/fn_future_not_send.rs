use aptix::prelude::*;
use std::rc::Rc;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A name.
    pub name: String,
}

async fn pause() {}

/// Greets.
#[agent_tool(name = "greet", usage = "Call to greet.")]
async fn greet(args: Args) -> Result<String, ToolError> {
    let shared = Rc::new(args.name);
    pause().await;
    Ok(shared.to_string())
}

fn main() {}
