use std::time::Duration;

use aptix::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// The order to charge.
    pub order_id: String,
}

/// Charges an order once a person agrees.
#[agent_tool(
    name = "charge",
    usage = "Call to charge an order.",
    approval = requires_approval,
    suspend_timeout = "1h30m",
    idempotent = true,
)]
async fn charge(args: Args) -> Result<String, ToolError> {
    Ok(args.order_id)
}

fn main() {
    assert_eq!(
        ChargeTool::META.suspend_timeout,
        Some(Duration::from_secs(5400))
    );
    assert!(ChargeTool::META.annotations.idempotent);
    assert_eq!(
        ChargeTool::definition().ok().map(|d| d.idempotent()),
        Some(true)
    );
}
