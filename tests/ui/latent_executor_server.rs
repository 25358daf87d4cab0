use aptix::prelude::*;

/// What a text's sentiment is.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct Verdict {
    /// The label.
    pub label: String,
}

/// A schema with an output, declared for a server it has no code for.
#[agent_tool(
    name = "sentiment",
    usage = "Call to classify a text.",
    executor = server,
    output = Verdict
)]
#[derive(Deserialize, JsonSchema)]
pub struct Sentiment {
    /// The text.
    pub text: String,
}

fn main() {}
