//! The bounds of a run: what one model turn may hold, how many of its calls
//! run, how long a model call may take, tools that block their thread, and
//! tools the model cannot host.

use crate::common::{done, results};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use aptix::agent::AgentError;
use aptix::model::{ChatModel, ChatRequest, ModelError, ModelEvent, ModelStream, ToolCallDelta};
use aptix::prelude::*;
use aptix::transcript::Message;
use aptix::{Agent, AgentEvent, Catalog, Conversation, Dialect, DoneReason, DurableAgent, Input};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::json;

static COUNTED: AtomicUsize = AtomicUsize::new(0);
static QUICK_DONE: AtomicBool = AtomicBool::new(false);

/// Arguments of the test tools.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Millis {
    /// How long, in milliseconds.
    pub millis: u64,
}

/// Counts its runs.
#[agent_tool(name = "counted", usage = "Test tool.")]
async fn counted(_args: Millis) -> Result<usize, ToolError> {
    Ok(COUNTED.fetch_add(1, Ordering::SeqCst) + 1)
}

/// Blocks its thread until `quick` has run (or `millis` passed): only a
/// `quick` running beside it, on another thread, lets it succeed.
#[agent_tool(name = "blocker", usage = "Test tool.")]
async fn blocker(args: Millis) -> Result<&'static str, ToolError> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(args.millis) {
        if QUICK_DONE.load(Ordering::SeqCst) {
            return Ok("quick ran meanwhile");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Err(ToolError::failed("quick never ran while this call blocked"))
}

/// Sleeps without blocking its thread.
#[agent_tool(name = "napper", usage = "Test tool.")]
async fn napper(args: Millis) -> Result<u64, ToolError> {
    tokio::time::sleep(Duration::from_millis(args.millis)).await;
    Ok(args.millis)
}

/// Returns at once.
#[agent_tool(name = "quick", usage = "Test tool.")]
async fn quick(_args: Millis) -> Result<&'static str, ToolError> {
    QUICK_DONE.store(true, Ordering::SeqCst);
    Ok("quick")
}

/// Blocks its thread for `millis`, far past its own time limit.
#[agent_tool(name = "stuck", usage = "Test tool.", timeout = "100ms")]
async fn stuck(args: Millis) -> Result<u64, ToolError> {
    std::thread::sleep(Duration::from_millis(args.millis));
    Ok(args.millis)
}

/// Searches the web, at the model provider.
#[agent_tool(name = "web_search", usage = "Test tool.", executor = provider)]
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WebSearch {
    /// The query.
    pub query: String,
}

