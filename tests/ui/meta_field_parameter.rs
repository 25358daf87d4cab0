use aptix::prelude::*;

/// What a text's sentiment is.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct Verdict {
    /// The label.
    pub label: String,
}

/// Classifies a text.
#[agent_tool(name = "sentiment", usage = "Call to classify a text.", output = Verdict)]
#[derive(Deserialize, JsonSchema)]
pub struct Sentiment {
    /// The text.
    pub text: String,
    /// Clashes with the meta field of the same name.
    #[serde(rename = "_output")]
    pub output: String,
    /// Underscored by its Rust name.
    pub _reason: String,
}

fn main() {}
