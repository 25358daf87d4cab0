use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A name.
    pub name: String,
}

/// Greets.
#[agent_tool(name = "greet", usage = "Call to greet.")]
async fn greet(args: Args) -> Result<String, ToolError> {
    Ok(args.name)
}

fn main() {
    assert_eq!(GreetTool::NAME, "greet");
    assert_eq!(GreetTool::USAGE, "Call to greet.");
    assert_eq!(GreetTool::DESCRIPTION, "Greets.");
    assert_eq!(GreetTool::EXECUTOR, aptix::ExecutorKind::Server);
    assert_eq!(GreetTool::APPROVAL, aptix::Approval::Auto);
    assert_eq!(GreetTool::TIMEOUT, None);
    let _ = greet;
}
