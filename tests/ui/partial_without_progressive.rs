use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Rows {
    /// How many.
    pub count: u32,
}

/// Exports rows.
#[agent_tool(name = "export", usage = "Call to export rows.", partial = u32)]
async fn export(args: Rows) -> Result<u32, ToolError> {
    Ok(args.count)
}

fn main() {}
