//! Durable suspension and resolution (the Agentix tools guide): approvals,
//! client and human calls, refusals, deadlines, headless client calls,
//! revival from the store, and crash recovery without running a call twice.
//!
//! Every scenario runs against `MemoryStore` and `SqliteStore`, and against
//! `PostgresStore` when `APTIX_TEST_PG_URL` is set (required when CI=true).
//!
//! Agents here run no deadline worker of their own: the tests share one
//! PostgreSQL, and a worker sweeps (and resumes) every conversation in it.

use crate::common::done;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{Backend, store, uuid};
use crate::tools::{Charge, ChargeTool, Confirm, OpenPage, Opened, ran, runs};
use aptix::durable::{DurableAgent, DurableError, Revival};
use aptix::prelude::*;
use aptix::store::{CallRecord, CallState, ConversationStatus, Step, Store};
use aptix::transcript::Message;
use aptix::{
    Agent, AgentEvent, Catalog, Conversation, DoneReason, Input, Resolution, durable::ResolveError,
};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// Imports a file; safe to repeat with the same call id.
#[agent_tool(name = "import", usage = "Test tool.", idempotent = true)]
async fn import(args: Charge, ctx: &ToolContext) -> Result<u32, ToolError> {
    ran(ctx, "import", json!({"cents": args.cents}));
    Ok(args.cents)
}

/// A 1x1 PNG, base64.
const PIXEL: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// Takes a snapshot: its size, and the picture for the model.
#[agent_tool(name = "snapshot", usage = "Test tool.")]
async fn snapshot(_args: Empty, ctx: &ToolContext) -> Result<ToolReturn<u32>, ToolError> {
    ran(ctx, "snapshot", json!({}));
    Ok(ToolReturn::new(1).with(Content::image(PIXEL, "image/png")))
}

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Empty {}

/// Reads the browser's clipboard.
#[agent_tool(name = "read_clipboard", usage = "Test tool.", executor = client, output = Opened)]
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
pub struct ReadClipboard {
    /// Why.
    pub reason: String,
}

