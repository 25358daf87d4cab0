use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Text {
    /// The text.
    pub text: String,
}

/// Classifies a text.
#[agent_tool(name = "sentiment", usage = "Call to classify a text.", executor = latent)]
async fn sentiment(args: Text) -> Result<String, ToolError> {
    Ok(args.text)
}

fn main() {}
