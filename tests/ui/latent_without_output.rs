use aptix::prelude::*;

/// Classifies a text.
#[agent_tool(name = "sentiment", usage = "Call to classify a text.", executor = latent)]
#[derive(Deserialize, JsonSchema)]
pub struct Sentiment {
    /// The text.
    pub text: String,
}

fn main() {}
