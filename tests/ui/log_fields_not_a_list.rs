use aptix::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// The city.
    pub city: String,
}

/// Ships.
#[agent_tool(name = "ship", usage = "Call to ship.", log_fields = "/city")]
async fn ship(args: Args) -> Result<String, ToolError> {
    Ok(args.city)
}

fn main() {}
