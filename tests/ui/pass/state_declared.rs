use aptix::context::StateType;
use aptix::prelude::*;

/// A database pool.
pub struct Db;

/// A mail client, named by its path.
pub mod clients {
    /// Sends mail.
    pub struct Mailer;
}

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Order {
    /// The order.
    pub id: u32,
}

/// Archives an order, reading both services from its context.
#[agent_tool(
    name = "archive_order",
    usage = "Call to archive a finished order.",
    state = [Db, clients::Mailer],
)]
pub async fn archive_order(args: Order, ctx: &ToolContext) -> Result<u32, ToolError> {
    ctx.require_state::<Db>()?;
    ctx.require_state::<clients::Mailer>()?;
    Ok(args.id)
}

/// Counts orders; one service, with a trailing comma in the list.
#[agent_tool(name = "count_orders", usage = "Call to count orders.", state = [Db,])]
pub async fn count_orders(args: Order, ctx: &ToolContext) -> Result<u32, ToolError> {
    ctx.require_state::<Db>()?;
    Ok(args.id)
}

/// The result of a latent tool whose activity reads a service.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    /// The summary.
    pub text: String,
}

/// Summarises an order (its activity reads the database).
#[agent_tool(
    name = "summarise_order",
    usage = "Call to summarise an order.",
    output = Summary,
    state = [Db],
)]
#[derive(Deserialize, JsonSchema)]
pub struct SummariseOrder {
    /// The order.
    pub id: u32,
}

fn main() {
    assert_eq!(
        ArchiveOrderTool::META.state,
        [StateType::of::<Db>(), StateType::of::<clients::Mailer>()]
    );
    assert_eq!(CountOrdersTool::META.state, [StateType::of::<Db>()]);
    assert_eq!(SummariseOrder::META.state, [StateType::of::<Db>()]);
}
