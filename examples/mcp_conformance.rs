//! The server `scripts/mcp-conformance.sh` runs the official MCP conformance
//! suite (`@modelcontextprotocol/conformance`) against: one `#[agent_tool]`
//! for every tool a server scenario calls, served with
//! `aptix::mcp::serve_http` (Streamable HTTP at `/mcp`).
//!
//! `cargo run --example mcp_conformance -- 127.0.0.1:3001`
//!
//! SCENARIOS THE SERVER DOES NOT PASS (not required; exact expectations
//! are taken from the suite's sources, conformance 0.1.16, client = TS SDK
//! 1.32.2 with capabilities `{sampling: {}, elicitation: {}}`)
//!
//! * `elicitation-sep1330-enums`: the form must hold the five SEP-1330 enum
//!   shapes: `enum`; `oneOf` of `{const, title}`; `enum` + `enumNames`; an
//!   array of `enum` strings; an array of `anyOf` `{const, title}`.
//!   Human-tool forms refuse arrays and drop `oneOf`, `anyOf` and
//!   `enumNames`, so the server never elicits.
//! * `completion-complete`, `resources-*`, `prompts-*`: the server offers
//!   tools only.
//!
//! Scenarios that pass through Aptix's own features: `test_elicitation`
//! and `test_elicitation_sep1034_defaults` are human tools (the server asks
//! with a form elicitation built from the output schema, message composed by
//! the server rather than the `message` argument verbatim);
//! `test_tool_with_progress` reports with `ctx.progress`;
//! `test_image_content`, `test_audio_content`, `test_embedded_resource` and
//! `test_multiple_content_types` return `aptix::content::Content`;
//! `test_tool_with_logging` logs through `aptix::mcp::McpLog` (the server
//! answers `logging/setLevel`); `test_sampling` asks the client's LLM through
//! `aptix::mcp::Sampling`; `json_schema_2020_12_tool`'s `inputSchema` gets
//! its `$schema` from the MCP listing.

use std::net::SocketAddr;
use std::time::Duration;

use aptix::Catalog;
use aptix::Content;
use aptix::mcp::{McpLog, Sampling};
use aptix::prelude::*;
use schemars::{Schema, SchemaGenerator, json_schema};

/// Where the server listens without an argument.
const DEFAULT_ADDR: &str = "127.0.0.1:3001";

/// A 1x1 red PNG.
const RED_PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// A WAV file with a header and no samples (8 kHz, 8-bit, mono).
const EMPTY_WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=";

/// The arguments of a tool that takes none.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct NoArgs {}

// --- tools-call-simple-text -------------------------------------------------

/// Returns a fixed text.
#[agent_tool(
    name = "test_simple_text",
    usage = "Conformance scenario `tools-call-simple-text`."
)]
pub async fn simple_text(_args: NoArgs) -> Result<String, ToolError> {
    Ok("This is a simple text response for testing.".to_owned())
}

// --- tools-call-image, -audio, -embedded-resource, -mixed-content -----------

/// Returns a 1x1 red PNG as an image block.
#[agent_tool(
    name = "test_image_content",
    usage = "Conformance scenario `tools-call-image`."
)]
pub async fn image_content(_args: NoArgs) -> Result<Content, ToolError> {
    Ok(Content::image(RED_PIXEL_PNG, "image/png"))
}

/// Returns an empty WAV file as an audio block.
#[agent_tool(
    name = "test_audio_content",
    usage = "Conformance scenario `tools-call-audio`."
)]
pub async fn audio_content(_args: NoArgs) -> Result<Content, ToolError> {
    Ok(Content::audio(EMPTY_WAV, "audio/wav"))
}

/// Returns a text resource as an embedded resource block.
#[agent_tool(
    name = "test_embedded_resource",
    usage = "Conformance scenario `tools-call-embedded-resource`."
)]
pub async fn embedded_resource(_args: NoArgs) -> Result<Content, ToolError> {
    Ok(Content::resource(
        "test://embedded-resource",
        "text/plain",
        "This is an embedded resource content.",
    ))
}

/// Returns text, an image and a resource: three blocks.
#[agent_tool(
    name = "test_multiple_content_types",
    usage = "Conformance scenario `tools-call-mixed-content`."
)]
pub async fn multiple_content_types(_args: NoArgs) -> Result<Vec<Content>, ToolError> {
    Ok(vec![
        Content::text("Multiple content types test:"),
        Content::image(RED_PIXEL_PNG, "image/png"),
        Content::resource(
            "test://mixed-content-resource",
            "application/json",
            r#"{"test":"data","value":123}"#,
        ),
    ])
}

