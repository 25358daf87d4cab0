//! What a person deciding on a durable call sees, and following the run a
//! resolution resumes (the Agentix tools guide: the persisted pending
//! `{executor, kind, prompt}`, the pending map of running, awaiting,
//! resolved and errored calls, ack before resume).
//!
//! The scenarios run against `MemoryStore`, `SqliteStore` (reopened from
//! its file for a restart) and `PostgresStore` when `APTIX_TEST_PG_URL` is
//! set. Agents run no deadline worker of their own (see `durable.rs`).

use crate::common::done;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::common::{Backend, StoreAt, TempDb, pg_url, uuid};
use crate::tools::{ChargeTool, Confirm, OpenPage, ran};
use aptix::durable::{CallProgress, CallStatus, DurableAgent, PendingCall};
use aptix::meta::ExecutorKind;
use aptix::model::{ChatModel, ChatRequest, ModelStream};
use aptix::prelude::*;
use aptix::store::{CallRecord, CallState, ConversationStatus, SqliteStore, Step, Store};
use aptix::{Agent, AgentEvent, Catalog, DoneReason, Input, Resolution};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// Signalled when a `hold` call starts, and what releases it.
type Gates = (Arc<Notify>, Arc<Notify>);

/// The gates of the `hold` calls, by tool call id.
static HOLDS: LazyLock<Mutex<HashMap<String, Gates>>> = LazyLock::new(Default::default);

/// The gates of `call`: `hold` signals the first when it starts, and waits
/// for the second.
fn gates(call: &str) -> Gates {
    HOLDS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(call.to_owned())
        .or_default()
        .clone()
}

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Nothing {}

/// Runs until the test releases it.
#[agent_tool(name = "hold", usage = "Test tool.")]
async fn hold(_args: Nothing, ctx: &ToolContext) -> Result<String, ToolError> {
    let (entered, release) = gates(ctx.tool_call_id());
    entered.notify_one();
    release.notified().await;
    ran(ctx, "hold", json!({}));
    Ok("held and released".to_owned())
}

/// Always fails.
#[agent_tool(name = "fail", usage = "Test tool.")]
async fn fail(_args: Nothing) -> Result<String, ToolError> {
    Err(ToolError::failed("the disk is full"))
}

/// Says why the model called it, once a person approved the call.
#[agent_tool(name = "explain", usage = "Test tool.", approval = requires_approval)]
async fn explain(_args: Nothing, ctx: &ToolContext) -> Result<String, ToolError> {
    Ok(ctx.reasoning().unwrap_or("no reason given").to_owned())
}

