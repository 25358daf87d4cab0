use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A name.
    pub name: String,
}

/// Internal note for maintainers: keep this in sync with the greeting service.
#[agent_tool(
    name = "greet",
    usage = "Call to greet.",
    description = "Creates a friendly greeting."
)]
async fn greet(args: Args) -> Result<String, ToolError> {
    Ok(args.name)
}

fn main() {
    assert_eq!(GreetTool::META.description, "Creates a friendly greeting.");
}