fn catalog() -> Catalog {
    Catalog::builder()
        .tool::<ChargeTool>()
        .tool::<ImportTool>()
        .tool::<OpenPage>()
        .tool::<Confirm>()
        .tool::<ReadClipboard>()
        .tool::<SnapshotTool>()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn agent_with(store: Arc<dyn Store>, turns: Vec<ScriptedTurn>) -> DurableAgent {
    DurableAgent::builder(
        Agent::builder()
            .model(ScriptedModel::new(turns))
            .catalog(catalog())
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
        store,
    )
    .deadline_worker(None)
    .client_grace(Duration::from_secs(60))
    .build()
}

fn call_turn(id: &str, name: &str, arguments: Value) -> ScriptedTurn {
    ScriptedTurn::new().tool_call(id, name, &arguments.to_string())
}

fn answer(text: &str) -> ScriptedTurn {
    ScriptedTurn::new().text(text)
}

async fn send(agent: &DurableAgent, conversation: &str, text: &str) -> Vec<AgentEvent> {
    agent
        .send(conversation, Input::User(text.into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .collect()
        .await
}

/// Waits until the background run leaves the conversation idle.
async fn wait_idle(agent: &DurableAgent, conversation: &str) -> Conversation {
    let started = Instant::now();
    loop {
        let stored = agent
            .conversation(conversation)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("conversation {conversation} vanished"));
        if stored.status == ConversationStatus::Idle {
            return stored.conversation;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "conversation never became idle: {stored:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn tool_results(conversation: &Conversation) -> Vec<Value> {
    aptix_testkit::tool_results(&conversation.messages)
}

fn last_text(conversation: &Conversation) -> Option<&str> {
    conversation
        .messages
        .iter()
        .rev()
        .find_map(|message| match message {
            Message::Assistant { content, .. } if !content.is_empty() => Some(content.as_str()),
            _ => None,
        })
}

crate::common::on_every_store!(
    approved_call_runs_once_then_the_model_answers,
    denied_call_reaches_the_model_as_denied,
    approve_with_args_is_revalidated,
    retries_are_stale_and_changes_conflict,
    wrong_kind_and_unknown_are_refused,
    gated_client_call_suspends_twice,
    human_result_is_validated_against_the_output_schema,
    invalid_arguments_never_suspend,
    expired_call_resumes_with_a_timeout,
    headless_client_call_fails_fast,
    another_agent_resolves_after_a_restart,
    new_input_while_suspended_is_refused,
    concurrent_resolutions_have_one_winner,
    crash_during_execution_is_recovered,
    hooks_steer_a_durable_run_and_it_rests_halted,
    a_revived_turn_runs_its_unrecorded_calls_through_the_hooks,
    a_policy_holds_a_durable_call_and_only_an_exact_approval_runs_it,
    approve_always_is_remembered_for_the_tool_across_a_restart,
    a_revived_turn_asks_the_policy_about_its_unrecorded_calls,
    a_revived_turn_keeps_what_the_hooks_decide,
    a_halt_withdraws_the_turns_waiting_calls,
    a_halt_found_while_settling_withdraws_the_calls_that_wait,
    new_input_after_a_halt_found_while_settling_is_answered,
    attachments_are_kept_in_the_stored_transcript,
    a_result_settled_from_the_ledger_keeps_its_attachments,
);

/// The attachments of the conversation's tool results, in order.
fn attachments(conversation: &Conversation) -> Vec<Vec<Content>> {
    conversation
        .messages
        .iter()
        .filter_map(|message| match message {
            Message::Tool { attachments, .. } => Some(attachments.clone()),
            _ => None,
        })
        .collect()
}

async fn attachments_are_kept_in_the_stored_transcript(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("attach-{}", uuid());
    let call = format!("c-{}", uuid());
    let agent = agent_with(
        store.clone(),
        vec![call_turn(&call, "snapshot", json!({})), answer("Seen.")],
    );
    let events = send(&agent, &id, "look").await;
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");
    drop(agent);
    // Read back by another agent on the same store, as after a restart.
    let stored = agent_with(store, Vec::new())
        .conversation(&id)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("conversation {id} is not stored"));
    assert_eq!(
        attachments(&stored.conversation),
        vec![vec![Content::image(PIXEL, "image/png")]]
    );
    assert_eq!(tool_results(&stored.conversation)[0]["result"], json!(1));
}

async fn a_result_settled_from_the_ledger_keeps_its_attachments(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("attach-crash-{}", uuid());
    let call = format!("c-{}", uuid());
    let now = now_ms();
    // The tool ran and its row was closed, then the process died before
    // the result reached the transcript.
    left_by_a_dead_process(
        &*store,
        &id,
        "look",
        &[(&call, "snapshot", "{}")],
        now + 300,
    )
    .await;
    ran_and_recorded(
        &*store,
        (&id, &call, "snapshot", "{}"),
        json!(1),
        vec![Content::image(PIXEL, "image/png")],
    )
    .await;
    let agent = agent_with(store, vec![answer("Seen.")]);
    let _ = agent.ensure_started(&id).await;
    let conversation = wait_idle(&agent, &id).await;
    assert_eq!(runs(&call), 0, "the recorded call ran again");
    assert_eq!(
        attachments(&conversation),
        vec![vec![Content::image(PIXEL, "image/png")]]
    );
    assert_eq!(tool_results(&conversation)[0]["result"], json!(1));
    assert_eq!(last_text(&conversation), Some("Seen."));
}

async fn approved_call_runs_once_then_the_model_answers(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("approve-{}", uuid());
    let call = format!("c-{}", uuid());
    let agent = agent_with(
        store,
        vec![
            call_turn(&call, "charge", json!({"cents": 500})),
            answer("Charged."),
        ],
    );
    let events = send(&agent, &id, "charge me").await;
    let DoneReason::Suspended(calls) = done(&events) else {
        panic!("expected a suspension: {events:?}")
    };
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].tool_call_id, call);
    assert_eq!(runs(&call), 0, "ran before approval");
    // The durable run's summary counts the call that suspended.
    let Some(AgentEvent::Done { summary, .. }) = events.last() else {
        panic!("Done comes last: {events:?}")
    };
    assert_eq!(summary.iterations, 1);
    assert_eq!(summary.tools["charge"].calls, 1);
    assert_eq!(summary.tools["charge"].suspended, 1);
    assert!(summary.request_hash().is_some());
    let pending = agent.pending(&id).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].step, Step::Approval);
    assert_eq!(pending[0].payload, json!({"cents": 500}));
    let mut events = agent.subscribe();
    let resolved = agent
        .resolve(&id, &call, Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(resolved.pending, 0);
    let conversation = wait_idle(&agent, &id).await;
    assert_eq!(last_text(&conversation), Some("Charged."));
    let results = tool_results(&conversation);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["ok"], json!(true));
    assert_eq!(results[0]["result"], json!("charged 500"));
    // The background run's events reach subscribers, ending with Done.
    let mut saw_done = false;
    while let Ok(Ok(event)) = tokio::time::timeout(Duration::from_secs(2), events.recv()).await {
        if event.conversation_id == id
            && matches!(
                event.event,
                AgentEvent::Done {
                    reason: DoneReason::Completed,
                    ..
                }
            )
        {
            saw_done = true;
            break;
        }
    }
    assert!(saw_done, "no Completed event from the background run");
    assert_eq!(agent.pending(&id).await.map(|p| p.len()).ok(), Some(0));
    assert_eq!(runs(&call), 1);
}

