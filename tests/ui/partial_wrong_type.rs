use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Rows {
    /// How many.
    pub count: u32,
}

/// Exports rows: declares `u32` partial results, takes a context of `String`s.
#[agent_tool(name = "export", usage = "Call to export rows.", progressive = true, partial = u32)]
async fn export(args: Rows, ctx: &ToolContext<String>) -> Result<u32, ToolError> {
    ctx.partial(&"one".to_owned());
    Ok(args.count)
}

fn main() {}
