//! The quickstart agent with another MCP server's tools mounted beside its
//! own: the reference server written with the official MCP Python SDK
//! (tests/mcp_python/reference_server.py), started on stdio, its tools
//! prefixed `ref_`, its destructive tool gated behind an approval.
//!
//! `cargo run --example mcp_client`
//!
//! It needs a Python with the `mcp` package: `APTIX_TEST_MCP_PYTHON` when
//! set, else the venv `scripts/mcp-python.sh` makes (and caches) from PyPI.
//! With `OPENAI_BASE_URL` it talks to that OpenAI-compatible endpoint; else
//! to a scripted model that greets, adds two numbers with the remote `add`
//! and asks to run the gated remote tool.

#[path = "get_current_time.rs"]
mod get_current_time;
#[path = "hello_world.rs"]
mod hello_world;

use std::io::Write;
use std::path::PathBuf;

use aptix::mcp::{McpToolset, RequireApproval};
use aptix::model::ChatModel;
use aptix::model::openai::OpenAiChat;
use aptix::{Agent, AgentEvent, Catalog, Conversation, Dialect, DoneReason, Input};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;

const QUESTION: &str = "Hi, I'm Ada. Greet me, add 19 and 23, then delete everything (I confirm).";

/// The Python interpreter with the `mcp` package.
fn python() -> Result<PathBuf, Box<dyn std::error::Error>> {
    if let Some(path) = std::env::var_os("APTIX_TEST_MCP_PYTHON").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    eprintln!("making the Python venv with the `mcp` package (scripts/mcp-python.sh; cached)...");
    let made = std::process::Command::new(root.join("scripts/mcp-python.sh"))
        .stderr(std::process::Stdio::inherit())
        .output()?;
    if !made.status.success() {
        return Err("scripts/mcp-python.sh failed (it needs python3 >= 3.10 with venv)".into());
    }
    Ok(PathBuf::from(String::from_utf8(made.stdout)?.trim()))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        // RUST_LOG, without the MCP SDK's lines that quote whole messages.
        .with_env_filter(aptix::mcp::log_filter("warn"))
        .with_writer(std::io::stderr)
        .init();

    let model: Box<dyn ChatModel> = match std::env::var("OPENAI_BASE_URL") {
        Ok(base_url) => {
            Box::new(OpenAiChat::from_env()?.with_strict(base_url.contains("api.openai.com")))
        }
        Err(_) => Box::new(
            ScriptedModel::new([
                ScriptedTurn::new()
                    .text("Let me greet you and add those. ")
                    .tool_call("call_greet", "agent_hello_world", r#"{"name":"Ada"}"#)
                    .tool_call("call_add", "ref_add", r#"{"a":19,"b":23}"#),
                ScriptedTurn::new()
                    .text("19 + 23 = 42. Now the deletion, which needs your approval. ")
                    .tool_call(
                        "call_delete",
                        "ref_delete_everything",
                        r#"{"confirm":"yes"}"#,
                    ),
            ])
            // An OpenAI-compatible server without strict mode: the remote
            // schemas go as they are.
            .with_dialect(Dialect::OpenAiCompatible),
        ),
    };
    let mut command = std::process::Command::new(python()?);
    command
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_python/reference_server.py"))
        .arg("stdio");
    let remote = McpToolset::stdio(command)
        .label("reference")
        .prefix("ref")
        .require_approval(RequireApproval::only(["delete_everything"]))
        // OpenAI's strict mode needs closed objects, which the Python SDK's
        // schemas are not: such tools are left out (and said so) rather
        // than rewritten.
        .check_dialect(model.dialect())
        .connect()
        .await?;
    for refused in remote.refused() {
        println!("left out: {refused}");
    }
    let catalog = Catalog::builder()
        .tool::<hello_world::HelloWorldTool>()
        .tool::<get_current_time::GetCurrentTimeTool>()
        .entries(remote.entries())
        .build()?;
    println!(
        "{} tools, {} of them from the MCP server `{}`:",
        catalog.len(),
        remote.names().len(),
        remote.server()
    );
    for tool in catalog.definitions() {
        println!(
            "  {:<22} {:<17} {}",
            tool.name(),
            tool.approval().as_str(),
            tool.description()
        );
    }

    let agent = Agent::builder()
        .shared_model(model.into())
        .catalog(catalog)
        .max_iterations(4)
        .build()?;
    let mut conversation = Conversation::new("mcp_client")
        .with_system("You are a helpful assistant. Use the tools when they help.");
    println!("\nuser: {QUESTION}\nassistant: ");
    let mut events = agent.run(&mut conversation, Input::User(QUESTION.into()));
    let mut failed = false;
    while let Some(event) = events.next().await {
        match event {
            AgentEvent::TextDelta(text) => {
                print!("{text}");
                std::io::stdout().flush()?;
            }
            AgentEvent::ToolCallStart {
                name, arguments, ..
            } => {
                println!("\n  → {name}({arguments})")
            }
            AgentEvent::ToolCallResult { envelope, .. } => println!("  ← {envelope}"),
            AgentEvent::Done { reason, .. } => match reason {
                DoneReason::Suspended(calls) => println!(
                    "\n\ndone: suspended, waiting for approval of {}",
                    calls
                        .iter()
                        .map(|call| call.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                DoneReason::Completed => println!("\n\ndone: completed"),
                other => {
                    failed = true;
                    println!("\n\ndone: {other:?}");
                }
            },
            _ => {}
        }
    }
    drop(events);
    remote.close().await;
    if failed {
        std::process::exit(1);
    }
    Ok(())
}
