use aptix::prelude::*;

/// Where the user is.
#[derive(Deserialize, JsonSchema)]
pub struct Location {
    /// The city.
    pub city: String,
}

/// A client tool: no code of ours asks the model to try again.
#[agent_tool(
    name = "locate",
    usage = "Call to find the user.",
    executor = client,
    output = Location,
    retries = 2
)]
#[derive(Deserialize, JsonSchema)]
pub struct Locate {
    /// Why.
    pub reason: String,
}

fn main() {}
