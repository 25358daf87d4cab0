//! A tool may ask the model for another try, within a budget; an idempotent
//! tool's transient failures are retried before the model sees them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aptix::prelude::*;
use aptix::{Agent, AgentEvent, Conversation, Input};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::Value;

/// Arguments of the booking tools.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Book {
    /// The day, as `YYYY-MM-DD`.
    pub day: String,
}

/// Books a day (only days in 2027 are free).
#[agent_tool(name = "book", usage = "Call to book a day.")]
async fn book(args: Book) -> Result<String, ToolError> {
    if args.day.starts_with("2027") {
        Ok(format!("booked {}", args.day))
    } else {
        Err(ToolError::retry("Only days in 2027 are free: pick one."))
    }
}

/// Books a day, with two retries.
#[agent_tool(name = "book_twice", usage = "Call to book a day.", retries = 2)]
async fn book_twice(args: Book) -> Result<String, ToolError> {
    book(args).await
}

static FLAKY_RUNS: AtomicUsize = AtomicUsize::new(0);
static FRAGILE_RUNS: AtomicUsize = AtomicUsize::new(0);

/// Fails twice with a transient error, then works; safe to repeat.
#[agent_tool(
    name = "flaky",
    usage = "Call to read the flaky service.",
    idempotent = true
)]
async fn flaky(_args: Book) -> Result<u32, ToolError> {
    let run = FLAKY_RUNS.fetch_add(1, Ordering::SeqCst);
    if run < 2 {
        Err(ToolError::transient("The service answered 503."))
    } else {
        Ok(7)
    }
}

/// Fails transiently; not safe to repeat, so never retried.
#[agent_tool(name = "fragile", usage = "Call to write to the service.")]
async fn fragile(_args: Book) -> Result<u32, ToolError> {
    FRAGILE_RUNS.fetch_add(1, Ordering::SeqCst);
    Err(ToolError::transient("The service answered 503."))
}

async fn run(tool: &str, days: &[&str]) -> Vec<AgentEvent> {
    let mut turns: Vec<ScriptedTurn> = days
        .iter()
        .enumerate()
        .map(|(at, day)| {
            ScriptedTurn::new().tool_call(
                &format!("call_{at}"),
                tool,
                &format!(r#"{{"day":"{day}"}}"#),
            )
        })
        .collect();
    turns.push(ScriptedTurn::new().text("Done."));
    let agent = Agent::builder()
        .shared_model(Arc::new(ScriptedModel::new(turns)))
        .catalog(
            aptix::tools![BookTool, BookTwiceTool, FlakyTool, FragileTool]
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut conversation = Conversation::new("conv-retries");
    agent
        .run(&mut conversation, Input::User("Book.".into()))
        .collect()
        .await
}

fn codes(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallResult { envelope, .. } => Some(match &envelope["error"]["code"] {
                Value::String(code) => code.clone(),
                _ => "ok".to_owned(),
            }),
            _ => None,
        })
        .collect()
}

fn exhausted(events: &[AgentEvent]) -> Vec<(String, u8)> {
    events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::RetriesExhausted { id, retries, .. } => Some((id.clone(), *retries)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_retry_reaches_the_model_until_the_budget_is_spent() {
    // The default budget is one retry: the second request for one fails.
    let events = run("book", &["2026-01-01", "2026-02-02", "2027-03-03"]).await;
    assert_eq!(codes(&events), ["retry", "failed", "ok"]);
    assert_eq!(exhausted(&events), [("call_1".to_owned(), 1)]);
    let message = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallResult { envelope, .. } => envelope["error"]["message"].as_str(),
            _ => None,
        })
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    assert!(message.contains("2 times"), "{message}");

    // `retries = 2` allows two.
    let events = run("book_twice", &["2026-01-01", "2026-02-02", "2026-03-03"]).await;
    assert_eq!(codes(&events), ["retry", "retry", "failed"]);
    assert_eq!(exhausted(&events), [("call_2".to_owned(), 2)]);
}

#[tokio::test]
async fn an_idempotent_tool_s_transient_failures_are_retried_before_the_model_sees_them() {
    let before = FLAKY_RUNS.load(Ordering::SeqCst);
    let events = run("flaky", &["2027-01-01"]).await;
    assert_eq!(codes(&events), ["ok"]);
    assert_eq!(FLAKY_RUNS.load(Ordering::SeqCst) - before, 3);

    // A tool that is not safe to repeat runs once, and the model is told.
    let before = FRAGILE_RUNS.load(Ordering::SeqCst);
    let events = run("fragile", &["2027-01-01"]).await;
    assert_eq!(codes(&events), ["failed"]);
    assert_eq!(FRAGILE_RUNS.load(Ordering::SeqCst) - before, 1);
}

#[test]
fn the_budget_is_declared() {
    assert_eq!(BookTool::META.retries, 1);
    assert_eq!(BookTwiceTool::META.retries, 2);
    assert_eq!(ToolError::retry("x").code(), aptix::ErrorCode::Retry);
    assert!(ToolError::transient("x").is_transient());
    assert_eq!(ToolError::transient("x").code(), aptix::ErrorCode::Failed);
}
