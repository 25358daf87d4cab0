use aptix::prelude::*;

/// The person's answer.
#[derive(Deserialize, Serialize, JsonSchema)]
pub struct Answer {
    /// Whether the person agreed.
    pub agreed: bool,
}

/// Asks the user to confirm an action.
#[agent_tool(
    name = "confirm",
    usage = "Call before doing anything that cannot be undone.",
    executor = human,
    output = Answer,
)]
#[derive(Deserialize, JsonSchema)]
pub struct Confirm {
    /// The question to ask.
    pub question: String,
}

fn main() {
    assert_eq!(Confirm::META.executor, aptix::meta::ExecutorKind::Human);
}