fn catalog() -> Catalog {
    Catalog::builder()
        .tool::<CountedTool>()
        .tool::<BlockerTool>()
        .tool::<QuickTool>()
        .tool::<StuckTool>()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A model whose turn never ends: one call's arguments grow by 64 MiB, in
/// 64 KiB deltas, and then the stream waits forever without finishing.
struct Endless;

impl ChatModel for Endless {
    fn dialect(&self) -> Dialect {
        Dialect::OpenAiStrict
    }

    fn stream<'a>(&'a self, _request: &'a ChatRequest) -> ModelStream<'a> {
        let opening = ModelEvent::ToolCallDelta(ToolCallDelta {
            index: 0,
            id: Some("c".into()),
            name: Some("counted".into()),
            arguments: "{\"millis\":\"".into(),
        });
        let chunk = "x".repeat(64 * 1024);
        let rest = futures_util::stream::iter(0..1024).map(move |_| {
            Ok(ModelEvent::ToolCallDelta(ToolCallDelta {
                index: 0,
                id: None,
                name: None,
                arguments: chunk.clone(),
            }))
        });
        Box::pin(
            futures_util::stream::iter([Ok(opening)])
                .chain(rest)
                .chain(futures_util::stream::pending()),
        )
    }
}

#[tokio::test]
async fn endless_arguments_end_the_model_call_at_the_limit() {
    let agent = Agent::builder()
        .model(Endless)
        .catalog(catalog())
        .max_call_argument_bytes(1024 * 1024)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut conversation = Conversation::new("endless");
    let events = tokio::time::timeout(
        Duration::from_secs(30),
        agent
            .run(&mut conversation, Input::User("go".into()))
            .collect::<Vec<_>>(),
    )
    .await
    .unwrap_or_else(|_| panic!("the run never ended: no limit stopped the model call"));
    // (Without a limit the run holds 64 MiB of arguments and waits.)
    let DoneReason::LimitExceeded(message) = done(&events) else {
        panic!("expected a limit: {events:?}");
    };
    assert!(message.contains("max_call_argument_bytes"), "{message}");
    assert_eq!(conversation.messages.len(), 1, "the cut turn is not kept");
}

#[tokio::test]
async fn text_over_the_turn_limit_ends_the_model_call() {
    let agent = Agent::builder()
        .model(ScriptedModel::new([ScriptedTurn::new()
            .text(&"a".repeat(600))
            .text(&"b".repeat(600))]))
        .catalog(catalog())
        .max_turn_bytes(1000)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut conversation = Conversation::new("text");
    let events: Vec<AgentEvent> = agent
        .run(&mut conversation, Input::User("talk".into()))
        .collect()
        .await;
    assert!(
        matches!(done(&events), DoneReason::LimitExceeded(m) if m.contains("max_turn_bytes")),
        "{events:?}"
    );
    assert_eq!(conversation.messages.len(), 1);
}

#[tokio::test]
async fn calls_past_the_per_turn_limit_are_answered_without_running() {
    let mut turn = ScriptedTurn::new();
    for i in 0..5 {
        turn = turn.tool_call(&format!("c{i}"), "counted", r#"{"millis":0}"#);
    }
    let model = std::sync::Arc::new(ScriptedModel::new([turn, ScriptedTurn::new().text("ok")]));
    let agent = Agent::builder()
        .shared_model(model.clone())
        .catalog(catalog())
        .max_calls_per_turn(2)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut conversation = Conversation::new("many");
    let events: Vec<AgentEvent> = agent
        .run(&mut conversation, Input::User("count".into()))
        .collect()
        .await;
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");
    assert_eq!(COUNTED.load(Ordering::SeqCst), 2, "only two calls ran");
    let results = results(&events);
    let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["c0", "c1", "c2", "c3", "c4"]);
    for (_, envelope) in &results[2..] {
        assert_eq!(envelope["ok"], json!(false));
        let message = envelope["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("at most 2"), "{message}");
    }
    let tool_results = model.requests()[1]
        .messages
        .iter()
        .filter(|m| matches!(m, Message::Tool { .. }))
        .count();
    assert_eq!(tool_results, 5);
}

#[tokio::test]
async fn a_model_call_that_takes_too_long_ends_with_a_timeout() {
    let agent = Agent::builder()
        .model(ScriptedModel::new([ScriptedTurn::new()
            .text("slow")
            .with_delay(Duration::from_secs(30))]))
        .catalog(catalog())
        .model_call_timeout(Duration::from_millis(100))
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut conversation = Conversation::new("slow");
    let events: Vec<AgentEvent> = agent
        .run(&mut conversation, Input::User("hi".into()))
        .collect()
        .await;
    assert!(
        matches!(done(&events), DoneReason::ModelError(ModelError::Timeout)),
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_blocks_its_thread_does_not_stall_the_others() {
    let agent = Agent::builder()
        .model(ScriptedModel::new([
            ScriptedTurn::new()
                .tool_call("b", "blocker", r#"{"millis":5000}"#)
                .tool_call("q", "quick", r#"{"millis":0}"#),
            ScriptedTurn::new().text("done"),
        ]))
        .catalog(catalog())
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut conversation = Conversation::new("blocking");
    let events: Vec<AgentEvent> = agent
        .run(&mut conversation, Input::User("go".into()))
        .collect()
        .await;
    let results = results(&events);
    let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["b", "q"], "results keep the model's order");
    assert_eq!(results[0].1["ok"], json!(true), "{:?}", results[0].1);
    assert_eq!(results[1].1["ok"], json!(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_tool_still_times_out() {
    run_a_stuck_tool_to_its_timeout().await;
}

/// A run whose only call, `stuck`, blocks its thread past its time limit:
/// the call ends with a timeout, and the run completes.
async fn run_a_stuck_tool_to_its_timeout() {
    let agent = Agent::builder()
        .model(ScriptedModel::new([
            ScriptedTurn::new().tool_call("s", "stuck", r#"{"millis":2000}"#),
            ScriptedTurn::new().text("done"),
        ]))
        .catalog(catalog())
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut conversation = Conversation::new("stuck");
    let events: Vec<AgentEvent> = agent
        .run(&mut conversation, Input::User("go".into()))
        .collect()
        .await;
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");
    let results = results(&events);
    assert_eq!(
        results[0].1["error"]["code"],
        json!("timeout"),
        "{:?}",
        results[0].1
    );
}

/// The same, with the run itself a task on a worker thread (as every
/// background durable resume is): the tool's task and the run's must not
/// depend on the blocked worker to see the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_tool_times_out_when_the_run_is_a_task() {
    let started = std::time::Instant::now();
    let run = tokio::spawn(run_a_stuck_tool_to_its_timeout());
    run.await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "the limit was not kept: {:?}",
        started.elapsed()
    );
}

#[test]
fn a_provider_tool_is_refused_for_a_model_that_cannot_host_it() {
    let catalog = Catalog::builder()
        .tool::<CountedTool>()
        .tool::<WebSearch>()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let refused = Agent::builder()
        .model(ScriptedModel::new([]))
        .catalog(catalog.clone())
        .build();
    match refused {
        Err(error @ AgentError::ProviderTool { .. }) => {
            assert!(error.to_string().contains("web_search"), "{error}");
        }
        other => panic!("expected a refusal: {other:?}"),
    }
    let model = ScriptedModel::new([]).hosting(["web_search"]);
    let agent = Agent::builder()
        .model(model)
        .catalog(catalog)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(agent.executor().catalog().get("web_search").is_some());
}

/// The limit kept from outside a call's task is the executor's: lifting it
/// with `configure_executor` lifts both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifting_the_executor_limit_lifts_the_outside_limit_too() {
    let agent = Agent::builder()
        .model(ScriptedModel::new([
            ScriptedTurn::new().tool_call("n", "napper", r#"{"millis":1000}"#),
            ScriptedTurn::new().text("done"),
        ]))
        .catalog(
            Catalog::builder()
                .tool::<NapperTool>()
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .tool_timeout(Duration::from_millis(50))
        .configure_executor(|executor| executor.with_default_timeout(None))
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut conversation = Conversation::new("napper");
    let events: Vec<AgentEvent> = agent
        .run(&mut conversation, Input::User("go".into()))
        .collect()
        .await;
    let results = results(&events);
    assert_eq!(results[0].1["ok"], json!(true), "{:?}", results[0].1);
}

/// In a durable run, a call stopped by the limit kept outside its task
/// (its tool blocks its thread) has its ledger row closed with the
/// `timeout` result, not left `executing` for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_tool_stopped_in_a_durable_run_leaves_no_executing_row() {
    stop_a_blocking_tool_in_a_durable_run().await;
}

/// The same on a runtime whose only worker the tool blocks: the durable
/// run's loop is polled by the test's own thread, and no worker is left to
/// drive the runtime's timers, so the limit must be kept by a clock of its
/// own (the agent's watchdog thread), not by `tokio::time` alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_blocking_tool_is_stopped_when_it_blocks_the_only_worker() {
    stop_a_blocking_tool_in_a_durable_run().await;
}

async fn stop_a_blocking_tool_in_a_durable_run() {
    use aptix::store::{CallState, MemoryStore, Store};
    let store = std::sync::Arc::new(MemoryStore::new());
    let agent = DurableAgent::builder(
        Agent::builder()
            .model(ScriptedModel::new([
                ScriptedTurn::new().tool_call("s", "stuck", r#"{"millis":1500}"#),
                ScriptedTurn::new().text("done"),
            ]))
            .catalog(catalog())
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
        store.clone(),
    )
    .deadline_worker(None)
    .build();
    let events: Vec<AgentEvent> = agent
        .send("stuck-durable", Input::User("go".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .collect()
        .await;
    let results = results(&events);
    assert_eq!(
        results[0].1["error"]["code"],
        json!("timeout"),
        "{events:?}"
    );
    // The close happens beside the run; give it a moment, bounded.
    let mut rows = Vec::new();
    for _ in 0..50 {
        rows = store
            .calls("stuck-durable")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        if rows.iter().all(|row| row.state != CallState::Executing) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        rows.iter().all(|row| row.state != CallState::Executing),
        "a row stays executing: {rows:?}"
    );
}
