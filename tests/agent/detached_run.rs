//! Runs that do not depend on their reader: a dropped event stream neither
//! aborts a running tool nor leaves half a turn in the conversation.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

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
        let permits = tokio::time::timeout(Duration::from_secs(5), self.started.acquire_many(calls))
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
