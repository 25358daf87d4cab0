use aptix::prelude::*;

/// One row.
#[derive(Serialize, JsonSchema)]
pub struct Row {
    /// Its number.
    pub id: u32,
}

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Rows {
    /// How many.
    pub count: u32,
}

/// Partial results of a declared type.
#[agent_tool(name = "export", usage = "Call to export rows.", progressive = true, partial = Row)]
async fn export(args: Rows, ctx: &ToolContext<Row>) -> Result<u32, ToolError> {
    for id in 0..args.count {
        ctx.partial(&Row { id });
        ctx.progress(f64::from(id), Some(f64::from(args.count)), None);
    }
    Ok(args.count)
}

/// Partial results of its output type, through a full path.
#[agent_tool(name = "count", usage = "Call to count.", progressive = true)]
async fn count(args: Rows, ctx: &aptix::ToolContext<Vec<u32>>) -> Result<Vec<u32>, ToolError> {
    let all: Vec<u32> = (0..args.count).collect();
    ctx.partial(&all);
    Ok(all)
}

/// Progressive with progress only: a plain context.
#[agent_tool(name = "wait", usage = "Call to wait.", progressive = true)]
async fn wait(args: Rows, ctx: &ToolContext) -> Result<u32, ToolError> {
    ctx.progress(1.0, None, Some("waiting"));
    Ok(args.count)
}

fn main() {
    assert!(ExportTool::META.progressive);
    assert!(CountTool::META.progressive);
    assert!(WaitTool::META.progressive);
}