fn catalog() -> Catalog {
    Catalog::builder()
        .tool::<ExplainTool>()
        .tool::<ChargeTool>()
        .tool::<OpenPage>()
        .tool::<Confirm>()
        .tool::<HoldTool>()
        .tool::<FailTool>()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn durable(store: Arc<dyn Store>, model: impl ChatModel + 'static) -> DurableAgent {
    DurableAgent::builder(
        Agent::builder()
            .model(model)
            .catalog(catalog())
            .ask_reasoning(true)
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
        store,
    )
    .deadline_worker(None)
    .client_grace(Duration::from_secs(60))
    .build()
}

fn scripted(store: Arc<dyn Store>, turns: Vec<ScriptedTurn>) -> DurableAgent {
    durable(store, ScriptedModel::new(turns))
}

fn call_turn(id: &str, name: &str, arguments: Value) -> ScriptedTurn {
    ScriptedTurn::new().tool_call(id, name, &arguments.to_string())
}

async fn send(agent: &DurableAgent, conversation: &str, text: &str) -> Vec<AgentEvent> {
    agent
        .send(conversation, Input::User(text.into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .collect()
        .await
}

async fn pending(agent: &DurableAgent, conversation: &str) -> Vec<PendingCall> {
    agent
        .pending(conversation)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

async fn calls(agent: &DurableAgent, conversation: &str) -> Vec<CallStatus> {
    agent
        .calls(conversation)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// `(id, progress)` of each call.
fn progress(statuses: &[CallStatus]) -> Vec<(String, CallProgress)> {
    statuses
        .iter()
        .map(|status| (status.tool_call_id.clone(), status.progress))
        .collect()
}

/// Reads `calls` until `check` holds (a background run moves them on).
async fn calls_until(
    agent: &DurableAgent,
    conversation: &str,
    check: impl Fn(&[CallStatus]) -> bool,
) -> Vec<CallStatus> {
    let started = Instant::now();
    loop {
        let statuses = calls(agent, conversation).await;
        if check(&statuses) {
            return statuses;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the calls never got there: {statuses:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The events of `watch` up to its end, within 10 s.
async fn watched(agent: &DurableAgent, conversation: &str) -> Vec<AgentEvent> {
    tokio::time::timeout(
        Duration::from_secs(10),
        agent.watch(conversation).collect::<Vec<_>>(),
    )
    .await
    .unwrap_or_else(|_| panic!("watching {conversation} never ended"))
}

/// The `(id, name, envelope)` of each tool result among `events`.
fn results(events: &[AgentEvent]) -> Vec<(String, String, Value)> {
    events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallResult {
                id, name, envelope, ..
            } => Some((id.to_string(), name.clone(), envelope.clone())),
            _ => None,
        })
        .collect()
}

fn text_of(events: &[AgentEvent]) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

crate::common::on_every_store!(
    a_pending_approval_shows_the_models_reason_executor_and_step_after_a_restart,
    a_client_and_a_human_wait_show_their_executor_and_reason,
    calls_list_running_then_resolved,
    calls_list_awaiting_and_errored,
    watch_follows_the_run_a_resolution_resumes,
    watchers_of_two_conversations_see_only_their_own,
    resolve_answers_before_the_resumed_turn_runs,
    an_expired_wait_is_errored,
    an_approved_call_runs_with_the_models_reason_in_its_context,
);

/// A call that waited for its approval runs in a later run (here, the one
/// the resolution resumes): its tool still reads the model's reason from
/// its context, as in the run that made the call.
async fn an_approved_call_runs_with_the_models_reason_in_its_context(backend: Backend) {
    let Some(at) = StoreAt::new(backend) else {
        return;
    };
    let id = format!("explain-{}", uuid());
    let call = format!("c-{}", uuid());
    let reason = "The user asked why.";
    let agent = scripted(
        at.open().await,
        vec![
            call_turn(&call, "explain", json!({"_reasoningForCall": reason})),
            ScriptedTurn::new().text("Explained."),
        ],
    );
    send(&agent, &id, "explain").await;
    agent
        .resolve(&id, &call, Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let events = watched(&agent, &id).await;
    let results = results(&events);
    assert_eq!(results.len(), 1, "{events:?}");
    assert_eq!(results[0].2["result"], json!(reason));
}

/// The reason the model gave with `_reasoningForCall` is stored with the
/// call: the approver sees it beside the tool's executor and what it waits
/// for, also in a process started after the one that ran the turn.
async fn a_pending_approval_shows_the_models_reason_executor_and_step_after_a_restart(
    backend: Backend,
) {
    let Some(at) = StoreAt::new(backend) else {
        return;
    };
    let id = format!("reason-{}", uuid());
    let call = format!("c-{}", uuid());
    let reason = "The user asked to pay the 5-cent invoice \u{2014} \"now\".";
    let first = scripted(
        at.open().await,
        vec![call_turn(
            &call,
            "charge",
            json!({"cents": 5, "_reasoningForCall": reason}),
        )],
    );
    let events = send(&first, &id, "pay it").await;
    let DoneReason::Suspended(suspended) = done(&events) else {
        panic!("expected a suspension: {events:?}");
    };
    assert_eq!(suspended[0].reasoning.as_deref(), Some(reason));
    let shown = pending(&first, &id).await;
    assert_eq!(shown.len(), 1, "{shown:?}");
    let waiting = &shown[0];
    assert_eq!(waiting.tool_call_id, call);
    assert_eq!(waiting.tool, "charge");
    assert_eq!(waiting.step, Step::Approval);
    assert_eq!(waiting.executor, Some(ExecutorKind::Server));
    assert_eq!(waiting.reasoning.as_deref(), Some(reason));
    // The reason is no argument of the tool.
    assert_eq!(waiting.arguments, json!({"cents": 5}));
    drop(first);

    // A new process, on the store reopened.
    let second = scripted(at.open().await, vec![ScriptedTurn::new().text("Paid.")]);
    let again = pending(&second, &id).await;
    assert_eq!(again, shown, "the same after a restart");
    second
        .resolve(
            &id,
            &call,
            Resolution::approve_exactly(again[0].arguments_hash()),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let events = watched(&second, &id).await;
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");
    assert!(pending(&second, &id).await.is_empty());
}

/// A gated client call waits for its approval, then for its client, each
/// with the model's reason and the client executor; a human tool waits for
/// a person, as `Human`.
async fn a_client_and_a_human_wait_show_their_executor_and_reason(backend: Backend) {
    let Some(at) = StoreAt::new(backend) else {
        return;
    };
    let id = format!("kinds-{}", uuid());
    let page = format!("page-{}", uuid());
    let ask = format!("ask-{}", uuid());
    let agent = scripted(
        at.open().await,
        vec![
            ScriptedTurn::new()
                .tool_call(
                    &page,
                    "open_page",
                    &json!({"url": "https://example.com", "_reasoningForCall": "to read the docs"})
                        .to_string(),
                )
                .tool_call(&ask, "confirm", &json!({"question": "Go on?"}).to_string()),
        ],
    );
    send(&agent, &id, "read the docs").await;
    let shown = pending(&agent, &id).await;
    let by_id = |call: &str| {
        shown
            .iter()
            .find(|pending| pending.tool_call_id == call)
            .unwrap_or_else(|| panic!("{call} is not pending: {shown:?}"))
            .clone()
    };
    let approval = by_id(&page);
    assert_eq!(
        (
            approval.step,
            approval.executor,
            approval.reasoning.as_deref()
        ),
        (
            Step::Approval,
            Some(ExecutorKind::Client),
            Some("to read the docs")
        )
    );
    let question = by_id(&ask);
    assert_eq!(
        (question.step, question.executor, question.reasoning),
        (Step::Human, Some(ExecutorKind::Human), None)
    );
    // The prompt the person answers.
    assert_eq!(question.payload["question"], json!("Go on?"));

    // Approved, the call goes to its client: recorded by settling, in
    // another process (the one that resolves, and resumes), with the reason
    // kept.
    let resolver = scripted(at.open().await, Vec::new());
    resolver
        .resolve(&id, &page, Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    resolver
        .resolve(&id, &ask, Resolution::Result(json!({"agreed": true})))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let events = watched(&resolver, &id).await;
    let DoneReason::Suspended(waiting) = done(&events) else {
        panic!("expected the client wait: {events:?}");
    };
    assert_eq!(waiting[0].reasoning.as_deref(), Some("to read the docs"));
    let client = pending(&resolver, &id).await;
    assert_eq!(client.len(), 1, "{client:?}");
    assert_eq!(
        (
            client[0].tool_call_id.as_str(),
            client[0].step,
            client[0].executor,
            client[0].reasoning.as_deref()
        ),
        (
            page.as_str(),
            Step::Client,
            Some(ExecutorKind::Client),
            Some("to read the docs")
        )
    );
}

/// A server call is `Running` while its tool runs, and `Resolved` once it
/// returned; the calls a UI lists are those of the latest turn.
async fn calls_list_running_then_resolved(backend: Backend) {
    let Some(at) = StoreAt::new(backend) else {
        return;
    };
    let id = format!("running-{}", uuid());
    let call = format!("hold-{}", uuid());
    let (entered, release) = gates(&call);
    let agent = scripted(
        at.open().await,
        vec![
            call_turn(&call, "hold", json!({})),
            ScriptedTurn::new().text("Done holding."),
        ],
    );
    assert!(calls(&agent, &id).await.is_empty(), "no conversation yet");
    let run = agent
        .send(&id, Input::User("hold on".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let run = tokio::spawn(run.collect::<Vec<_>>());
    tokio::time::timeout(Duration::from_secs(10), entered.notified())
        .await
        .unwrap_or_else(|_| panic!("the tool never started"));
    // Another process sees it too.
    let observer = scripted(at.open().await, Vec::new());
    for agent in [&agent, &observer] {
        let statuses = calls(agent, &id).await;
        assert_eq!(progress(&statuses), [(call.clone(), CallProgress::Running)]);
        assert_eq!(statuses[0].tool, "hold");
        assert_eq!(statuses[0].executor, Some(ExecutorKind::Server));
    }
    release.notify_one();
    let events = run.await.unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");
    assert_eq!(
        progress(&calls(&observer, &id).await),
        [(call.clone(), CallProgress::Resolved)]
    );
}

/// A call waiting for its approval is `Awaiting(Approval)` beside a call
/// that failed (`Errored`) and one that ran (`Resolved`), in the model's
/// order; a denial makes the waiting one `Errored`.
async fn calls_list_awaiting_and_errored(backend: Backend) {
    let Some(at) = StoreAt::new(backend) else {
        return;
    };
    let id = format!("mixed-{}", uuid());
    let charge = format!("charge-{}", uuid());
    let failing = format!("fail-{}", uuid());
    let held = format!("hold-{}", uuid());
    gates(&held).1.notify_one(); // runs through
    let agent = scripted(
        at.open().await,
        vec![
            ScriptedTurn::new()
                .tool_call(&charge, "charge", r#"{"cents":7}"#)
                .tool_call(&failing, "fail", "{}")
                .tool_call(&held, "hold", "{}"),
            ScriptedTurn::new().text("Not charged."),
        ],
    );
    let events = send(&agent, &id, "charge and fail").await;
    assert!(
        matches!(done(&events), DoneReason::Suspended(_)),
        "{events:?}"
    );
    let statuses = calls(&agent, &id).await;
    assert_eq!(
        progress(&statuses),
        [
            (charge.clone(), CallProgress::Awaiting(Step::Approval)),
            (failing.clone(), CallProgress::Errored),
            (held.clone(), CallProgress::Resolved),
        ]
    );
    agent
        .resolve(
            &id,
            &charge,
            Resolution::Deny {
                message: "not today".into(),
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Denied: errored from the resolution on, and after the run settled it.
    let statuses = calls_until(&agent, &id, |statuses| {
        statuses
            .first()
            .is_some_and(|status| status.progress == CallProgress::Errored)
    })
    .await;
    assert_eq!(statuses.len(), 3, "{statuses:?}");
    let events = watched(&agent, &id).await;
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");
    assert_eq!(
        progress(&calls(&agent, &id).await),
        [
            (charge, CallProgress::Errored),
            (failing, CallProgress::Errored),
            (held, CallProgress::Resolved),
        ]
    );
}

/// Resolve, then watch: the watcher sees the resumed run from its first
/// event (the approved call's result) to its `Done`, although it came
/// after the run started; watching again replays the run that ended.
async fn watch_follows_the_run_a_resolution_resumes(backend: Backend) {
    let Some(at) = StoreAt::new(backend) else {
        return;
    };
    let id = format!("watch-{}", uuid());
    let call = format!("c-{}", uuid());
    let agent = scripted(
        at.open().await,
        vec![
            call_turn(&call, "charge", json!({"cents": 9})),
            ScriptedTurn::new().text("Charged 9."),
        ],
    );
    send(&agent, &id, "charge 9").await;
    agent
        .resolve(&id, &call, Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let events = watched(&agent, &id).await;
    let results = results(&events);
    assert_eq!(results.len(), 1, "{events:?}");
    assert_eq!(results[0].0, call);
    assert_eq!(results[0].2["result"], json!("charged 9"));
    assert_eq!(text_of(&events), "Charged 9.");
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");
    assert!(
        matches!(events.first(), Some(AgentEvent::ToolCallResult { .. })),
        "from the run's first event: {events:?}"
    );
    let stored = agent
        .conversation(&id)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("{id} is stored"));
    assert_eq!(stored.status, ConversationStatus::Idle);
    // A late watcher still sees how the last run ended.
    let again = watched(&agent, &id).await;
    assert_eq!(results, self::results(&again));
    assert!(matches!(done(&again), DoneReason::Completed));
}

/// Two conversations resumed at once: each watcher gets its own run's
/// events only, also when it started watching before the resolution.
async fn watchers_of_two_conversations_see_only_their_own(backend: Backend) {
    let Some(at) = StoreAt::new(backend) else {
        return;
    };
    let store = at.open().await;
    let (first, second) = (format!("w1-{}", uuid()), format!("w2-{}", uuid()));
    let (call_1, call_2) = (format!("c1-{}", uuid()), format!("c2-{}", uuid()));
    // One model for both conversations: each turn answers by the request.
    let reply = |request: &ChatRequest| {
        let text = format!("{:?}", request.messages);
        match (text.contains("charged 1"), text.contains("charged 2")) {
            (true, _) => ScriptedTurn::new().text("one done"),
            (_, true) => ScriptedTurn::new().text("two done"),
            _ => ScriptedTurn::new().text("?"),
        }
    };
    let agent = scripted(
        store,
        vec![
            call_turn(&call_1, "charge", json!({"cents": 1})),
            call_turn(&call_2, "charge", json!({"cents": 2})),
            ScriptedTurn::replying(reply),
            ScriptedTurn::replying(reply),
        ],
    );
    send(&agent, &first, "charge 1").await;
    send(&agent, &second, "charge 2").await;
    // Watching the first before its resolution, the second after.
    let early = tokio::spawn({
        let watch = agent.watch(&first);
        tokio::time::timeout(Duration::from_secs(10), watch.collect::<Vec<_>>())
    });
    tokio::task::yield_now().await;
    agent
        .resolve(&first, &call_1, Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    agent
        .resolve(&second, &call_2, Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let second_events = watched(&agent, &second).await;
    let first_events = early
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|_| panic!("watching {first} never ended"));
    let ids = |events: &[AgentEvent]| -> Vec<String> {
        results(events).into_iter().map(|(id, _, _)| id).collect()
    };
    assert_eq!(ids(&first_events), [call_1]);
    assert_eq!(ids(&second_events), [call_2]);
    assert_eq!(text_of(&first_events), "one done");
    assert_eq!(text_of(&second_events), "two done");
    for events in [&first_events, &second_events] {
        let dones = events
            .iter()
            .filter(|event| matches!(event, AgentEvent::Done { .. }))
            .count();
        assert_eq!(dones, 1, "{events:?}");
        assert!(matches!(done(events), DoneReason::Completed), "{events:?}");
    }
}

/// A wait whose deadline passed is `Errored` once it expired, before and
/// after the resumed run stored its timeout result.
async fn an_expired_wait_is_errored(backend: Backend) {
    let Some(at) = StoreAt::new(backend) else {
        return;
    };
    let id = format!("expired-{}", uuid());
    let call = format!("c-{}", uuid());
    let agent = DurableAgent::builder(
        Agent::builder()
            .model(ScriptedModel::new([
                call_turn(&call, "charge", json!({"cents": 3})),
                ScriptedTurn::new().text("Nobody approved."),
            ]))
            .catalog(catalog())
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
        at.open().await,
    )
    .deadline_worker(None)
    .suspend_timeout(Duration::from_millis(100))
    .build();
    send(&agent, &id, "charge 3").await;
    assert_eq!(
        progress(&calls(&agent, &id).await),
        [(call.clone(), CallProgress::Awaiting(Step::Approval))]
    );
    tokio::time::sleep(Duration::from_millis(150)).await;
    // A late approval expires it (as a sweep would, which here would sweep
    // the other tests' conversations of a shared database too).
    let late = agent.resolve(&id, &call, Resolution::Approve).await;
    assert!(
        matches!(late, Err(aptix::durable::ResolveError::Expired { .. })),
        "{late:?}"
    );
    assert_eq!(
        progress(&calls(&agent, &id).await),
        [(call.clone(), CallProgress::Errored)]
    );
    let events = watched(&agent, &id).await;
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");
    assert_eq!(
        progress(&calls(&agent, &id).await),
        [(call, CallProgress::Errored)]
    );
}

/// A model that holds one of its turns (by position) until released.
struct HeldModel {
    inner: ScriptedModel,
    held_turn: usize,
    asked: AtomicUsize,
    entered: Arc<Notify>,
    release: Arc<Notify>,
}

impl ChatModel for HeldModel {
    fn dialect(&self) -> aptix::Dialect {
        self.inner.dialect()
    }

    fn stream<'a>(&'a self, request: &'a ChatRequest) -> ModelStream<'a> {
        if self.asked.fetch_add(1, Ordering::SeqCst) != self.held_turn {
            return self.inner.stream(request);
        }
        Box::pin(
            futures_util::stream::once(async move {
                self.entered.notify_one();
                self.release.notified().await;
            })
            .flat_map(move |()| self.inner.stream(request)),
        )
    }
}

/// `resolve` acknowledges once the resolution is recorded: it returns
/// while the turn it resumed is still held at the model, and that turn
/// then completes.
async fn resolve_answers_before_the_resumed_turn_runs(backend: Backend) {
    let Some(at) = StoreAt::new(backend) else {
        return;
    };
    let id = format!("ack-{}", uuid());
    let call = format!("c-{}", uuid());
    let entered = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let agent = durable(
        at.open().await,
        HeldModel {
            inner: ScriptedModel::new([
                call_turn(&call, "charge", json!({"cents": 4})),
                ScriptedTurn::new().text("Charged 4."),
            ]),
            held_turn: 1,
            asked: AtomicUsize::new(0),
            entered: entered.clone(),
            release: release.clone(),
        },
    );
    send(&agent, &id, "charge 4").await;
    let resolved = tokio::time::timeout(
        Duration::from_secs(5),
        agent.resolve(&id, &call, Resolution::Approve),
    )
    .await
    .unwrap_or_else(|_| panic!("resolve waited for the resumed turn"))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(resolved.pending, 0);
    // The resumed run reaches the model and is held there.
    tokio::time::timeout(Duration::from_secs(10), entered.notified())
        .await
        .unwrap_or_else(|_| panic!("the resumed turn never asked the model"));
    let stored = agent
        .conversation(&id)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("{id} is stored"));
    assert_eq!(stored.status, ConversationStatus::Running);
    assert_eq!(
        progress(&calls(&agent, &id).await),
        [(call.clone(), CallProgress::Resolved)]
    );
    let watch = tokio::spawn({
        let watch = agent.watch(&id);
        tokio::time::timeout(Duration::from_secs(10), watch.collect::<Vec<_>>())
    });
    release.notify_one();
    let events = watch
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|_| panic!("the resumed run never ended"));
    assert_eq!(text_of(&events), "Charged 4.");
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");
}

/// A SQLite file made before calls kept the model's reason (no `reasoning`
/// column) opens: the column is added, the old rows read without a reason,
/// and new rows keep theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_file_made_before_reasons_were_kept_still_opens() {
    use sqlx::Executor as _;

    let file = TempDb::new("before-reasoning");
    let raw = sqlx::SqlitePool::connect(&format!("sqlite://{}?mode=rwc", file.0.display()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // The tables as an Aptix before this column made them.
    raw.execute(
        "CREATE TABLE aptix_conversations (
            id TEXT NOT NULL PRIMARY KEY, session_id TEXT, messages TEXT NOT NULL,
            status TEXT NOT NULL, owner TEXT, lease_until INTEGER NOT NULL,
            version INTEGER NOT NULL, changed_at INTEGER NOT NULL);
         CREATE TABLE aptix_calls (
            conversation_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, step TEXT NOT NULL,
            tool TEXT NOT NULL, arguments TEXT NOT NULL, payload TEXT NOT NULL,
            state TEXT NOT NULL, outcome TEXT, deadline INTEGER,
            created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, requested TEXT,
            PRIMARY KEY (conversation_id, tool_call_id, step));
         INSERT INTO aptix_conversations VALUES ('old', NULL, '[]', 'suspended', NULL, 0, 3, 1);
         INSERT INTO aptix_calls VALUES ('old', 'call_old', 'approval', 'charge',
            '{\"cents\":1}', '{\"cents\":1}', 'pending', NULL, NULL, 1, 1, NULL);",
    )
    .await
    .unwrap_or_else(|e| panic!("the old schema: {e}"));
    raw.close().await;

    let store = SqliteStore::open(&file.0)
        .await
        .unwrap_or_else(|e| panic!("an old file must open: {e}"));
    let old = store
        .call("old", "call_old", Step::Approval)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("the old row is kept"));
    assert_eq!((old.state, old.reasoning), (CallState::Pending, None));
    let agent = scripted(Arc::new(store.clone()), Vec::new());
    let shown = pending(&agent, "old").await;
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(shown[0].reasoning, None);
    assert_eq!(shown[0].executor, Some(ExecutorKind::Server));
    let new = CallRecord {
        tool_call_id: "call_new".to_owned(),
        reasoning: Some("kept now".to_owned()),
        ..old
    };
    assert!(
        store
            .insert_call(&new)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    );
    store.close().await;
    // And again, the column there already.
    let reopened = SqliteStore::open(&file.0)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let read = reopened
        .call("old", "call_new", Step::Approval)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        read.and_then(|row| row.reasoning).as_deref(),
        Some("kept now")
    );
    reopened.close().await;
}

/// A PostgreSQL database at schema version 2 (before `reasoning`) is
/// migrated by the first process that connects: old rows read without a
/// reason, new rows keep theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_database_at_schema_2_is_migrated() {
    use aptix::store::PostgresStore;
    use sqlx::Executor as _;

    let Some(url) = pg_url() else {
        return;
    };
    let admin = PostgresStore::connect(&url)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let name = format!("aptix_v2_{}", uuid().replace('-', "_"));
    admin
        .pool()
        .execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .await
        .unwrap_or_else(|e| panic!("a scratch database: {e}"));
    // The same server, the scratch database.
    let (base, query) = url.split_once('?').unwrap_or((url.as_str(), ""));
    let server = base.rsplit_once('/').map_or_else(
        || panic!("APTIX_TEST_PG_URL names no database: {url}"),
        |(server, _)| server,
    );
    let scratch = match query {
        "" => format!("{server}/{name}"),
        query => format!("{server}/{name}?{query}"),
    };
    let outcome = async {
        // Made at version 3, then taken back to what version 2 made.
        let first = PostgresStore::connect(&scratch).await?;
        first
            .pool()
            .execute(
                "ALTER TABLE aptix_calls DROP COLUMN reasoning;
                 UPDATE aptix_schema SET version = 2;
                 INSERT INTO aptix_calls (conversation_id, tool_call_id, step, tool, arguments,
                     payload, state, outcome, deadline, created_at, updated_at, requested)
                 VALUES ('old', 'call_old', 'approval', 'charge', '{}', '{}', 'pending',
                     NULL, NULL, 1, 1, NULL);",
            )
            .await
            .map_err(aptix::store::StoreError::backend)?;
        first.close().await;
        let migrated = PostgresStore::connect(&scratch).await?;
        let old = migrated.call("old", "call_old", Step::Approval).await?;
        let new = old.clone().map(|old| CallRecord {
            tool_call_id: "call_new".to_owned(),
            reasoning: Some("kept now".to_owned()),
            ..old
        });
        if let Some(new) = &new {
            migrated.insert_call(new).await?;
        }
        let read = migrated.call("old", "call_new", Step::Approval).await?;
        let version: i64 = sqlx::query_scalar("SELECT max(version) FROM aptix_schema")
            .fetch_one(migrated.pool())
            .await
            .map_err(aptix::store::StoreError::backend)?;
        migrated.close().await;
        Ok::<_, aptix::store::StoreError>((old, read, version))
    }
    .await;
    admin
        .pool()
        .execute(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
        )))
        .await
        .unwrap_or_else(|e| panic!("drop the scratch database: {e}"));
    admin.close().await;
    let (old, read, version) = outcome.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        old.map(|old| (old.state, old.reasoning)),
        Some((CallState::Pending, None))
    );
    assert_eq!(
        read.and_then(|row| row.reasoning).as_deref(),
        Some("kept now")
    );
    assert!(version >= 3, "migrated to version {version}");
}
