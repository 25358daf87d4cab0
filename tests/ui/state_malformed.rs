use aptix::prelude::*;

/// A database pool.
pub struct Db;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Order {
    /// The order.
    pub id: u32,
}

/// A list is written in brackets.
#[agent_tool(name = "no_brackets", usage = "Call to archive.", state = Db)]
async fn no_brackets(args: Order, ctx: &ToolContext) -> Result<u32, ToolError> {
    let _ = ctx;
    Ok(args.id)
}

/// Types, not strings.
#[agent_tool(name = "quoted", usage = "Call to archive.", state = ["Db"])]
async fn quoted(args: Order, ctx: &ToolContext) -> Result<u32, ToolError> {
    let _ = ctx;
    Ok(args.id)
}

/// The call form of other attributes is not this one's.
#[agent_tool(name = "called", usage = "Call to archive.", state(Db))]
async fn called(args: Order, ctx: &ToolContext) -> Result<u32, ToolError> {
    let _ = ctx;
    Ok(args.id)
}

fn main() {}
