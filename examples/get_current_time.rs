//! `get_current_time`, the first tool of the Tool Use seed: a server tool
//! with an optional, range-checked parameter.
//!
//! `cargo run --example get_current_time`
// The tool types are `pub` as they would be in a library crate; here they
// are also included as modules of tests and benches, where nothing re-exports them.
#![allow(unreachable_pub)]

use aptix::prelude::*;
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

/// Arguments of `get_current_time`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TimeArgs {
    /// Offset from UTC in minutes of the local time to report (60 for
    /// UTC+01:00, -300 for UTC-05:00). Omit it for UTC.
    #[schemars(range(min = -720, max = 840))]
    pub utc_offset_minutes: Option<i32>,
}

/// The current time.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct CurrentTime {
    /// The time in RFC 3339 format, in the requested offset.
    pub rfc3339: String,
    /// Milliseconds since the Unix epoch.
    pub unix_ms: i64,
    /// The offset used, as `+HH:MM`.
    pub utc_offset: String,
}

/// Returns the current date and time.
#[agent_tool(
    name = "get_current_time",
    usage = "Call when the user asks for the current time or date, or when an answer depends on today's date.",
    timeout = "2s"
)]
pub async fn get_current_time(args: TimeArgs) -> Result<CurrentTime, ToolError> {
    let minutes = args.utc_offset_minutes.unwrap_or(0);
    // The schema already bounds the offset; the check repeats it for direct
    // callers of the function, who bypass the executor's validation.
    let offset = UtcOffset::from_whole_seconds(minutes * 60).map_err(|_| {
        ToolError::invalid_arguments("`utc_offset_minutes` must be between -720 and 840.")
    })?;
    let now = OffsetDateTime::now_utc().to_offset(offset);
    Ok(CurrentTime {
        rfc3339: now.format(&Rfc3339)?,
        unix_ms: (now.unix_timestamp_nanos() / 1_000_000) as i64,
        utc_offset: format!(
            "{}{:02}:{:02}",
            if minutes < 0 { '-' } else { '+' },
            minutes.abs() / 60,
            minutes.abs() % 60
        ),
    })
}

#[allow(dead_code)]
#[tokio::main]
async fn main() {
    let harness = aptix::Executor::new(
        aptix::Catalog::builder()
            .tool::<GetCurrentTimeTool>()
            .build()
            .unwrap_or_else(|error| panic!("{error}")),
    );
    for arguments in [
        "{}",
        r#"{"utc_offset_minutes": 60}"#,
        r#"{"utc_offset_minutes": 5000}"#,
    ] {
        let call = aptix::ToolCall::new("call-1", "get_current_time", arguments);
        let execution = harness.execute(&call, &ToolContext::new()).await;
        println!(
            "{arguments}\n  -> {}",
            execution
                .envelope()
                .map(ToString::to_string)
                .unwrap_or_default()
        );
    }
}
