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
}

/// Another tool's arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Other {
    /// A number.
    pub n: u32,
}

fn main() {
    // The activity reads another type than the tool's arguments.
    let _ = aptix::activity::Activities::new()
        .bind::<Sentiment, _, _>(|args: Other, _ctx| async move {
            Ok(Verdict { label: args.n.to_string() })
        });
    // The activity returns another type than the tool's output.
    let _ = aptix::activity::Activities::new()
        .bind::<Sentiment, _, _>(|args: Sentiment, _ctx| async move { Ok(args.text) });
}