// --- tools-call-with-logging ------------------------------------------------

/// Runs in three steps ~50 ms apart, logging each to the MCP client (at
/// `info`; the scenario sets the session's level to `debug` first).
#[agent_tool(
    name = "test_tool_with_logging",
    usage = "Conformance scenario `tools-call-with-logging`."
)]
pub async fn tool_with_logging(_args: NoArgs, ctx: &ToolContext) -> Result<String, ToolError> {
    let log = ctx.state::<McpLog>();
    let steps = [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ];
    for (index, step) in steps.into_iter().enumerate() {
        if index > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tracing::info!("{step}");
        if let Some(log) = log {
            log.info(step).await;
        }
    }
    Ok("Tool with logging executed successfully".to_owned())
}

// --- tools-call-error -------------------------------------------------------

/// Always fails, with a message the model sees.
#[agent_tool(
    name = "test_error_handling",
    usage = "Conformance scenario `tools-call-error`."
)]
pub async fn error_handling(_args: NoArgs) -> Result<String, ToolError> {
    Err(ToolError::failed(
        "This tool intentionally returns an error for testing",
    ))
}

// --- tools-call-with-progress -----------------------------------------------

/// Reports 0, 50 and 100 of 100, ~50 ms apart, when the client asked for
/// progress (the server sends nothing of its own for a tool that reports).
#[agent_tool(
    name = "test_tool_with_progress",
    usage = "Conformance scenario `tools-call-with-progress`."
)]
pub async fn tool_with_progress(_args: NoArgs, ctx: &ToolContext) -> Result<String, ToolError> {
    for (index, value) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if index > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        ctx.progress(value, Some(100.0), None);
    }
    Ok("Tool with progress executed successfully".to_owned())
}

// --- tools-call-sampling ----------------------------------------------------

/// Arguments of `test_sampling`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SamplingArgs {
    /// The prompt to send to the LLM.
    pub prompt: String,
}

/// Asks the client's LLM to answer `prompt` (at most 100 tokens).
#[agent_tool(
    name = "test_sampling",
    usage = "Conformance scenario `tools-call-sampling`."
)]
pub async fn sampling(args: SamplingArgs, ctx: &ToolContext) -> Result<String, ToolError> {
    let Some(llm) = ctx.state::<Sampling>() else {
        return Err(ToolError::failed(
            "This MCP client cannot sample (it did not declare the `sampling` capability).",
        ));
    };
    let answer = llm
        .create_text_message(args.prompt, 100)
        .await
        .map_err(|error| ToolError::failed(error.to_string()))?;
    Ok(format!("LLM response: {answer}"))
}

// --- tools-call-elicitation -------------------------------------------------

/// Asks the user for their name and email address.
#[agent_tool(
    name = "test_elicitation",
    usage = "Conformance scenario `tools-call-elicitation`.",
    executor = human,
    output = UserInformation
)]
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TestElicitation {
    /// The message to show the user.
    pub message: String,
}

/// What the user answers.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct UserInformation {
    /// User's response
    pub username: String,
    /// User's email address
    pub email: String,
}

// --- elicitation-sep1034-defaults -------------------------------------------

/// Asks the user for values that all have defaults.
#[agent_tool(
    name = "test_elicitation_sep1034_defaults",
    usage = "Conformance scenario `elicitation-sep1034-defaults`.",
    executor = human,
    output = Sep1034Answer
)]
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TestElicitationSep1034Defaults {}

/// A status with a default.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
// Variant doc comments would make schemars describe each value as a
// `oneOf` branch; the scenario wants a plain `enum`.
#[allow(missing_docs)]
pub enum Status {
    #[default]
    Active,
    Inactive,
    Pending,
}

/// The user's answer; every field has a default.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Sep1034Answer {
    /// User name
    #[serde(default = "default_name")]
    pub name: String,
    /// User age
    #[serde(default = "default_age")]
    pub age: i64,
    /// User score
    #[serde(default = "default_score")]
    pub score: f64,
    /// User status
    #[serde(default)]
    pub status: Status,
    /// Verification status
    #[serde(default = "default_verified")]
    pub verified: bool,
}

fn default_name() -> String {
    "John Doe".to_owned()
}

fn default_age() -> i64 {
    30
}

fn default_score() -> f64 {
    95.5
}

fn default_verified() -> bool {
    true
}

