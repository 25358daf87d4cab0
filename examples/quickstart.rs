//! The main job: the example tools, their catalog, and a turn of tool calls
//! as a model would make them, each through the executor.
//!
//! `cargo run --example quickstart`
//!
//! The calls here are written out by hand; the agent loop will put a real
//! (or scripted) model in front of the same executor.

#[path = "get_current_time.rs"]
mod get_current_time;
#[path = "get_location.rs"]
mod get_location;
#[path = "hello_world.rs"]
mod hello_world;
#[path = "send_email.rs"]
mod send_email;

use aptix::{Catalog, Dialect, Executor, Outcome, ToolCall, ToolContext};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();

    let catalog = Catalog::linked()?;
    println!(
        "{} tools, fingerprint {}",
        catalog.len(),
        &catalog.fingerprint()[..16]
    );
    println!(
        "{:<20} {:<9} {:<18} description",
        "name", "executor", "approval"
    );
    for tool in catalog.definitions() {
        println!(
            "{:<20} {:<9} {:<18} {}",
            tool.name(),
            tool.executor().as_str(),
            tool.approval().as_str(),
            tool.description()
        );
    }
    let openai = catalog.lower(Dialect::OpenAiStrict)?;
    println!(
        "\nWhat an OpenAI model is sent for the first tool:\n{}\n",
        serde_json::to_string_pretty(&openai[0])?
    );

    let executor = Executor::new(catalog);
    let ctx = ToolContext::new()
        .with_conversation_id("quickstart")
        .with_session_id("session-1")
        .with_state(send_email::Outbox::default());

    // One model turn: two calls at once, as parallel tool calls arrive.
    let greet = ToolCall::new("call_1", "agent_hello_world", r#"{"name":"Ada"}"#);
    let time = ToolCall::new("call_2", "get_current_time", r#"{"utc_offset_minutes":60}"#);
    let (greeting, now) = tokio::join!(
        executor.execute(&greet, &ctx),
        executor.execute(&time, &ctx)
    );
    // Then the calls a model gets wrong, and the ones that wait for someone.
    let rest = [
        ToolCall::new("call_3", "agent_hello_world", r#"{"nmae":"Ada"}"#),
        ToolCall::new("call_4", "get_weather", r#"{"city":"Paris"}"#),
        ToolCall::new(
            "call_5",
            "get_location",
            r#"{"reason":"to find a café nearby"}"#,
        ),
        ToolCall::new(
            "call_6",
            "send_email",
            r#"{"to":"ada@example.com","subject":"Hi","body":"Hello!"}"#,
        ),
    ];
    let mut executions = vec![greeting, now];
    for call in &rest {
        executions.push(executor.execute(call, &ctx).await);
    }

    for execution in &executions {
        match &execution.outcome {
            Outcome::Final(envelope) => println!(
                "{} {} -> {envelope}",
                execution.tool_call_id, execution.name
            ),
            Outcome::Awaiting(awaiting) => println!(
                "{} {} -> waiting for {:?}{} with {}",
                execution.tool_call_id,
                execution.name,
                awaiting.reason,
                awaiting
                    .then
                    .map(|then| format!(" then {then:?}"))
                    .unwrap_or_default(),
                awaiting.payload
            ),
            Outcome::PassThrough => println!(
                "{} {} -> run by the provider",
                execution.tool_call_id, execution.name
            ),
        }
    }
    Ok(())
}
