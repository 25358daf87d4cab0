use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Rows {
    /// How many.
    pub count: u32,
}

/// One row: serializable, but without a schema.
#[derive(Serialize)]
pub struct Row {
    /// Its number.
    pub number: u32,
}

/// Exports rows, reporting each as a partial result.
#[agent_tool(name = "export", usage = "Call to export rows.", progressive = true, partial = Row)]
async fn export(args: Rows, ctx: &ToolContext<Row>) -> Result<u32, ToolError> {
    ctx.partial(&Row { number: 1 });
    Ok(args.count)
}

fn main() {}