// --- elicitation-sep1330-enums ----------------------------------------------

/// Asks the user to pick from the five enum shapes of SEP-1330.
#[agent_tool(
    name = "test_elicitation_sep1330_enums",
    usage = "Conformance scenario `elicitation-sep1330-enums`.",
    executor = human,
    output = Sep1330Answer
)]
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TestElicitationSep1330Enums {}

/// The user's choices, one per SEP-1330 enum shape.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Sep1330Answer {
    /// Untitled single-select.
    #[schemars(schema_with = "untitled_single")]
    pub untitled_single: String,
    /// Titled single-select.
    #[schemars(schema_with = "titled_single")]
    pub titled_single: String,
    /// Legacy titled single-select (`enumNames`).
    #[schemars(schema_with = "legacy_enum")]
    pub legacy_enum: String,
    /// Untitled multi-select.
    #[schemars(schema_with = "untitled_multi")]
    pub untitled_multi: Vec<String>,
    /// Titled multi-select.
    #[schemars(schema_with = "titled_multi")]
    pub titled_multi: Vec<String>,
}

fn untitled_single(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "string", "description": "Untitled single-select.", "enum": ["option1", "option2", "option3"]})
}

fn titled_single(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "description": "Titled single-select.",
        "oneOf": [
            {"const": "value1", "title": "First Option"},
            {"const": "value2", "title": "Second Option"},
            {"const": "value3", "title": "Third Option"}
        ]
    })
}

fn legacy_enum(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "description": "Legacy titled single-select (`enumNames`).",
        "enum": ["opt1", "opt2", "opt3"],
        "enumNames": ["Option One", "Option Two", "Option Three"]
    })
}

fn untitled_multi(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "description": "Untitled multi-select.",
        "items": {"type": "string", "enum": ["option1", "option2", "option3"]}
    })
}

fn titled_multi(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "description": "Titled multi-select.",
        "items": {
            "anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"}
            ]
        }
    })
}

// --- json-schema-2020-12 ----------------------------------------------------

/// A postal address.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "address")]
pub struct Address {
    /// The street and number.
    pub street: Option<String>,
    /// The city.
    pub city: Option<String>,
}

/// Arguments of `json_schema_2020_12_tool`: a `$ref` into `$defs`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JsonSchemaArgs {
    /// A name.
    pub name: Option<String>,
    /// An address.
    pub address: Option<Address>,
}

/// Tool with JSON Schema 2020-12 features.
#[agent_tool(
    name = "json_schema_2020_12_tool",
    usage = "Conformance scenario `json-schema-2020-12`."
)]
pub async fn json_schema_tool(args: JsonSchemaArgs) -> Result<String, ToolError> {
    Ok(format!(
        "name: {:?}, address: {:?}",
        args.name, args.address
    ))
}

// --- server-sse-polling -----------------------------------------------------

/// Answers at once. The scenario's reference tool closes the SSE stream
/// before answering, to make the client reconnect; tools cannot do that.
#[agent_tool(
    name = "test_reconnection",
    usage = "Conformance scenario `server-sse-polling`."
)]
pub async fn reconnection(_args: NoArgs) -> Result<String, ToolError> {
    Ok("Reconnection test completed successfully".to_owned())
}

// ---------------------------------------------------------------------------

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        // RUST_LOG, without the MCP SDK's lines that quote whole messages.
        .with_env_filter(aptix::mcp::log_filter("error"))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| DEFAULT_ADDR.to_owned());
    let addr: SocketAddr = addr
        .parse()
        .map_err(|error| format!("`{addr}` is not an address such as {DEFAULT_ADDR}: {error}"))?;
    let catalog = Catalog::builder()
        .tool::<SimpleTextTool>()
        .tool::<ImageContentTool>()
        .tool::<AudioContentTool>()
        .tool::<EmbeddedResourceTool>()
        .tool::<MultipleContentTypesTool>()
        .tool::<ToolWithLoggingTool>()
        .tool::<ErrorHandlingTool>()
        .tool::<ToolWithProgressTool>()
        .tool::<SamplingTool>()
        .tool::<TestElicitation>()
        .tool::<TestElicitationSep1034Defaults>()
        .tool::<TestElicitationSep1330Enums>()
        .tool::<JsonSchemaToolTool>()
        .tool::<ReconnectionTool>()
        .build()?;
    eprintln!("MCP conformance server on http://{addr}/mcp");
    aptix::mcp::serve_http(catalog, addr).await?;
    Ok(())
}
