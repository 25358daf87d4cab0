use aptix::prelude::*;

/// Where the user is.
#[derive(Deserialize, JsonSchema)]
pub struct Location {
    /// The city.
    pub city: String,
}

/// A client tool runs elsewhere: nothing here reports its progress.
#[agent_tool(
    name = "locate",
    usage = "Call to find the user.",
    executor = client,
    output = Location,
    progressive = true
)]
#[derive(Deserialize, JsonSchema)]
pub struct Locate {
    /// Why.
    pub reason: String,
}

fn main() {}
