use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Text {
    /// The text.
    pub text: String,
}

/// A function tool is its own code: it names no activity.
#[agent_tool(name = "shout", usage = "Call to shout a text.", activity = "loud")]
async fn shout(args: Text) -> Result<String, ToolError> {
    Ok(args.text.to_uppercase())
}

fn main() {}
