use aptix::prelude::*;

/// A database pool.
pub struct Db;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Order {
    /// The order.
    pub id: u32,
}

/// Declares state, and takes no context to read it from.
#[agent_tool(name = "archive", usage = "Call to archive.", state = [Db])]
async fn archive(args: Order) -> Result<u32, ToolError> {
    Ok(args.id)
}

/// Declares one type twice, and nothing at all.
#[agent_tool(name = "twice", usage = "Call to archive.", state = [Db, Db])]
async fn twice(args: Order, ctx: &ToolContext) -> Result<u32, ToolError> {
    let _ = ctx;
    Ok(args.id)
}

/// Declares nothing.
#[agent_tool(name = "nothing", usage = "Call to archive.", state = [])]
async fn nothing(args: Order, ctx: &ToolContext) -> Result<u32, ToolError> {
    let _ = ctx;
    Ok(args.id)
}

/// A client tool runs no code here, so it reads no context.
#[agent_tool(name = "pick", usage = "Call to pick.", executor = client, output = u32, state = [Db])]
#[derive(Deserialize, JsonSchema)]
pub struct Pick {
    /// What to pick from.
    pub from: u32,
}

/// State that cannot be shared between calls.
#[agent_tool(name = "local", usage = "Call to archive.", state = [std::rc::Rc<Db>])]
async fn local(args: Order, ctx: &ToolContext) -> Result<u32, ToolError> {
    let _ = ctx;
    Ok(args.id)
}

fn main() {}
