use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A name.
    pub name: String,
}

/// Greets.
#[agent_tool(
    timeout = "500ms",
    approval = requires_approval,
    usage = "Call to greet.",
    executor = server,
    name = "greet",
)]
async fn greet(args: Args) -> Result<String, ToolError> {
    Ok(args.name)
}

fn main() {
    assert_eq!(GreetTool::NAME, "greet");
    assert_eq!(
        GreetTool::META.timeout,
        Some(std::time::Duration::from_millis(500))
    );
}
