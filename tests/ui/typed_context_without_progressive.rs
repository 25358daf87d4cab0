use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Rows {
    /// How many.
    pub count: u32,
}

/// Exports rows.
#[agent_tool(name = "export", usage = "Call to export rows.")]
async fn export(args: Rows, ctx: &ToolContext<u32>) -> Result<u32, ToolError> {
    ctx.partial(&args.count);
    Ok(args.count)
}

fn main() {}
