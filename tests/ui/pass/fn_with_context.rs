use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct HelloArgs {
    /// A name.
    pub name: String,
}

/// The greeting.
#[derive(Serialize, JsonSchema)]
pub struct Greeting {
    /// The message.
    pub message: String,
    /// The conversation it was made in.
    pub conversation_id: Option<String>,
}

/// Greets, naming the conversation.
#[agent_tool(
    name = "agent_hello_world",
    usage = "Call when the user asks to be greeted.",
    executor = server,
    approval = requires_approval,
)]
pub async fn hello_world(args: HelloArgs, ctx: &ToolContext) -> Result<Greeting, ToolError> {
    Ok(Greeting {
        message: format!("Hello, {}!", args.name),
        conversation_id: ctx.conversation_id().map(str::to_owned),
    })
}

fn main() {
    assert_eq!(HelloWorldTool::NAME, "agent_hello_world");
    assert_eq!(
        HelloWorldTool::META.approval,
        aptix::meta::Approval::RequiresApproval
    );
}