async fn denied_call_reaches_the_model_as_denied(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("deny-{}", uuid());
    let call = format!("c-{}", uuid());
    let agent = agent_with(
        store,
        vec![
            call_turn(&call, "charge", json!({"cents": 9})),
            answer("Understood."),
        ],
    );
    send(&agent, &id, "charge me").await;
    agent
        .resolve(
            &id,
            &call,
            Resolution::Deny {
                message: "Too expensive today.".into(),
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let conversation = wait_idle(&agent, &id).await;
    let results = tool_results(&conversation);
    assert_eq!(results[0]["ok"], json!(false));
    assert_eq!(results[0]["error"]["code"], json!("denied"));
    assert_eq!(
        results[0]["error"]["message"],
        json!("Too expensive today.")
    );
    assert_eq!(runs(&call), 0, "a denied call ran");
}

async fn approve_with_args_is_revalidated(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("args-{}", uuid());
    let call = format!("c-{}", uuid());
    let agent = agent_with(
        store,
        vec![
            call_turn(&call, "charge", json!({"cents": 5000})),
            answer("Done."),
        ],
    );
    send(&agent, &id, "charge me").await;
    let refused = agent
        .resolve(&id, &call, Resolution::ApproveWithArgs(json!({"cents": 0})))
        .await;
    match refused {
        Err(ResolveError::InvalidArguments { message, .. }) => {
            assert!(message.contains("cents"), "{message}")
        }
        other => panic!("expected InvalidArguments, got {other:?}"),
    }
    assert_eq!(agent.pending(&id).await.map(|p| p.len()).ok(), Some(1));
    agent
        .resolve(
            &id,
            &call,
            Resolution::ApproveWithArgs(json!({"cents": 50})),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let conversation = wait_idle(&agent, &id).await;
    assert_eq!(
        tool_results(&conversation)[0]["result"],
        json!("charged 50")
    );
}

async fn retries_are_stale_and_changes_conflict(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("stale-{}", uuid());
    let call = format!("c-{}", uuid());
    let agent = agent_with(
        store,
        vec![
            call_turn(&call, "charge", json!({"cents": 7})),
            answer("Done."),
        ],
    );
    send(&agent, &id, "charge me").await;
    agent
        .resolve(&id, &call, Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(
        agent.resolve(&id, &call, Resolution::Approve).await,
        Err(ResolveError::Stale { .. })
    ));
    assert!(matches!(
        agent
            .resolve(
                &id,
                &call,
                Resolution::Deny {
                    message: "no".into()
                }
            )
            .await,
        Err(ResolveError::Conflict { .. })
    ));
    wait_idle(&agent, &id).await;
}

async fn wrong_kind_and_unknown_are_refused(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("kind-{}", uuid());
    let charge_call = format!("a-{}", uuid());
    let clip_call = format!("b-{}", uuid());
    let agent = agent_with(
        store,
        vec![
            ScriptedTurn::new()
                .tool_call(&charge_call, "charge", r#"{"cents":1}"#)
                .tool_call(&clip_call, "read_clipboard", r#"{"reason":"paste"}"#),
            answer("Done."),
        ],
    );
    let attached = agent.attach_client(&id).await;
    send(&agent, &id, "go").await;
    assert!(matches!(
        agent
            .resolve(&id, &charge_call, Resolution::Result(json!({"title": "x"})))
            .await,
        Err(ResolveError::WrongKind { .. })
    ));
    assert!(matches!(
        agent.resolve(&id, &clip_call, Resolution::Approve).await,
        Err(ResolveError::WrongKind { .. })
    ));
    assert!(matches!(
        agent
            .resolve(&id, "no-such-call", Resolution::Approve)
            .await,
        Err(ResolveError::Unknown { .. })
    ));
    assert!(matches!(
        agent
            .resolve("no-such-conversation", &charge_call, Resolution::Approve)
            .await,
        Err(ResolveError::Unknown { .. })
    ));
    // Both still pending: the refusals changed nothing.
    assert_eq!(agent.pending(&id).await.map(|p| p.len()).ok(), Some(2));
    let first = agent
        .resolve(&id, &charge_call, Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        first.pending, 1,
        "the conversation must wait for the clipboard"
    );
    agent
        .resolve(
            &id,
            &clip_call,
            Resolution::Result(json!({"title": "copied"})),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let conversation = wait_idle(&agent, &id).await;
    let results = tool_results(&conversation);
    assert_eq!(results.len(), 2);
    drop(attached);
}

async fn gated_client_call_suspends_twice(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("gated-{}", uuid());
    let call = format!("c-{}", uuid());
    let agent = agent_with(
        store.clone(),
        vec![
            call_turn(&call, "open_page", json!({"url": "https://example.com"})),
            answer("Opened."),
        ],
    );
    let _attached = agent
        .attach_client(&id)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    send(&agent, &id, "open it").await;
    let pending = agent.pending(&id).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].step, Step::Approval);
    let resolved = agent
        .resolve(&id, &call, Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(resolved.pending, 0);
    // The approval resumes the run, which prepares the client step.
    let started = Instant::now();
    let client = loop {
        let pending = agent.pending(&id).await.unwrap_or_else(|e| panic!("{e}"));
        if let Some(client) = pending.into_iter().find(|p| p.step == Step::Client) {
            break client;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no client step"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(client.payload, json!({"url": "https://example.com"}));
    let stored = store.calls(&id).await.unwrap_or_else(|e| panic!("{e}"));
    let waits: Vec<Step> = stored
        .iter()
        .filter(|r| r.step != Step::Execution)
        .map(|r| r.step)
        .collect();
    assert_eq!(waits, vec![Step::Approval, Step::Client]);
    // Wait until the conversation is suspended again before resolving.
    let started = Instant::now();
    while agent
        .conversation(&id)
        .await
        .ok()
        .flatten()
        .map(|c| c.status)
        != Some(ConversationStatus::Suspended)
    {
        assert!(started.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    agent
        .resolve(
            &id,
            &call,
            Resolution::Result(json!({"title": "Example Domain"})),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let conversation = wait_idle(&agent, &id).await;
    let results = tool_results(&conversation);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["result"], json!({"title": "Example Domain"}));
    assert_eq!(last_text(&conversation), Some("Opened."));
}

async fn human_result_is_validated_against_the_output_schema(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("human-{}", uuid());
    let call = format!("c-{}", uuid());
    let agent = agent_with(
        store,
        vec![
            call_turn(&call, "confirm", json!({"question": "Proceed?"})),
            answer("Ok."),
        ],
    );
    send(&agent, &id, "ask me").await;
    let pending = agent.pending(&id).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pending[0].step, Step::Human);
    // The tool's own suspend_timeout (1h) applies.
    let deadline = pending[0].deadline_ms.unwrap_or(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    assert!(
        deadline > now + 3_500_000,
        "deadline {deadline} is not ~1h away"
    );
    for bad in [
        json!({"agreed": "yes"}),
        json!({"agreed": true, "extra": 1}),
        json!(null),
    ] {
        match agent
            .resolve(&id, &call, Resolution::Result(bad.clone()))
            .await
        {
            Err(ResolveError::InvalidResult { message, .. }) => assert!(!message.is_empty()),
            other => panic!("{bad} was accepted: {other:?}"),
        }
    }
    agent
        .resolve(&id, &call, Resolution::Result(json!({"agreed": true})))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let conversation = wait_idle(&agent, &id).await;
    assert_eq!(
        tool_results(&conversation)[0]["result"],
        json!({"agreed": true})
    );
}

async fn invalid_arguments_never_suspend(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("invalid-{}", uuid());
    let agent = agent_with(
        store,
        vec![
            call_turn("bad", "charge", json!({"cents": -3})),
            answer("Sorry."),
        ],
    );
    let events = send(&agent, &id, "charge me").await;
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");
    assert_eq!(agent.pending(&id).await.map(|p| p.len()).ok(), Some(0));
    let conversation = wait_idle(&agent, &id).await;
    assert_eq!(
        tool_results(&conversation)[0]["error"]["code"],
        json!("invalid_arguments")
    );
}

async fn expired_call_resumes_with_a_timeout(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("expire-{}", uuid());
    let call = format!("c-{}", uuid());
    let agent = DurableAgent::builder(
        Agent::builder()
            .model(ScriptedModel::new(vec![
                call_turn(&call, "charge", json!({"cents": 5})),
                answer("Nobody approved."),
            ]))
            .catalog(catalog())
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
        store,
    )
    .deadline_worker(None)
    .suspend_timeout(Duration::from_millis(100))
    .build();
    send(&agent, &id, "charge me").await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    // A sweep in any process fires it; here, the worker of this one.
    let worker = agent.spawn_deadline_worker(Duration::from_millis(20));
    let conversation = wait_idle(&agent, &id).await;
    worker.abort();
    let results = tool_results(&conversation);
    assert_eq!(results[0]["error"]["code"], json!("timeout"));
    assert!(
        results[0]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("approved")),
        "{results:?}"
    );
    assert!(matches!(
        agent.resolve(&id, &call, Resolution::Approve).await,
        Err(ResolveError::Expired { .. })
    ));
}

async fn headless_client_call_fails_fast(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("headless-{}", uuid());
    let agent = DurableAgent::builder(
        Agent::builder()
            .model(ScriptedModel::new(vec![
                call_turn("clip", "read_clipboard", json!({"reason": "paste"})),
                answer("No client."),
            ]))
            .catalog(catalog())
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
        store,
    )
    .deadline_worker(None)
    .client_grace(Duration::from_millis(50))
    .build();
    send(&agent, &id, "paste").await;
    let pending = agent.pending(&id).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pending.len(), 1);
    tokio::time::sleep(Duration::from_millis(80)).await;
    // Any process's sweep may expire it (tests share a PostgreSQL), so
    // check the effect, not this sweep's count.
    agent
        .sweep_deadlines()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(agent.pending(&id).await.map(|p| p.len()).ok(), Some(0));
    let conversation = wait_idle(&agent, &id).await;
    let results = tool_results(&conversation);
    assert_eq!(results[0]["error"]["code"], json!("timeout"));
    assert!(
        results[0]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no client was attached")),
        "{results:?}"
    );
}

async fn another_agent_resolves_after_a_restart(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("restart-{}", uuid());
    let call = format!("c-{}", uuid());
    let first = agent_with(
        store.clone(),
        vec![call_turn(&call, "charge", json!({"cents": 3}))],
    );
    send(&first, &id, "charge me").await;
    drop(first);
    // A new process: nothing in memory, only the store.
    let second = agent_with(store, vec![answer("Charged after the restart.")]);
    assert_eq!(
        second.ensure_started(&id).await.ok(),
        Some(Revival::Waiting { pending: 1 })
    );
    second
        .resolve(&id, &call, Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let conversation = wait_idle(&second, &id).await;
    assert_eq!(last_text(&conversation), Some("Charged after the restart."));
    assert_eq!(tool_results(&conversation)[0]["result"], json!("charged 3"));
}

async fn new_input_while_suspended_is_refused(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("busy-{}", uuid());
    let call = format!("c-{}", uuid());
    let agent = agent_with(store, vec![call_turn(&call, "charge", json!({"cents": 3}))]);
    send(&agent, &id, "charge me").await;
    assert!(matches!(
        agent.send(&id, Input::User("and more".into())).await,
        Err(DurableError::Suspended { pending: 1, .. })
    ));
}

async fn concurrent_resolutions_have_one_winner(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("race-{}", uuid());
    let call = format!("c-{}", uuid());
    let agent = agent_with(
        store,
        vec![
            call_turn(&call, "confirm", json!({"question": "?"})),
            answer("Ok."),
        ],
    );
    send(&agent, &id, "ask").await;
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let agent = agent.clone();
            let (id, call) = (id.clone(), call.clone());
            tokio::spawn(async move {
                agent
                    .resolve(
                        &id,
                        &call,
                        Resolution::Result(json!({"agreed": i % 2 == 0})),
                    )
                    .await
            })
        })
        .collect();
    let mut wins = 0;
    for task in tasks {
        match task.await.unwrap_or_else(|e| panic!("{e}")) {
            Ok(_) => wins += 1,
            Err(ResolveError::Stale { .. } | ResolveError::Conflict { .. }) => {}
            Err(other) => panic!("unexpected refusal: {other}"),
        }
    }
    assert_eq!(wins, 1);
    wait_idle(&agent, &id).await;
}

/// A process claimed the conversation, recorded two server calls as
/// executing, and died. After its lease runs out another process revives
/// the conversation: the idempotent call runs again (once), the other gets
/// an "interrupted" result and never runs a second time.
async fn crash_during_execution_is_recovered(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("crash-{}", uuid());
    let (safe, risky_call) = (format!("s-{}", uuid()), format!("u-{}", uuid()));
    let now = now_ms();
    left_by_a_dead_process(
        &*store,
        &id,
        "import and charge",
        &[
            (&safe, "import", r#"{"cents":11}"#),
            (&risky_call, "charge", r#"{"cents":12}"#),
        ],
        now + 1_000,
    )
    .await;
    for (call, tool, arguments, approval) in [
        (&safe, "import", r#"{"cents":11}"#, false),
        (&risky_call, "charge", r#"{"cents":12}"#, true),
    ] {
        let record = |step, state, outcome: Option<&str>| CallRecord {
            requested: None,
            reasoning: None,
            conversation_id: id.clone(),
            tool_call_id: call.clone(),
            step,
            tool: tool.into(),
            arguments: arguments.into(),
            payload: arguments.into(),
            state,
            outcome: outcome.map(str::to_owned),
            deadline: None,
            created_at: now,
            updated_at: now,
        };
        if approval {
            store
                .insert_call(&record(
                    Step::Approval,
                    CallState::Resolved,
                    Some(r#"{"kind":"approve"}"#),
                ))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        store
            .insert_call(&record(Step::Execution, CallState::Executing, None))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let agent = agent_with(store.clone(), vec![answer("Recovered.")]);
    // Held by the dead process for up to 1 s more: busy now, and taken
    // over in the background when its lease runs out.
    assert_eq!(agent.ensure_started(&id).await.ok(), Some(Revival::Busy));
    let conversation = wait_idle(&agent, &id).await;
    assert!(
        std::time::SystemTime::now()
            >= std::time::UNIX_EPOCH + Duration::from_millis((now + 1_000) as u64),
        "taken over before the dead process's lease ran out"
    );
    let results = tool_results(&conversation);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["ok"], json!(true), "{results:?}");
    assert_eq!(results[0]["result"], json!(11));
    assert_eq!(results[1]["error"]["code"], json!("cancelled"));
    assert!(
        results[1]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("interrupted")),
    );
    assert_eq!(runs(&safe), 1, "the idempotent call ran again, once");
    assert_eq!(runs(&risky_call), 0, "the non-idempotent call ran again");
    assert_eq!(last_text(&conversation), Some("Recovered."));
}

/// A durable agent on `store` with the [`Guard`] hook, whose model answers `turns`.
fn guarded_agent(store: Arc<dyn Store>, turns: Vec<ScriptedTurn>) -> DurableAgent {
    DurableAgent::builder(
        Agent::builder()
            .model(ScriptedModel::new(turns))
            .catalog(catalog())
            .hook(Guard)
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
        store,
    )
    .deadline_worker(None)
    .build()
}

/// Halts a run on a charge over 1000 cents; tells the model less of an import.
struct Guard;

impl aptix::agent::ToolHook for Guard {
    fn name(&self) -> &str {
        "guard"
    }

    fn before_call<'a>(
        &'a self,
        call: aptix::agent::HookCall<'a>,
    ) -> aptix::agent::HookFuture<'a, aptix::agent::BeforeCall> {
        let over = call.arguments["cents"].as_u64().unwrap_or(0) > 1000;
        Box::pin(async move {
            if over {
                aptix::agent::BeforeCall::Halt("Too much at once.".into())
            } else {
                aptix::agent::BeforeCall::Continue
            }
        })
    }

    fn after_call<'a>(
        &'a self,
        _call: aptix::agent::HookCall<'a>,
        _envelope: &'a Value,
    ) -> aptix::agent::HookFuture<'a, aptix::agent::AfterCall> {
        Box::pin(async { aptix::agent::AfterCall::Replace("Imported.".into()) })
    }
}

async fn hooks_steer_a_durable_run_and_it_rests_halted(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("hooks-{}", uuid());
    let (small, big) = (format!("c-{}", uuid()), format!("c-{}", uuid()));
    let agent = guarded_agent(
        store,
        vec![
            call_turn(&small, "import", json!({"cents": 5})),
            call_turn(&big, "import", json!({"cents": 5000})),
            answer("never asked"),
        ],
    );
    let events = send(&agent, &id, "import twice").await;
    assert!(
        matches!(done(&events), DoneReason::Halted { by, .. } if by == "guard"),
        "{events:?}"
    );
    // The import ran once; the big one never did.
    assert_eq!(runs(&small), 1);
    assert_eq!(runs(&big), 0);
    // The stored transcript holds what the model was shown, and a result
    // for every call, so the conversation rests.
    let conversation = wait_idle(&agent, &id).await;
    let contents: Vec<String> = conversation
        .messages
        .iter()
        .filter_map(|message| match message {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(contents.len(), 2, "{contents:?}");
    assert_eq!(contents[0], "Imported.");
    assert!(contents[1].contains("Too much at once."), "{}", contents[1]);
}

/// Found in review: a call the run stopped before recording (a crash after
/// the model's turn was saved) was run on revival without the hooks, so a
/// call a hook denies ran.
async fn a_revived_turn_runs_its_unrecorded_calls_through_the_hooks(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("hook-revive-{}", uuid());
    let big = format!("c-{}", uuid());
    left_by_a_dead_process(
        &*store,
        &id,
        "import a lot",
        &[(&big, "import", r#"{"cents":5000}"#)],
        now_ms() - 1_000,
    )
    .await;
    let agent = guarded_agent(store, vec![answer("Stopped.")]);
    let _ = agent.ensure_started(&id).await;
    let conversation = wait_idle(&agent, &id).await;
    assert_eq!(runs(&big), 0, "a call the hook halts ran on revival");
    let results = tool_results(&conversation);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["error"]["code"], json!("denied"), "{results:?}");
}

/// A turn a dead process left half done: one call ran and its row was
/// closed, the other was never recorded. On revival the hooks decide as
/// they would have in the run: `after_call` rewrites what the model sees of
/// the recorded result, and a `before_call` halt ends the run without
/// asking the model.
async fn a_revived_turn_keeps_what_the_hooks_decide(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("hook-settle-{}", uuid());
    let (small, big) = (format!("c-{}", uuid()), format!("c-{}", uuid()));
    let now = now_ms();
    left_by_a_dead_process(
        &*store,
        &id,
        "import twice",
        &[
            (&small, "import", r#"{"cents":5}"#),
            (&big, "import", r#"{"cents":5000}"#),
        ],
        now - 1_000,
    )
    .await;
    ran_and_recorded(
        &*store,
        (&id, &small, "import", r#"{"cents":5}"#),
        json!(5),
        Vec::new(),
    )
    .await;
    let agent = guarded_agent(store, vec![answer("Asked after a halt.")]);
    let _ = agent.ensure_started(&id).await;
    let conversation = wait_idle(&agent, &id).await;
    assert_eq!((runs(&small), runs(&big)), (0, 0));
    let shown: Vec<&str> = conversation
        .messages
        .iter()
        .filter_map(|message| match message {
            Message::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        shown[0], "Imported.",
        "after_call was not applied: {shown:?}"
    );
    assert!(shown[1].contains("denied"), "{shown:?}");
    assert_eq!(
        last_text(&conversation),
        None,
        "the model was asked after a hook halted the run"
    );
}

/// A hook halts a turn in which another call waits for an approval: the
/// run ends halted with every call answered, and the approval can no longer
/// be given (the call would never run, or run outside any run).
async fn a_halt_withdraws_the_turns_waiting_calls(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("halt-wait-{}", uuid());
    let (charge, big) = (format!("c-{}", uuid()), format!("c-{}", uuid()));
    let agent = guarded_agent(
        store,
        vec![
            ScriptedTurn::new()
                .tool_call(&charge, "charge", r#"{"cents":5}"#)
                .tool_call(&big, "import", r#"{"cents":5000}"#),
            answer("never asked"),
        ],
    );
    let events = send(&agent, &id, "charge and import").await;
    assert!(
        matches!(done(&events), DoneReason::Halted { by, .. } if by == "guard"),
        "{events:?}"
    );
    let stored = agent
        .conversation(&id)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("not stored"));
    assert_eq!(stored.status, ConversationStatus::Idle);
    let results = tool_results(&stored.conversation);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results
            .iter()
            .any(|r| r["tool_call_id"] == json!(charge) && r["error"]["code"] == "cancelled"),
        "{results:?}"
    );
    let late = agent.resolve(&id, &charge, Resolution::Approve).await;
    assert!(
        late.is_err(),
        "an approval of a withdrawn call was taken: {late:?}"
    );
    assert_eq!(runs(&charge), 0);
}

/// A turn a dead process left with two calls unrun: one that waits for an
/// approval, one a hook halts. Settling it on revival ends the run halted,
/// as the live run would have: the waiting call is withdrawn and answered,
/// and its approval can no longer be given.
async fn a_halt_found_while_settling_withdraws_the_calls_that_wait(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("halt-settle-wait-{}", uuid());
    let (charge, big) = (format!("c-{}", uuid()), format!("c-{}", uuid()));
    left_by_a_dead_process(
        &*store,
        &id,
        "charge and import",
        &[
            (&charge, "charge", r#"{"cents":5}"#),
            (&big, "import", r#"{"cents":5000}"#),
        ],
        now_ms() - 1_000,
    )
    .await;
    let agent = guarded_agent(store, vec![answer("never asked")]);
    let _ = agent.ensure_started(&id).await;
    let conversation = wait_idle(&agent, &id).await;
    let stored = agent
        .conversation(&id)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("not stored"));
    assert_eq!(stored.status, ConversationStatus::Idle, "the halt was lost");
    let results = tool_results(&conversation);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results
            .iter()
            .any(|r| r["tool_call_id"] == json!(charge) && r["error"]["code"] == "cancelled"),
        "{results:?}"
    );
    assert_eq!(
        last_text(&conversation),
        None,
        "the model was asked after a halt"
    );
    let late = agent.resolve(&id, &charge, Resolution::Approve).await;
    assert!(
        late.is_err(),
        "an approval of a call of a halted run was taken: {late:?}"
    );
    assert_eq!((runs(&charge), runs(&big)), (0, 0));
}

/// New input sent to a conversation whose dead process left a turn a hook
/// halts: settling ends that turn as the halt says (the call is denied and
/// does not run), and the new input starts a new run that the model
/// answers, rather than resting unanswered in an idle conversation.
async fn new_input_after_a_halt_found_while_settling_is_answered(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("halt-settle-input-{}", uuid());
    let big = format!("c-{}", uuid());
    left_by_a_dead_process(
        &*store,
        &id,
        "import a lot",
        &[(&big, "import", r#"{"cents":5000}"#)],
        now_ms() - 1_000,
    )
    .await;
    let agent = guarded_agent(store, vec![answer("Something else, then.")]);
    let events = send(&agent, &id, "never mind, something else").await;
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");
    let conversation = wait_idle(&agent, &id).await;
    assert_eq!(runs(&big), 0);
    assert_eq!(
        last_text(&conversation),
        Some("Something else, then."),
        "the new input was left unanswered"
    );
    let results = tool_results(&conversation);
    assert_eq!(results[0]["error"]["code"], json!("denied"), "{results:?}");
}

/// The closed execution row of a call that ran (`(conversation, call,
/// tool, arguments)`), its result and attachments stored as the ledger
/// stores them, as a process leaves it that dies before the result reaches
/// the transcript.
async fn ran_and_recorded(
    store: &dyn Store,
    (conversation_id, tool_call_id, tool, arguments): (&str, &str, &str, &str),
    result: Value,
    attachments: Vec<Content>,
) {
    let stored = aptix::Envelope::ok(
        aptix::envelope::EnvelopeIds {
            tool_call_id: tool_call_id.into(),
            conversation_id: Some(conversation_id.into()),
            session_id: None,
        },
        aptix::envelope::JsonText::from_serialize(&result).unwrap_or_else(|e| panic!("{e}")),
    )
    .with_attachments(attachments)
    .to_stored_json();
    let now = now_ms();
    store
        .insert_call(&CallRecord {
            requested: None,
            reasoning: None,
            conversation_id: conversation_id.into(),
            tool_call_id: tool_call_id.into(),
            step: Step::Execution,
            tool: tool.into(),
            arguments: arguments.into(),
            payload: "null".into(),
            state: CallState::Done,
            outcome: Some(stored),
            deadline: None,
            created_at: now,
            updated_at: now,
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A conversation whose model turn made `calls` (id, tool, arguments),
/// saved running by a process that died before recording them, and whose
/// lease ends at `lease_ends` (ms since the epoch).
async fn left_by_a_dead_process(
    store: &dyn Store,
    id: &str,
    user: &str,
    calls: &[(&str, &str, &str)],
    lease_ends: i64,
) {
    let mut conversation = Conversation::new(id);
    conversation.messages.push(Message::user(user));
    conversation.messages.push(Message::Assistant {
        runnable: None,
        content: String::new(),
        tool_calls: calls
            .iter()
            .map(
                |(call, tool, arguments)| aptix::transcript::AssistantToolCall {
                    id: (*call).to_owned(),
                    name: (*tool).into(),
                    arguments: (*arguments).into(),
                },
            )
            .collect(),
        thinking: Vec::new(),
        server_blocks: Vec::new(),
    });
    assert!(
        store
            .create_conversation(&conversation, 0)
            .await
            .unwrap_or(false)
    );
    assert!(
        store
            .claim_conversation(id, "dead-process", lease_ends - 1_000, lease_ends)
            .await
            .unwrap_or(None)
            .is_some()
    );
    store
        .save_conversation(
            &conversation,
            "dead-process",
            ConversationStatus::Running,
            lease_ends,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Imports over 100 cents wait for a person (`import` declares no approval).
fn held_over_100(call: &aptix::agent::ApprovalCall<'_>) -> aptix::agent::ApprovalDecision {
    if call.call.arguments["cents"].as_u64().unwrap_or(0) > 100 {
        aptix::agent::ApprovalDecision::Ask
    } else {
        aptix::agent::ApprovalDecision::Auto
    }
}

fn policy_agent(store: Arc<dyn Store>, turns: Vec<ScriptedTurn>) -> DurableAgent {
    DurableAgent::builder(
        Agent::builder()
            .model(ScriptedModel::new(turns))
            .catalog(catalog())
            .approval_policy(held_over_100)
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
        store,
    )
    .deadline_worker(None)
    .build()
}

async fn a_policy_holds_a_durable_call_and_only_an_exact_approval_runs_it(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("policy-{}", uuid());
    let call = format!("c-{}", uuid());
    let agent = policy_agent(
        store,
        vec![
            call_turn(&call, "import", json!({"cents": 500})),
            answer("Imported."),
        ],
    );
    let events = send(&agent, &id, "import").await;
    assert!(
        matches!(done(&events), DoneReason::Suspended(_)),
        "{events:?}"
    );
    assert_eq!(runs(&call), 0, "a held call ran");
    let pending = agent.pending(&id).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].step, Step::Approval);
    // An approval given for other arguments than the waiting call holds.
    let mut seen_elsewhere = pending[0].clone();
    seen_elsewhere.payload = json!({"cents": 5});
    let refused = agent
        .resolve(
            &id,
            &call,
            Resolution::approve_exactly(seen_elsewhere.arguments_hash()),
        )
        .await;
    assert!(
        matches!(refused, Err(ResolveError::Conflict { .. })),
        "{refused:?}"
    );
    assert_eq!(runs(&call), 0);
    assert_eq!(
        agent.pending(&id).await.map(|p| p.len()).unwrap_or(0),
        1,
        "a refused approval settled the call"
    );
    agent
        .resolve(
            &id,
            &call,
            Resolution::approve_exactly(pending[0].arguments_hash()),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let conversation = wait_idle(&agent, &id).await;
    assert_eq!(runs(&call), 1);
    assert_eq!(tool_results(&conversation)[0]["result"], json!(500));
    assert_eq!(last_text(&conversation), Some("Imported."));
    // A retry of the same approval is stale, not a second run.
    let again = agent
        .resolve(
            &id,
            &call,
            Resolution::approve_exactly(pending[0].arguments_hash()),
        )
        .await;
    assert!(
        matches!(again, Err(ResolveError::Stale { .. })),
        "{again:?}"
    );
    assert_eq!(runs(&call), 1);
}

async fn approve_always_is_remembered_for_the_tool_across_a_restart(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("always-{}", uuid());
    let (first_call, second_call, elsewhere) = (
        format!("c1-{}", uuid()),
        format!("c2-{}", uuid()),
        format!("c3-{}", uuid()),
    );
    let first = agent_with(
        store.clone(),
        vec![
            call_turn(&first_call, "charge", json!({"cents": 3})),
            answer("Charged."),
        ],
    );
    send(&first, &id, "charge me").await;
    let pending = first.pending(&id).await.unwrap_or_else(|e| panic!("{e}"));
    first
        .resolve(
            &id,
            &first_call,
            Resolution::approve_always(pending[0].arguments_hash()),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    wait_idle(&first, &id).await;
    assert_eq!(runs(&first_call), 1);
    drop(first);
    // A new process: the approval is in the ledger, not in memory.
    let second = agent_with(
        store.clone(),
        vec![
            call_turn(&second_call, "charge", json!({"cents": 70})),
            answer("Charged again."),
        ],
    );
    let events = send(&second, &id, "and again").await;
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");
    assert_eq!(
        runs(&second_call),
        1,
        "the remembered approval did not run it"
    );
    // Another conversation asks again.
    let other = agent_with(
        store,
        vec![call_turn(&elsewhere, "charge", json!({"cents": 70}))],
    );
    let events = send(&other, &format!("{id}-other"), "charge me").await;
    assert!(
        matches!(done(&events), DoneReason::Suspended(_)),
        "{events:?}"
    );
    assert_eq!(runs(&elsewhere), 0);
}

/// A call a crash left unrecorded is asked about on revival, as the
/// stopped run would have asked: a call the policy holds must not run.
async fn a_revived_turn_asks_the_policy_about_its_unrecorded_calls(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("policy-revive-{}", uuid());
    let call = format!("c-{}", uuid());
    left_by_a_dead_process(
        &*store,
        &id,
        "import a lot",
        &[(&call, "import", r#"{"cents":5000}"#)],
        now_ms() - 1_000,
    )
    .await;
    let agent = policy_agent(store, vec![answer("Imported.")]);
    let _ = agent.ensure_started(&id).await;
    let started = Instant::now();
    let pending = loop {
        let pending = agent.pending(&id).await.unwrap_or_else(|e| panic!("{e}"));
        if !pending.is_empty() || started.elapsed() > Duration::from_secs(10) {
            break pending;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(runs(&call), 0, "a call the policy holds ran on revival");
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].step, Step::Approval);
}
