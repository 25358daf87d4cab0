//! The developer CLI (`aptix::cli`) over the example tools: list them,
//! print their schemas, call them, chat with them, serve them over MCP.
//!
//! ```sh
//! cargo run --example cli -- tools
//! cargo run --example cli -- schema agent_hello_world --dialect openai
//! cargo run --example cli -- call agent_hello_world '{"name":"Ada"}'
//! cargo run --example cli -- call send_email '{"to":"ada@example.com","subject":"Hi","body":"Hello"}'
//! cargo run --example cli -- chat
//! cargo run --example cli -- mcp --http 127.0.0.1:8080
//! ```
//!
//! `chat` talks to the OpenAI-compatible endpoint at `OPENAI_BASE_URL` when
//! it is set; without it, to the CLI's built-in offline model, which echoes
//! and calls a tool when a line reads `TOOL_NAME {json}`
//! (`send_email {"to":"ada@example.com","subject":"Hi","body":"Hello"}`
//! shows an inline approval).

#[path = "get_current_time.rs"]
mod get_current_time;
#[path = "get_location.rs"]
mod get_location;
#[path = "hello_world.rs"]
mod hello_world;
#[path = "send_email.rs"]
mod send_email;

use std::process::ExitCode;

use aptix::ToolContext;
use aptix::cli::Cli;

fn main() -> ExitCode {
    // Logs go to standard error, so they never mix with the JSON on
    // standard output (nor with the MCP protocol on stdio).
    tracing_subscriber::fmt()
        // RUST_LOG, without the MCP SDK's lines that quote whole messages.
        .with_env_filter(aptix::mcp::log_filter("warn"))
        .with_writer(std::io::stderr)
        .init();
    let catalog = match aptix::tools![
        get_current_time::GetCurrentTimeTool,
        get_location::GetLocation,
        hello_world::HelloWorldTool,
        send_email::SendEmailTool,
    ]
    .build()
    {
        Ok(catalog) => catalog,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    // `send_email` reads its outbox from the context, as a real tool would
    // read its SMTP client: the CLI runs calls with the program's context.
    Cli::new(catalog)
        .context(ToolContext::new().with_state(send_email::Outbox::default()))
        .main()
}
