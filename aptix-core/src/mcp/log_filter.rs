//! The log filter for a program that speaks MCP.
//!
//! rmcp, the SDK under [`crate::mcp`], writes every message it sends or
//! receives into its own `tracing` events, whole: tool arguments and
//! results at DEBUG, every message at TRACE, elicitation answers, sampling
//! prompts. It has no setting to leave the payloads out, and Aptix's
//! redaction (`redact`, `log_fields`) governs Aptix's own events only. So a
//! declared secret of an MCP call reaches the log unless rmcp's events below
//! WARN are filtered out, which is what [`log_filter`] does; its WARN and
//! ERROR events (a session that failed, a message it could not read) stay,
//! except its HTTP client's, which name the URL they failed on (a key in
//! its query with it): Aptix logs those failures itself, scrubbed.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::Directive;

/// The directives that hold rmcp to WARN and above, and silence its HTTP
/// client: that logs its errors at ERROR, and an HTTP error names the URL
/// it failed on, query keys and all. Aptix logs each failure of a mounted
/// server itself, with the URL's credentials taken out.
const QUIET_SDK: &[&str] = &[
    "rmcp=warn",
    "rmcp::transport::streamable_http_client=off",
    "rmcp::transport::common=off",
    "rmcp::transport::worker=off",
];

/// The log filter to give a program that serves or mounts MCP servers:
/// `RUST_LOG` (or `default` when it is unset or does not parse), with the
/// MCP SDK's own events below WARN left out whatever `RUST_LOG` says of
/// them, so no tool argument, result or answer of an MCP call is logged.
///
/// ```
/// tracing_subscriber::fmt()
///     .with_env_filter(aptix_core::mcp::log_filter("warn"))
///     .try_init()
///     .ok();
/// ```
pub fn log_filter(default: &str) -> EnvFilter {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    hide_sdk_payloads(filter)
}

/// `filter` with the MCP SDK's own events below WARN left out: what
/// [`log_filter`] adds to `RUST_LOG`, for a filter built otherwise.
pub fn hide_sdk_payloads(filter: EnvFilter) -> EnvFilter {
    QUIET_SDK.iter().fold(filter, |filter, directive| {
        match directive.parse::<Directive>() {
            // Added last, it replaces any directive of the same target.
            Ok(quiet) => filter.add_directive(quiet),
            // The constants parse (a test says so); were one not to,
            // nothing is logged rather than everything.
            Err(_) => filter.add_directive(tracing_subscriber::filter::LevelFilter::OFF.into()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directive_parses_and_replaces_the_programs_own() {
        assert!(
            QUIET_SDK
                .iter()
                .all(|directive| directive.parse::<Directive>().is_ok())
        );
        let filter = hide_sdk_payloads(EnvFilter::new("debug,rmcp=trace"));
        let text = filter.to_string();
        assert!(text.contains("rmcp=warn"), "{text}");
        assert!(!text.contains("rmcp=trace"), "{text}");
    }
}
