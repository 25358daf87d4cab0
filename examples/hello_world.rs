//! The reference tool, `agent_hello_world`, run through the executor.
//!
//! `cargo run --example hello_world`
// The tool types are `pub` as they would be in a library crate; here they
// are also included as modules of tests and benches, where nothing re-exports them.
#![allow(unreachable_pub)]

use aptix::prelude::*;
use aptix::{Catalog, Executor, ToolCall};

/// Arguments of `agent_hello_world`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct HelloArgs {
    /// The name of the person to greet.
    pub name: String,
}

/// The greeting, with the ids of the call that produced it.
#[derive(Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Greeting {
    /// The greeting to show the user.
    pub message: String,
    /// The conversation the greeting was made in.
    pub conversation_id: Option<String>,
    /// The session the greeting was made in.
    pub session_id: Option<String>,
}

/// Creates a friendly greeting using the user's name.
#[agent_tool(
    name = "agent_hello_world",
    usage = "Call when the user asks to be greeted or welcomed.",
    executor = server,
    approval = auto,
)]
pub async fn hello_world(args: HelloArgs, ctx: &ToolContext) -> Result<Greeting, ToolError> {
    let name = args.name.trim();
    if name.is_empty() {
        return Err(ToolError::invalid_arguments(
            "`name` is empty: pass the name of the person to greet.",
        ));
    }
    Ok(Greeting {
        message: format!("Hello, {name}! Welcome."),
        conversation_id: ctx.conversation_id().map(str::to_owned),
        session_id: ctx.session_id().map(str::to_owned),
    })
}

#[allow(dead_code)]
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let catalog = Catalog::builder().tool::<HelloWorldTool>().build()?;
    println!(
        "{}",
        serde_json::to_string_pretty(&catalog.get("agent_hello_world").map(|d| d.function_tool()))?
    );
    let executor = Executor::new(catalog);
    let ctx = ToolContext::new()
        .with_conversation_id("conv-1")
        .with_session_id("sess-1");
    for arguments in [
        r#"{"name":"Ada"}"#,
        r#"{"name":""}"#,
        r#"{"nam":"Ada"}"#,
        r#"{"name": "Ada"#,
    ] {
        let call = ToolCall::new("call-1", "agent_hello_world", arguments);
        let execution = executor.execute(&call, &ctx).await;
        println!(
            "{arguments}\n  -> {}",
            execution
                .envelope()
                .map(ToString::to_string)
                .unwrap_or_default()
        );
    }
    Ok(())
}
