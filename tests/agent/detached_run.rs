//! Runs that do not depend on their reader: a dropped event stream neither
//! aborts a running tool nor leaves half a turn in the conversation.

use crate::common::done;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aptix::agent::RunError;
use aptix::prelude::*;
use aptix::transcript::Message;
use aptix::{Agent, AgentEvent, Conversation, DoneReason, Input};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::json;
use tokio::sync::Semaphore;

/// What the test controls of `gated` calls and what they report.
pub struct Gate {
    /// A permit per call that started.
    started: Semaphore,
    /// A permit per call allowed to finish.
    release: Semaphore,
    /// Calls that finished (returned their result).
    finished: AtomicUsize,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            started: Semaphore::new(0),
            release: Semaphore::new(0),
            finished: AtomicUsize::new(0),
        }
    }
}

impl Gate {
    /// Waits (at most 5 s) until `calls` more calls have started.
    async fn started(&self, calls: u32) {
        let permits =
            tokio::time::timeout(Duration::from_secs(5), self.started.acquire_many(calls))
                .await
                .unwrap_or_else(|_| panic!("{calls} calls did not start"))
                .unwrap_or_else(|e| panic!("{e}"));
        permits.forget();
    }

    /// Waits (at most 5 s) until `calls` calls have finished.
    async fn finished(&self, calls: usize) {
        let waited = tokio::time::timeout(Duration::from_secs(5), async {
            while self.finished.load(Ordering::SeqCst) < calls {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "{calls} calls should have finished, {} did",
            self.finished.load(Ordering::SeqCst)
        );
    }
}

/// Arguments of `gated`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Gated {
    /// Returned as the result.
    pub label: String,
}

/// Waits until the test lets it finish, then records that it did.
#[agent_tool(name = "gated", usage = "Test tool.")]
async fn gated(args: Gated, ctx: &ToolContext) -> Result<String, ToolError> {
    let gate = ctx.require_state::<Arc<Gate>>()?;
    gate.started.add_permits(1);
    gate.release
        .acquire()
        .await
        .map_err(ToolError::internal)?
        .forget();
    gate.finished.fetch_add(1, Ordering::SeqCst);
    Ok(args.label)
}

fn agent(turns: Vec<ScriptedTurn>, gate: &Arc<Gate>) -> Agent {
    Agent::builder()
        .model(ScriptedModel::new(turns))
        .catalog(
            aptix::tools![GatedTool]
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .context(ToolContext::new().with_state(Arc::clone(gate)))
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// One gated call, then an answer.
fn one_call() -> Vec<ScriptedTurn> {
    vec![
        ScriptedTurn::new().tool_call("call_1", "gated", r#"{"label":"sent"}"#),
        ScriptedTurn::new().text("Sent."),
    ]
}

/// Reads `events` up to the start of a call, and returns what it read.
async fn until_call_starts(
    events: &mut (impl futures_util::Stream<Item = AgentEvent> + Unpin),
) -> Vec<AgentEvent> {
    let mut read = Vec::new();
    while let Some(event) = events.next().await {
        let started = matches!(event, AgentEvent::ToolCallStart { .. });
        read.push(event);
        if started {
            return read;
        }
    }
    panic!("the run ended before a call started: {read:?}");
}

/// A client that goes away while a tool runs (the stream dropped) leaves
/// the tool to finish, and the conversation as it was before the run: never
/// half a turn.
#[tokio::test]
async fn dropping_the_stream_of_run_neither_aborts_the_tool_nor_leaves_half_a_turn() {
    let gate = Arc::new(Gate::default());
    let agent = agent(one_call(), &gate);
    let mut conversation = Conversation::new("conv-drop").with_system("Be brief.");
    let before = conversation.messages.clone();
    let mut events = agent.run(&mut conversation, Input::User("send it".into()));
    until_call_starts(&mut events).await;
    gate.started(1).await;
    drop(events);
    gate.release.add_permits(1);
    gate.finished(1).await;
    assert_eq!(conversation.messages, before, "no half turn is left");
}

/// A split run keeps going without its reader: the tool finishes, and the
/// handle gives back the transcript with its result and the answer after.
#[tokio::test]
async fn a_split_run_finishes_without_its_reader_and_keeps_the_tools_result() {
    let gate = Arc::new(Gate::default());
    let agent = agent(one_call(), &gate);
    let conversation = Conversation::new("conv-split");
    let (mut events, handle) = agent
        .start(conversation, Input::User("send it".into()))
        .split();
    until_call_starts(&mut events).await;
    gate.started(1).await;
    drop(events);
    gate.release.add_permits(1);
    let conversation = tokio::time::timeout(Duration::from_secs(5), handle.finish())
        .await
        .unwrap_or_else(|_| panic!("the run did not end"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(gate.finished.load(Ordering::SeqCst), 1);
    match &conversation.messages[..] {
        [
            Message::User { .. },
            Message::Assistant { tool_calls, .. },
            Message::Tool {
                tool_call_id,
                content,
                is_error: false,
                ..
            },
            Message::Assistant {
                content: answer, ..
            },
        ] => {
            assert_eq!(tool_calls[0].id, "call_1");
            assert_eq!(tool_call_id, "call_1");
            let envelope: serde_json::Value =
                serde_json::from_str(content).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(envelope["result"], json!("sent"));
            assert_eq!(answer, "Sent.");
        }
        other => panic!("unexpected transcript: {other:?}"),
    }
}

/// A whole `Run` dropped unread stops nothing either.
#[tokio::test]
async fn a_run_dropped_unread_still_runs_its_tool_to_the_end() {
    let gate = Arc::new(Gate::default());
    let agent = agent(one_call(), &gate);
    let run = agent.start(
        Conversation::new("conv-unread"),
        Input::User("send it".into()),
    );
    gate.started(1).await;
    drop(run);
    gate.release.add_permits(1);
    gate.finished(1).await;
}

/// Cancelling through the run stops it: `Cancelled`, exactly one `Done`,
/// and the running call answered `cancelled` in the transcript.
#[tokio::test]
async fn cancel_stops_the_run_with_every_call_answered() {
    let gate = Arc::new(Gate::default());
    let agent = agent(
        vec![
            ScriptedTurn::new()
                .tool_call("call_1", "gated", r#"{"label":"a"}"#)
                .tool_call("call_2", "gated", r#"{"label":"b"}"#),
            ScriptedTurn::new().text("never asked"),
        ],
        &gate,
    );
    let run = agent.start(Conversation::new("conv-cancel"), Input::User("go".into()));
    gate.started(2).await;
    run.cancel();
    let (events, handle) = run.split();
    let events: Vec<AgentEvent> = tokio::time::timeout(Duration::from_secs(5), events.collect())
        .await
        .unwrap_or_else(|_| panic!("the cancelled run did not end"));
    assert!(matches!(done(&events), DoneReason::Cancelled), "{events:?}");
    let conversation = handle.finish().await.unwrap_or_else(|e| panic!("{e}"));
    let answered: Vec<(String, serde_json::Value)> = conversation
        .messages
        .iter()
        .filter_map(|message| match message {
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => Some((
                tool_call_id.clone(),
                serde_json::from_str(content).unwrap_or_else(|e| panic!("{e}")),
            )),
            _ => None,
        })
        .collect();
    let ids: Vec<&str> = answered.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["call_1", "call_2"]);
    for (_, envelope) in &answered {
        assert_eq!(envelope["error"]["code"], json!("cancelled"), "{envelope}");
    }
    assert_eq!(gate.finished.load(Ordering::SeqCst), 0);
    assert!(
        !conversation
            .messages
            .iter()
            .any(|m| matches!(m, Message::Assistant { content, .. } if content == "never asked")),
        "the model was not asked again"
    );
}

/// Arguments of `chatty`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Chatty {
    /// How many progress reports to make.
    pub reports: u32,
}

/// Reports its progress `reports` times, then returns how many.
#[agent_tool(name = "chatty", usage = "Test tool.")]
async fn chatty(args: Chatty, ctx: &ToolContext) -> Result<u32, ToolError> {
    for report in 0..args.reports {
        ctx.progress(f64::from(report), Some(f64::from(args.reports)), None);
        tokio::task::yield_now().await;
    }
    Ok(args.reports)
}

/// A reader that reads nothing until the run is over holds up nothing, and
/// then gets every event that matters: each result, the latest progress of
/// the call (not ten thousand), and exactly one `Done`, last.
#[tokio::test]
async fn a_reader_that_reads_late_holds_nothing_up_and_loses_nothing_that_matters() {
    let agent = Agent::builder()
        .model(ScriptedModel::new(vec![
            ScriptedTurn::new()
                .text("Working on it. ")
                .tool_call("call_1", "chatty", r#"{"reports":10000}"#)
                .tool_call("call_2", "chatty", r#"{"reports":3}"#),
            ScriptedTurn::new().text("Done."),
        ]))
        .catalog(
            aptix::tools![ChattyTool]
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let (events, handle) = agent
        .start(Conversation::new("conv-late"), Input::User("go".into()))
        .split();
    // Nothing is read until the run is over.
    let conversation = tokio::time::timeout(Duration::from_secs(10), handle.finish())
        .await
        .unwrap_or_else(|_| panic!("the run waited for its reader"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        conversation.messages.len(),
        5,
        "{:?}",
        conversation.messages
    );
    let events: Vec<AgentEvent> = events.collect().await;
    assert!(matches!(done(&events), DoneReason::Completed));
    let results: Vec<(&str, &serde_json::Value)> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallResult { id, envelope, .. } => Some((id.as_str(), envelope)),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].1["result"], json!(10000));
    assert_eq!(results[1].1["result"], json!(3));
    let progress: Vec<(&str, f64)> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolProgress { id, done, .. } => Some((id.as_str(), *done)),
            _ => None,
        })
        .collect();
    // At most the latest report of each call, and never one after its result.
    assert!(progress.len() <= 2, "{} progress events", progress.len());
    if let Some((_, done)) = progress.iter().find(|(id, _)| *id == "call_1") {
        assert_eq!(*done, 9999.0);
    }
    let text: String = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Working on it. Done.");
}

/// A model that panics: the run's code, not a tool's.
struct Panicking;

impl aptix::model::ChatModel for Panicking {
    fn dialect(&self) -> aptix::Dialect {
        aptix::Dialect::OpenAiStrict
    }

    fn stream<'a>(
        &'a self,
        _request: &'a aptix::model::ChatRequest,
    ) -> aptix::model::ModelStream<'a> {
        panic!("the model adapter broke")
    }
}

/// A run whose own code panics ends its events without `Done`, and
/// `finish` says it panicked, with the message.
#[tokio::test]
async fn a_panicking_run_is_reported_by_finish() {
    let agent = Agent::builder()
        .model(Panicking)
        .catalog(
            aptix::Catalog::builder()
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let (events, handle) = agent
        .start(Conversation::new("conv-panic"), Input::User("hi".into()))
        .split();
    let events: Vec<AgentEvent> = events.collect().await;
    assert!(!events.iter().any(|e| matches!(e, AgentEvent::Done { .. })));
    match handle.finish().await {
        Err(RunError::Panicked(message)) => assert!(message.contains("adapter broke"), "{message}"),
        other => panic!("expected a panic, got {other:?}"),
    }
}

/// What a server needs to move a run's parts into tasks of their own.
#[test]
fn a_run_and_its_parts_can_be_handed_to_other_tasks() {
    fn observer<T: futures_util::Stream<Item = AgentEvent> + Unpin + Send + 'static>() {}
    fn owned<T: Send + Sync + 'static>() {}
    observer::<aptix::agent::Run>();
    observer::<aptix::agent::RunEvents>();
    owned::<aptix::agent::RunHandle>();
    owned::<RunError>();
}
