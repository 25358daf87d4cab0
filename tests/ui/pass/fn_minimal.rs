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
    assert_eq!(GreetTool::META.usage, "Call to greet.");
    assert_eq!(GreetTool::META.description, "Greets.");
    assert_eq!(GreetTool::META.executor, aptix::meta::ExecutorKind::Server);
    assert_eq!(GreetTool::META.approval, aptix::meta::Approval::Auto);
    assert_eq!(GreetTool::META.timeout, None);
    let _ = greet;
}
