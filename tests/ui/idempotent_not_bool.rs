use aptix::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// The order to charge.
    pub order_id: String,
}

/// Charges an order.
#[agent_tool(name = "charge", usage = "Call to charge an order.", idempotent = "yes")]
async fn charge(args: Args) -> Result<String, ToolError> {
    Ok(args.order_id)
}

fn main() {}
