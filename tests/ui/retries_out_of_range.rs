use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Day {
    /// The day.
    pub day: String,
}

/// Books a day, letting the model try a hundred times.
#[agent_tool(name = "book", usage = "Call to book a day.", retries = 100)]
async fn book(args: Day) -> Result<String, ToolError> {
    Ok(args.day)
}

fn main() {}
