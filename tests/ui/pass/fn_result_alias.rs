use aptix::prelude::*;

type R<T> = Result<T, ToolError>;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A name.
    pub name: String,
}

/// Greets.
#[agent_tool(name = "greet", usage = "Call to greet.")]
async fn greet(args: Args) -> R<String> {
    Ok(args.name)
}

fn main() {
    assert_eq!(GreetTool::NAME, "greet");
}
