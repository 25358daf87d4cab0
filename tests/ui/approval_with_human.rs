use aptix::prelude::*;

/// The answer.
#[derive(Deserialize, JsonSchema)]
pub struct Answer {
    /// Whether the user agreed.
    pub agreed: bool,
}

/// Asks the user to confirm.
#[agent_tool(name = "confirm", usage = "Call to ask for confirmation.", executor = human, output = Answer, approval = requires_approval)]
#[derive(Deserialize, JsonSchema)]
pub struct Confirm {
    /// The question.
    pub question: String,
}

fn main() {}
