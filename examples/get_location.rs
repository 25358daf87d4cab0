//! `get_location`, a client tool declared on its arguments struct: the
//! server validates the model's request; the user's device does the rest
//! and sends a `Location` back.
//!
//! `cargo run --example get_location`
// The tool types are `pub` as they would be in a library crate; here they
// are also included as modules of tests and benches, where nothing re-exports them.
#![allow(unreachable_pub)]

use aptix::prelude::*;

/// Asks the user's device for its current location.
#[agent_tool(
    name = "get_location",
    usage = "Call when the answer depends on where the user is right now.",
    executor = client,
    output = Location
)]
#[derive(Debug, Deserialize, JsonSchema)]
// The fields are read by the client that runs the tool, not by server code.
#[allow(dead_code)]
pub struct GetLocation {
    /// Why the location is needed; shown to the user in the permission prompt.
    #[schemars(length(min = 1, max = 200))]
    pub reason: String,
    /// How precise the location must be.
    #[serde(default)]
    pub precision: Precision,
}

/// How precise a location must be.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// Within a few kilometres: enough for weather or time zones.
    #[default]
    City,
    /// As precise as the device can tell.
    Exact,
}

/// Where the device is, as the client reports it.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Location {
    /// Degrees north of the equator.
    #[schemars(range(min = -90.0, max = 90.0))]
    pub latitude: f64,
    /// Degrees east of Greenwich.
    #[schemars(range(min = -180.0, max = 180.0))]
    pub longitude: f64,
    /// Radius of uncertainty in metres.
    pub accuracy_m: f64,
}

#[allow(dead_code)]
#[tokio::main]
async fn main() {
    let executor = aptix::Executor::new(
        aptix::Catalog::builder()
            .tool::<GetLocation>()
            .build()
            .unwrap_or_else(|error| panic!("{error}")),
    );
    let call = aptix::ToolCall::new("call-1", "get_location", r#"{"reason":"local weather"}"#);
    let execution = executor.execute(&call, &ToolContext::new()).await;
    println!(
        "requires client execution: {}\n{:?}",
        execution.requires_client_execution(),
        execution.outcome
    );
}
