//! The main job: an agent with the example tools answers a question by
//! calling tools (one model turn with two parallel calls), printing events
//! as they stream.
//!
//! `cargo run --example quickstart`
//!
//! With no configuration it runs on an embedded scripted model. With
//! `OPENAI_BASE_URL` (and `OPENAI_API_KEY`, `OPENAI_MODEL` where needed) it
//! talks to that OpenAI-compatible endpoint instead, with the same tools.
//! Strict schemas are sent to api.openai.com; other servers get the
//! canonical schema.
//!
//! `APTIX_CALL_MODE=composed` offers the tools as one structured-output
//! schema instead of native tool calls (for models without tool calling;
//! `OPENAI_STRUCTURED_OUTPUT=json_object` for llama-cpp-python's server).

#[path = "get_current_time.rs"]
mod get_current_time;
#[path = "get_location.rs"]
mod get_location;
#[path = "hello_world.rs"]
mod hello_world;
#[path = "send_email.rs"]
mod send_email;

use std::io::Write;

use aptix::agent::CallMode;
use aptix::model::ChatModel;
use aptix::model::openai::OpenAiChat;
use aptix::{Agent, AgentEvent, Conversation, DoneReason, Input, ToolContext};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;

const QUESTION: &str = "Hi, I'm Ada. Please greet me and tell me the time in Paris (UTC+01:00).";

fn scripted(mode: CallMode) -> ScriptedModel {
    if mode == CallMode::Composed {
        // The same turns, as the composed objects the model answers with.
        return ScriptedModel::new([
            ScriptedTurn::new().text(
                r#"{"message":"Let me greet you and look up the time.","calls":[{"_tool":"agent_hello_world","_activity":"","name":"Ada"},{"_tool":"get_current_time","_activity":"","utc_offset_minutes":60}]}"#,
            ),
            ScriptedTurn::new().text(
                r#"{"message":"Hello, Ada! Welcome. I looked up the current time in Paris for you: it is in the tool result above.","calls":[]}"#,
            ),
        ]);
    }
    ScriptedModel::new([
        ScriptedTurn::new()
            .text("Let me greet you and look up the time. ")
            .tool_call("call_greet", "agent_hello_world", r#"{"name":"Ada"}"#)
            .tool_call("call_time", "get_current_time", r#"{"utc_offset_minutes":60}"#),
        ScriptedTurn::new().text(
            "Hello, Ada! Welcome. I looked up the current time in Paris for you: it is in the tool result above.",
        ),
    ])
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();

    let catalog = aptix::tools![
        get_current_time::GetCurrentTimeTool,
        get_location::GetLocation,
        hello_world::HelloWorldTool,
        send_email::SendEmailTool,
    ]
    .build()?;
    println!(
        "{} tools (fingerprint {}):",
        catalog.len(),
        &catalog.fingerprint()[..12]
    );
    for tool in catalog.definitions() {
        println!(
            "  {:<18} {:<8} {:<17} {}",
            tool.name(),
            tool.executor().as_str(),
            tool.approval().as_str(),
            tool.description()
        );
    }

    let mode = match std::env::var("APTIX_CALL_MODE").as_deref() {
        Err(_) | Ok("native") => CallMode::Native,
        Ok("composed") => CallMode::Composed,
        Ok(other) => {
            return Err(format!("APTIX_CALL_MODE is `{other}`; use `native` or `composed`").into());
        }
    };
    println!("call mode: {mode:?}");
    let model: Box<dyn ChatModel> = match std::env::var("OPENAI_BASE_URL") {
        Ok(base_url) => {
            let model = OpenAiChat::from_env()?.with_strict(base_url.contains("api.openai.com"));
            println!("\nmodel: {} at {}", model.model(), model.base_url());
            Box::new(model)
        }
        Err(_) => {
            println!(
                "\nmodel: the embedded scripted model (set OPENAI_BASE_URL to use a real one)"
            );
            Box::new(scripted(mode))
        }
    };
    let agent = Agent::builder()
        .shared_model(model.into())
        .catalog(catalog)
        .call_mode(mode)
        .context(ToolContext::new().with_state(send_email::Outbox::default()))
        .max_iterations(4)
        .build()?;

    let mut conversation = Conversation::new("quickstart")
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
                id,
                name,
                arguments,
                ..
            } => println!("\n  → {name}({arguments})  [{id}]"),
            AgentEvent::ToolCallResult { id, envelope, .. } => println!("  ← {envelope}  [{id}]"),
            AgentEvent::Done {
                reason,
                usage,
                summary,
            } => {
                let reason = match reason {
                    DoneReason::Completed => "completed".to_owned(),
                    DoneReason::Suspended(calls) => format!(
                        "suspended, waiting on {}",
                        calls
                            .iter()
                            .map(|c| format!("{} ({:?})", c.name, c.awaiting.reason))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    DoneReason::MaxIterations => "stopped at the iteration limit".to_owned(),
                    DoneReason::Cancelled => "cancelled".to_owned(),
                    DoneReason::ModelError(error) => {
                        failed = true;
                        format!("model error: {error}")
                    }
                    DoneReason::StoreFailed(error) => {
                        failed = true;
                        format!("store error: {error}")
                    }
                    DoneReason::LimitExceeded(limit) => {
                        failed = true;
                        format!("stopped: {limit}")
                    }
                    DoneReason::InvalidToolResults(problem) => {
                        failed = true;
                        format!("results refused: {problem}")
                    }
                    DoneReason::Halted { by, message } => format!("halted by {by}: {message}"),
                    other => format!("{other:?}"),
                };
                println!(
                    "\n\ndone: {reason} ({} tokens in, {} out; {} tool calls in {} model turns, {:.1?})",
                    usage.input_tokens,
                    usage.output_tokens,
                    summary.tool_calls(),
                    summary.iterations,
                    summary.elapsed,
                );
            }
            // Progress and partial results: the quickstart's tools report none.
            _ => {}
        }
    }
    drop(events);
    println!(
        "{} messages in the conversation",
        conversation.messages.len()
    );
    if failed {
        std::process::exit(1);
    }
    Ok(())
}
